// Package release is the drift board's release source: what was released
// for each App's image, read from the outside world in the background and
// answered from a cache.
//
// Sources (DEPLOY_RELEASE_SOURCE; none by default):
//
//   - registry: the tags of the App's image repository (spec.image
//     .repository, registry host included) listed from its OCI registry
//     with go-containerregistry's remote.List, anonymously or with the
//     static credentials of a mounted Docker config file
//     (DEPLOY_REGISTRY_AUTH_FILE; credential helpers are not run). The
//     latest tag is the highest clean vX.Y.Z by semver order: pre-releases,
//     build-tagged and floating tags (latest, main, sha-…) are ignored.
//   - github: the releases of a forge repository through the GitHub REST
//     API (github.com/google/go-github v88, base URL DEPLOY_GITHUB_API,
//     token from DEPLOY_GITHUB_TOKEN_FILE, re-read at every fetch, never
//     logged), every page followed (up to 2,000 releases). The forge
//     repository is the image repository's path after the registry host,
//     its first two segments: ghcr.io/hanzoai/iam → hanzoai/iam,
//     registry.example.com/acme/web/api → acme/web. Drafts are not
//     releases; the release of the declared tag (a digest pin ignored)
//     gives no-release and zero-assets, and, when no registry is
//     configured, the highest clean tag of a non-draft, non-prerelease
//     release is the latest tag.
//
// # Contract
//
//   - Never on a request's path. Release and Changes read memory only (an
//     expirable golang-lru cache and a mutex held for a few instructions);
//     no request ever waits on a registry or a forge.
//   - Not red for want of an answer. A repository not yet fetched is
//     "pending"; one whose last fetch failed is "error (<reason>)", the
//     reason a fixed phrase chosen here ("registry unreachable",
//     "repository not found in the registry", "forge answered 502"…),
//     never the remote's own text. Either way projection.ComputeDrift
//     leaves the release rules out for the row. A forge that asks to slow
//     down (Retry-After, or X-RateLimit-Remaining: 0 with its reset time)
//     stops every forge fetch until then; what was known is kept, and a
//     repository never fetched stays pending.
//   - Goroutines. Run is the refresher and the package's only long-lived
//     goroutine; it starts at most Config.Concurrency fetches at once,
//     each bounded by Config.Timeout, and returns when its context ends,
//     after they have returned. Each repository is fetched when first
//     seen, then every Config.Refresh ±10%. The repositories are re-read
//     (Options.Repositories, usually off the current snapshot) every
//     Refresh/10, at most every 5 s, so a new App is fetched soon after
//     it appears; the cache drops a repository not refreshed for three
//     periods. The expirable cache runs its own sweeper goroutine, which
//     golang-lru v2.0.7 gives no way to stop: a Source is made once per
//     process.
//   - The fold stays pure. Nothing here reaches the projection's writer:
//     release facts join the board on its read side, when a row is
//     encoded. A refresh that changes an answer moves the generation on
//     and closes the channel Changes handed out, so whoever shows the
//     board (the /v1/paas stream) re-reads and sends the rows whose
//     verdict moved.
//   - Stats counts refreshes, failures and rate-limited fetches for
//     metrics.
package release
