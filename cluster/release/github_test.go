package release

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hanzoai/deploy/projection"
)

// The release lists served here are GitHub's documented "List releases"
// example (https://docs.github.com/en/rest/releases/releases#list-releases);
// testdata/github/README.md says what was varied. The rate-limit answer is
// the one documented at
// https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#exceeding-the-rate-limit.

const forgeImage = "ghcr.io/octocat/hello-world"

// forge is an httptest GitHub serving octocat/hello-world's releases on
// two pages, or a rate-limit answer while limited is set.
type forge struct {
	srv      *httptest.Server
	limited  atomic.Bool
	lastOne  atomic.Bool // the last page says no request is left until the reset
	requests atomic.Int64
	mu       sync.Mutex
	auth     []string // Authorization headers seen
	pages    []string // page parameters seen
}

func newForge(t *testing.T) *forge {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "github", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	page1, page2, limited := read("releases-page1.json"), read("releases-page2.json"), read("rate-limited.json")
	f := &forge{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		f.mu.Lock()
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		f.pages = append(f.pages, r.URL.Query().Get("page"))
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		if f.limited.Load() {
			w.Header().Set("Retry-After", "3600")
			w.Header().Set("X-RateLimit-Limit", "60")
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
			w.WriteHeader(http.StatusForbidden)
			w.Write(limited)
			return
		}
		if r.URL.Path != "/repos/octocat/hello-world/releases" {
			http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "4999")
		if f.lastOne.Load() && r.URL.Query().Get("page") == "2" {
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
		}
		if r.URL.Query().Get("page") == "2" {
			w.Write(page2)
			return
		}
		next := "http://" + r.Host + r.URL.Path + "?page=2&per_page=100"
		w.Header().Set("Link", "<"+next+`>; rel="next", <`+next+`>; rel="last"`)
		w.Write(page1)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// runSource starts a Source's refresher for the test.
func runSource(t *testing.T, cfg Config, repos ...string) *Source {
	t.Helper()
	s, err := New(cfg, Options{Repositories: func() []string { return repos }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func flagKinds(d projection.Drift) []projection.DriftKind {
	var k []projection.DriftKind
	for _, f := range d.Flags {
		k = append(k, f.Kind)
	}
	return k
}

func TestGitHubReleases(t *testing.T) {
	f := newForge(t)
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := runSource(t, Config{GitHub: true, GitHubAPI: f.srv.URL, GitHubTokenFile: token, Refresh: time.Hour}, forgeImage)
	waitFor(t, "the first refresh", func() bool { return s.Stats().Refreshes >= 1 })

	f.mu.Lock()
	if len(f.pages) != 2 || f.pages[0] != "" || f.pages[1] != "2" {
		t.Errorf("pages read: got %q, want the first page then page 2", f.pages)
	}
	for _, a := range f.auth {
		if a != "Bearer s3cret-token" {
			t.Errorf("Authorization: got %q, want the token file's token", a)
		}
	}
	f.mu.Unlock()

	for _, tc := range []struct {
		declared string
		want     []projection.DriftKind
		assets   int
	}{
		{"v1.0.0", []projection.DriftKind{projection.DriftStale}, 1},                             // latest is v1.2.0 (page 2)
		{"v1.1.0", []projection.DriftKind{projection.DriftStale, projection.DriftZeroAssets}, 0}, // assets: []
		{"v1.2.0", nil, 1},            // on page 2
		{"v1.2.0@sha256:abc", nil, 1}, // a digest pin is the same release
		{"v1.3.0", []projection.DriftKind{projection.DriftStale, projection.DriftNoRelease}, 0}, // a draft is no release
		{"v9.9.9", []projection.DriftKind{projection.DriftStale, projection.DriftNoRelease}, 0}, // never released
		{"v2.0.0-rc.1", []projection.DriftKind{projection.DriftFloatingDeclared}, 1},            // a prerelease is a release, not the latest
	} {
		rel := s.Release(forgeImage, tc.declared)
		if rel.Status != "" || rel.LatestTag != "v1.2.0" || rel.TagsOnly {
			t.Errorf("%s: got status %q latest %q tagsOnly %v, want answered, v1.2.0, false", tc.declared, rel.Status, rel.LatestTag, rel.TagsOnly)
		}
		if rel.DeclaredAssets != tc.assets {
			t.Errorf("%s: assets got %d, want %d", tc.declared, rel.DeclaredAssets, tc.assets)
		}
		d := projection.ComputeDrift(projection.Observed{DeclaredTag: tc.declared, Release: rel})
		if got := flagKinds(d); !equalKinds(got, tc.want) {
			t.Errorf("%s: flags got %v, want %v", tc.declared, got, tc.want)
		}
	}
	if got := s.Release("ghcr.io/octocat/other", "v1.0.0").Status; got != "pending" {
		t.Errorf("a repository never fetched: got status %q, want pending", got)
	}
}

func equalKinds(a, b []projection.DriftKind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestGitHubRateLimitBacksOffAndStaysPending(t *testing.T) {
	f := newForge(t)
	f.limited.Store(true)
	second := "ghcr.io/octocat/second"
	repos := []string{forgeImage}
	var mu sync.Mutex
	s, err := New(Config{GitHub: true, GitHubAPI: f.srv.URL, Refresh: time.Hour}, Options{Repositories: func() []string {
		mu.Lock()
		defer mu.Unlock()
		return repos
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	waitFor(t, "the rate-limited refresh", func() bool { return s.Stats().Refreshes >= 1 })
	if st := s.Stats(); st.RateLimited != 1 || st.Failures != 0 {
		t.Errorf("stats: got %+v, want one rate-limited fetch and no failure", st)
	}
	rel := s.Release(forgeImage, "v9.9.9")
	if rel.Status != "pending" {
		t.Errorf("status: got %q, want pending", rel.Status)
	}
	d := projection.ComputeDrift(projection.Observed{DeclaredTag: "v9.9.9", Release: rel})
	if d.Severity != projection.SeverityOK {
		t.Errorf("drift while rate-limited: got %+v, want ok (never red for want of an answer)", d)
	}

	// A repository that appears during the back-off is not fetched from
	// the forge either: it stays pending, and the forge sees no request.
	mu.Lock()
	repos = []string{forgeImage, second}
	mu.Unlock()
	s.RefreshNow()
	waitFor(t, "the second repository's round", func() bool { return s.Stats().Refreshes >= 2 })
	if got := f.requests.Load(); got != 1 {
		t.Errorf("forge requests during the back-off: got %d, want 1", got)
	}
	if got := s.Release(second, "v1.0.0").Status; got != "pending" {
		t.Errorf("second repository: got status %q, want pending", got)
	}
}

func TestGitHubFailureIsASafeError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"message":"internal detail at db-7.internal"}`, http.StatusBadGateway)
	}))
	t.Cleanup(srv.Close)
	s := runSource(t, Config{GitHub: true, GitHubAPI: srv.URL, Refresh: time.Hour}, forgeImage)
	waitFor(t, "the failed refresh", func() bool { return s.Stats().Refreshes >= 1 })
	rel := s.Release(forgeImage, "v1.0.0")
	if rel.Status != "error (forge answered 502)" {
		t.Errorf("status: got %q, want %q", rel.Status, "error (forge answered 502)")
	}
	if d := projection.ComputeDrift(projection.Observed{DeclaredTag: "v1.0.0", Release: rel}); d.Severity != projection.SeverityOK {
		t.Errorf("drift on a failed fetch: got %+v, want ok", d)
	}
	if st := s.Stats(); st.Failures != 1 {
		t.Errorf("failures: got %d, want 1", st.Failures)
	}
}

// TestGitHubSpentRateLimitWaitsForReset: an answer that used the last
// request of the rate limit is kept, and no request is sent before the
// reset, not even for a repository that appears meanwhile.
func TestGitHubSpentRateLimitWaitsForReset(t *testing.T) {
	f := newForge(t)
	f.lastOne.Store(true)
	var mu sync.Mutex
	repos := []string{forgeImage}
	s, err := New(Config{GitHub: true, GitHubAPI: f.srv.URL, Refresh: time.Hour}, Options{Repositories: func() []string {
		mu.Lock()
		defer mu.Unlock()
		return repos
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "the first refresh", func() bool { return s.Stats().Refreshes >= 1 })
	if rel := s.Release(forgeImage, "v1.0.0"); rel.Status != "" || rel.LatestTag != "v1.2.0" {
		t.Fatalf("answered with the limit spent: got %+v, want the answer kept", rel)
	}
	sent := f.requests.Load()
	mu.Lock()
	repos = []string{forgeImage, "ghcr.io/octocat/second"}
	mu.Unlock()
	s.RefreshNow()
	waitFor(t, "the second repository's round", func() bool { return s.Stats().Refreshes >= 2 })
	if got := f.requests.Load(); got != sent {
		t.Errorf("requests after the limit was spent: got %d more, want none", got-sent)
	}
	if got := s.Release("ghcr.io/octocat/second", "v1.0.0").Status; got != "pending" {
		t.Errorf("second repository: got %q, want pending", got)
	}
}
