package release

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v88/github"
)

// maxReleasePages bounds the pages of releases read per repository (100
// releases a page).
const maxReleasePages = 20

// forgeRelease is one published release of a repository.
type forgeRelease struct {
	URL    string
	Assets int
}

// forgeReleases is what a forge knows of a repository's releases.
type forgeReleases struct {
	byTag  map[string]forgeRelease // published (non-draft) releases by tag
	latest string                  // highest clean tag of a non-draft, non-prerelease release
	// exhausted is when the forge's rate limit resets, set when the last
	// answer said no request is left (X-RateLimit-Remaining: 0).
	exhausted time.Time
}

// githubLister reads releases through the GitHub REST API.
type githubLister struct {
	base      string
	tokenFile string
	hc        *http.Client
}

// rateLimited is a forge's answer to slow down until a time.
type rateLimited struct{ until time.Time }

func (r *rateLimited) Error() string {
	return "forge rate limit until " + r.until.UTC().Format(time.RFC3339)
}

func (l *githubLister) client() (*github.Client, error) {
	base := l.base
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	opts := []github.ClientOptionsFunc{github.WithHTTPClient(l.hc), github.WithURLs(&base, nil)}
	if l.tokenFile != "" {
		b, err := os.ReadFile(l.tokenFile)
		if err != nil {
			return nil, &fetchError{reason: "DEPLOY_GITHUB_TOKEN_FILE cannot be read"}
		}
		if tok := strings.TrimSpace(string(b)); tok != "" {
			opts = append(opts, github.WithAuthToken(tok))
		}
	}
	c, err := github.NewClient(opts...)
	if err != nil {
		return nil, &fetchError{reason: "DEPLOY_GITHUB_API is not a usable base URL", cause: err}
	}
	return c, nil
}

// releases reads every page of owner/name's releases.
func (l *githubLister) releases(ctx context.Context, repo string, now time.Time) (forgeReleases, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok {
		return forgeReleases{}, &fetchError{reason: "the image repository names no <owner>/<name> to read releases from"}
	}
	c, err := l.client()
	if err != nil {
		return forgeReleases{}, err
	}
	out := forgeReleases{byTag: map[string]forgeRelease{}}
	var clean []string
	opts := &github.ListOptions{PerPage: 100}
	for page := 0; page < maxReleasePages; page++ {
		rels, resp, err := c.Repositories.ListReleases(ctx, owner, name, opts)
		if err != nil {
			return forgeReleases{}, githubError(ctx, resp, err, now)
		}
		for _, r := range rels {
			if r.GetDraft() || r.GetTagName() == "" {
				continue
			}
			out.byTag[r.GetTagName()] = forgeRelease{URL: r.GetHTMLURL(), Assets: len(r.Assets)}
			if !r.GetPrerelease() {
				clean = append(clean, r.GetTagName())
			}
		}
		if resp != nil && resp.Header.Get("X-RateLimit-Remaining") == "0" && resp.Rate.Reset.After(now) {
			out.exhausted = resp.Rate.Reset.Time
		}
		if resp == nil || resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	out.latest = Latest(clean)
	return out, nil
}

// githubError turns a forge failure into a safe reason, or into
// rateLimited when the forge asked to slow down (Retry-After, or an
// exhausted X-RateLimit-Remaining with its reset time).
func githubError(ctx context.Context, resp *github.Response, err error, now time.Time) error {
	var rl *github.RateLimitError
	var abuse *github.AbuseRateLimitError
	switch {
	case errors.As(err, &rl):
		return &rateLimited{until: laterOf(now.Add(time.Minute), rl.Rate.Reset.Time)}
	case errors.As(err, &abuse):
		if d := abuse.GetRetryAfter(); d > 0 {
			return &rateLimited{until: now.Add(d)}
		}
		return &rateLimited{until: now.Add(time.Minute)}
	}
	if resp != nil && resp.Response != nil {
		h := resp.Header
		code := resp.StatusCode
		if code == http.StatusForbidden || code == http.StatusTooManyRequests {
			if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s >= 0 {
				return &rateLimited{until: now.Add(time.Duration(s) * time.Second)}
			}
			if h.Get("X-RateLimit-Remaining") == "0" {
				reset, _ := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
				return &rateLimited{until: laterOf(now.Add(time.Minute), time.Unix(reset, 0))}
			}
		}
		switch code {
		case http.StatusUnauthorized, http.StatusForbidden:
			return &fetchError{reason: "forge denied access; check DEPLOY_GITHUB_TOKEN_FILE", cause: err}
		case http.StatusNotFound:
			return &fetchError{reason: "repository not found on the forge", cause: err}
		}
		return &fetchError{reason: fmt.Sprintf("forge answered %d", code), cause: err}
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return &fetchError{reason: "forge timed out", cause: err}
	}
	return &fetchError{reason: "forge unreachable", cause: err}
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// forgeRepo is the forge repository an image's releases live in: the
// image repository's path after the registry host, its first two
// segments (ghcr.io/hanzoai/iam → hanzoai/iam, ghcr.io/acme/web/api →
// acme/web); "" when the path has fewer than two.
func forgeRepo(repository string) string {
	path := repository
	if i := strings.IndexByte(path, '/'); i >= 0 {
		first := path[:i]
		if strings.ContainsAny(first, ".:") || first == "localhost" {
			path = path[i+1:]
		}
	}
	parts := strings.SplitN(path, "/", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return ""
	}
	return parts[0] + "/" + parts[1]
}
