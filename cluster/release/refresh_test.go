package release

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// tagRegistry answers the OCI distribution API's tag list for any
// repository, holding each request until hold is closed (or at once when
// it is nil), and records how many requests it held at most at once.
type tagRegistry struct {
	srv         *httptest.Server
	now, most   atomic.Int64
	tags        atomic.Value // []string
	hold        chan struct{}
	listedCount atomic.Int64
}

func newTagRegistry(t *testing.T, hold chan struct{}, tags ...string) *tagRegistry {
	r := &tagRegistry{hold: hold}
	r.tags.Store(tags)
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n := r.now.Add(1)
		defer r.now.Add(-1)
		for {
			m := r.most.Load()
			if n <= m || r.most.CompareAndSwap(m, n) {
				break
			}
		}
		if r.hold != nil {
			select {
			case <-r.hold:
			case <-req.Context().Done():
				return
			}
		}
		if req.URL.Path == "/v2/" {
			w.WriteHeader(http.StatusOK)
			return
		}
		name, ok := strings.CutSuffix(strings.TrimPrefix(req.URL.Path, "/v2/"), "/tags/list")
		if !ok {
			http.NotFound(w, req)
			return
		}
		r.listedCount.Add(1)
		w.Header().Set("Content-Type", "application/json")
		tags := r.tags.Load().([]string)
		fmt.Fprintf(w, `{"name":%q,"tags":["%s"]}`, name, strings.Join(tags, `","`))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *tagRegistry) host() string { return strings.TrimPrefix(r.srv.URL, "http://") }

// TestRefresherBoundsConcurrencyAndStops: no more than Concurrency fetches
// run at once, and Run returns, leaving no goroutine, once its context
// ends, even with fetches held by the registry.
func TestRefresherBoundsConcurrencyAndStops(t *testing.T) {
	// Checked after every cleanup (the registry's close) has run. The
	// expirable cache's sweeper never exits in golang-lru v2.0.7: one per
	// Source, for the life of the process.
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		goleak.VerifyNone(t, ignore, goleak.IgnoreAnyFunction("github.com/hashicorp/golang-lru/v2/expirable.NewLRU[...].func1"))
	})
	hold := make(chan struct{})
	reg := newTagRegistry(t, hold, "v1.0.0")
	var repos []string
	for i := range 10 {
		repos = append(repos, fmt.Sprintf("%s/acme/app%d", reg.host(), i))
	}
	s, err := New(Config{Registry: true, Refresh: time.Hour, Concurrency: 2}, Options{Repositories: func() []string { return repos }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	waitFor(t, "two held fetches", func() bool { return reg.now.Load() == 2 })
	close(hold)
	waitFor(t, "every repository", func() bool { return s.Stats().Refreshes == 10 })
	if most := reg.most.Load(); most != 2 {
		t.Errorf("fetches at once: got %d, want 2 (Concurrency)", most)
	}
	for _, r := range repos {
		if rel := s.Release(r, "v1.0.0"); rel.Status != "" || rel.LatestTag != "v1.0.0" {
			t.Errorf("%s: got %+v", r, rel)
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
}

// TestChangesOnlyWhenAnAnswerChanges: a refresh that learns nothing new
// does not move the generation; one that does closes the channel.
func TestChangesOnlyWhenAnAnswerChanges(t *testing.T) {
	reg := newTagRegistry(t, nil, "v1.0.0")
	repo := reg.host() + "/acme/api"
	s := runSource(t, Config{Registry: true, Refresh: 50 * time.Millisecond}, repo)
	waitFor(t, "the first answer", func() bool { return s.Release(repo, "").LatestTag == "v1.0.0" })
	gen, changed := s.Changes()
	n := s.Stats().Refreshes
	waitFor(t, "three more refreshes", func() bool { return s.Stats().Refreshes >= n+3 })
	select {
	case <-changed:
		t.Fatal("refreshes with the same tags announced a change")
	default:
	}
	if g, _ := s.Changes(); g != gen {
		t.Fatalf("generation moved from %d to %d without a change", gen, g)
	}
	reg.tags.Store([]string{"v1.0.0", "v1.1.0"})
	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatal("a new tag was not announced")
	}
	if got := s.Release(repo, "").LatestTag; got != "v1.1.0" {
		t.Fatalf("latest: got %q, want v1.1.0", got)
	}
}
