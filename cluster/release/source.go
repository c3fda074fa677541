package release

import (
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/hanzoai/deploy/projection"
)

// Source answers the drift board's release questions from a cache that
// its refresher (Run) fills in the background. See the package
// documentation for its contract.
type Source struct {
	cfg   Config
	log   *slog.Logger
	repos func() []string
	now   func() time.Time
	// onRefresh is Options.OnRefresh (nil: none).
	onRefresh func(ok bool, at time.Time)
	registry  *registryLister // nil when not configured
	forge     *githubLister   // nil when not configured
	cache     *expirable.LRU[string, *facts]

	mu      sync.Mutex
	changed chan struct{} // closed at the next change of an answer
	gen     uint64
	next    map[string]time.Time // when each repository is due again
	running map[string]bool      // fetches in flight
	blocked time.Time            // the forge asked to wait until then

	kick        chan struct{}
	refreshes   atomic.Uint64
	failures    atomic.Uint64
	rateLimited atomic.Uint64
}

// Options are what a Source needs besides its Config.
type Options struct {
	// Repositories lists the image repositories to keep fresh, read at
	// every round of the refresher (SnapshotRepositories reads them off
	// the current snapshot).
	Repositories func() []string
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Transport carries the registry's and the forge's requests
	// (http.DefaultTransport when nil).
	Transport http.RoundTripper
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// OnRefresh, when set, is called after each repository's refresh
	// (for metrics): ok when no source of it failed. It must not block.
	OnRefresh func(ok bool, at time.Time)
}

// facts is what was last learnt of one image repository. A value in the
// cache is never modified: a refresh stores a new one.
type facts struct {
	registry  state
	latestTag string // from the registry
	forge     state
	releases  forgeReleases
}

// state is one source's standing for a repository.
type state struct {
	fetched bool   // it answered at least once, or failed
	err     string // the last failure's safe reason, "" when it answered
}

// fetchError is a failure whose reason is safe to show; the cause goes
// to the log only.
type fetchError struct {
	reason string
	cause  error
}

func (e *fetchError) Error() string { return e.reason }
func (e *fetchError) Unwrap() error { return e.cause }

// New returns a Source for cfg; nil when no source is configured. Start
// Run for its answers to leave "pending".
func New(cfg Config, opts Options) (*Source, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	cfg = cfg.withDefaults()
	if opts.Repositories == nil {
		return nil, errors.New("release: Options.Repositories is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Transport == nil {
		opts.Transport = http.DefaultTransport
	}
	s := &Source{
		cfg:       cfg,
		log:       opts.Logger,
		repos:     opts.Repositories,
		now:       opts.Now,
		onRefresh: opts.OnRefresh,
		cache:     expirable.NewLRU[string, *facts](cfg.CacheSize, nil, 3*cfg.Refresh),
		changed:   make(chan struct{}),
		next:      map[string]time.Time{},
		running:   map[string]bool{},
		kick:      make(chan struct{}, 1),
	}
	if cfg.Registry {
		l, err := newRegistryLister(cfg.RegistryAuthFile, opts.Transport)
		if err != nil {
			return nil, err
		}
		s.registry = l
	}
	if cfg.GitHub {
		s.forge = &githubLister{base: cfg.GitHubAPI, tokenFile: cfg.GitHubTokenFile, hc: &http.Client{Transport: opts.Transport}}
	}
	return s, nil
}

// Release answers for an App of image repository (registry host
// included) declaring declaredTag. It reads the cache only: it never
// waits on a registry or a forge.
func (s *Source) Release(repository, declaredTag string) *projection.Release {
	f, ok := s.cache.Get(repository)
	if !ok {
		return &projection.Release{Status: "pending", TagsOnly: s.forge == nil}
	}
	r := &projection.Release{TagsOnly: s.forge == nil}
	var errs []string
	pending := false
	if s.registry != nil {
		pending = pending || !f.registry.fetched
		if f.registry.err != "" {
			errs = append(errs, f.registry.err)
		}
		r.LatestTag = f.latestTag
	}
	if s.forge != nil {
		pending = pending || !f.forge.fetched
		if f.forge.err != "" {
			errs = append(errs, f.forge.err)
		}
		if s.registry == nil {
			r.LatestTag = f.releases.latest
		}
		tag, _, _ := strings.Cut(declaredTag, "@")
		if rel, ok := f.releases.byTag[tag]; ok {
			r.DeclaredURL, r.DeclaredAssets = rel.URL, rel.Assets
			if r.DeclaredURL == "" {
				r.DeclaredURL = "release " + tag
			}
		}
	}
	switch {
	case len(errs) > 0:
		r.Status = "error (" + strings.Join(errs, "; ") + ")"
	case pending:
		r.Status = "pending"
	}
	return r
}

// Changes returns the generation of the answers and a channel closed when
// a refresh changes an answer (the generation then moves on).
func (s *Source) Changes() (uint64, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen, s.changed
}

// Stats are the refresher's counters, for metrics and tests.
type Stats struct {
	Refreshes   uint64 // repository fetches completed, failed or not
	Failures    uint64 // fetches of one source that failed (rate limits apart)
	RateLimited uint64 // fetches the forge asked to retry later
	Cached      int    // repositories whose facts are held
	Generation  uint64 // times an answer changed
}

// Stats returns the current counters.
func (s *Source) Stats() Stats {
	gen, _ := s.Changes()
	return Stats{
		Refreshes:   s.refreshes.Load(),
		Failures:    s.failures.Load(),
		RateLimited: s.rateLimited.Load(),
		Cached:      s.cache.Len(),
		Generation:  gen,
	}
}

// notify moves the generation on and wakes whoever waits on Changes.
func (s *Source) notify() {
	s.mu.Lock()
	s.gen++
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// sameAnswers reports whether two facts give every App the same answers.
func sameAnswers(a, b *facts) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.registry == b.registry && a.latestTag == b.latestTag && a.forge == b.forge &&
		a.releases.latest == b.releases.latest && maps.Equal(a.releases.byTag, b.releases.byTag)
}

// SnapshotRepositories lists the image repositories of a snapshot's
// operator Apps, each once.
func SnapshotRepositories(snapshot func() *projection.Snapshot) func() []string {
	return func() []string {
		seen := map[string]bool{}
		var out []string
		for a := range snapshot().Apps() {
			if a.Row != projection.RowApp || a.Repository == "" || seen[a.Repository] {
				continue
			}
			seen[a.Repository] = true
			out = append(out, a.Repository)
		}
		return out
	}
}
