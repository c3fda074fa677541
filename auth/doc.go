// Package auth signs users in with OpenID Connect, turns a validated token
// into a Principal, and derives from it the one Scope every route and stream
// filters by. It imports no web framework, no Kubernetes client and nothing
// else of deployd: handlers adapt it to HTTP routes. The contract it keeps
// is ARCHITECTURE.md's Tenancy.
//
// # Fail closed
//
// New never returns a weaker mode. Without DEPLOY_PUBLIC_URL, with a bad
// setting, or while the issuer cannot be discovered, sign-in is disabled:
// Status().Reason names the missing setting ("sign-in disabled:
// DEPLOY_PUBLIC_URL is not set"), StartLogin and FinishLogin return
// ErrDisabled, and Verify and SessionPrincipal refuse every token and cookie.
// Nothing is ever accepted unverified. Plain http is allowed for the issuer
// only when its host is loopback, and for the public URL only when it is
// http://127.0.0.1, http://[::1] or http://localhost; on such a public URL the
// cookies are issued without Secure (some browsers and tools do not keep
// Secure cookies received over plain http even on loopback, and loopback
// traffic never leaves the host); everywhere else they are Secure.
//
// # Goroutines
//
// When the issuer is unreachable at start, New starts one goroutine that
// retries discovery with exponential backoff (Config.DiscoveryRetry doubling
// to one minute). The Authenticator owns it; it exits when discovery succeeds,
// when the context given to New is cancelled, or when Close is called (Close
// waits for it and is idempotent). Nothing else in this package starts a
// goroutine: the caches run without the LRU package's sweeper and check each
// entry's own deadline, with the injected clock, on every hit.
//
// # Tokens
//
// A token is accepted only after go-oidc checked its signature against the
// issuer's published keys with an algorithm from the allow-list (default
// RS256, ES256; never HS* or none), its issuer and its expiry, and this
// package checked that its audience includes the client id or one of the
// extra audiences. Verified tokens are cached (bounded LRU keyed by the
// token's SHA-256), each entry until the token's exp and at most 10 minutes;
// exp is checked on every hit. Opened session cookies are cached the same
// way, keyed by the SHA-256 of the sealed value, until the earlier of the
// session's end and the token's exp. No cache holds a token or a cookie
// value. A cached Principal is shared by the requests presenting the same
// credential (VerifyShared, SessionPrincipal); Verify hands out a copy.
//
// # Cookies
//
// Both cookies are sealed with AES-256-GCM under keys derived with
// HKDF-SHA256 from DEPLOY_COOKIE_KEY (one key per purpose), so a client can
// neither read nor forge them; both are HttpOnly and SameSite=Lax.
//   - The flow cookie (deploy_flow, Path=/v1/deploy, 10 minutes) holds state,
//     nonce, PKCE verifier, return path and issue time. It is used once: the
//     callback deletes it, and the state of every completed flow is recorded
//     (bounded, until the flow's own expiry) so a replayed cookie is refused.
//   - The session cookie (deploy_session.0, Path=/) holds the ID token until
//     min(token exp, sign-in + 24 h). When the sealed value exceeds one
//     cookie (3800 characters) it is split over deploy_session.1, .2, .3; a
//     token that does not fit in four is refused with ErrSessionTooLarge.
//     With an https public URL the names carry the __Host- (session) and
//     __Secure- (flow) prefixes.
//
// # Claims and tenancy
//
// The org is the string claim "owner" (IAM_ORG_CLAIM); SuperAdmin is org ==
// IAM_ADMIN_ORG ("admin"); OrgAdmin is the claim "isAdmin"
// (IAM_ORG_ADMIN_CLAIM), true or "true". Providers that carry organizations
// as groups set IAM_ORG_GROUP_PREFIX (e.g. "org:"): the org is then the first
// group "org:<name>" in the groups claim (IAM_GROUPS_CLAIM), the org claim is
// ignored, and membership of "org:<admin org>" makes a SuperAdmin. An org
// must be a lower-case DNS label that fits "tenant-<org>"; anything else
// counts as no org (403). ScopeFor is the single tenancy rule.
//
// # Logging
//
// The logger is passed in. Tokens, cookie values, codes, PKCE verifiers,
// state and nonce never appear in a log line or in an error's text. Of a
// refused authorization or code exchange only the provider's error code is
// logged, never its description; discovery failures are logged truncated.
package auth
