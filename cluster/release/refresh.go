package release

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"
)

// maxRound is the longest the refresher waits before it looks at the
// fleet again for repositories that appeared or became due.
const maxRound = 5 * time.Second

// Run is the refresher: each round it reads the repositories, starts a
// fetch for each one that is due (at most Concurrency at once), and
// schedules it again after a jittered period. It returns when ctx ends,
// after every fetch it started has returned. Call it once.
func (s *Source) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, s.cfg.Concurrency)
	round := min(s.cfg.Refresh/10, maxRound)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-s.kick:
		}
		repos := s.repos()
		s.forget(repos)
		for _, repo := range repos {
			if !s.claim(repo) {
				continue
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				s.refresh(ctx, repo)
			}()
		}
		timer.Reset(round)
	}
}

// RefreshNow makes the refresher start its next round at once (a round
// fetches only the repositories that are due).
func (s *Source) RefreshNow() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// claim marks repo as being fetched when it is due and not in flight.
func (s *Source) claim(repo string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[repo] {
		return false
	}
	if next, ok := s.next[repo]; ok && s.now().Before(next) {
		return false
	}
	s.running[repo] = true
	return true
}

// forget drops the schedule of repositories no App uses any more; their
// cached facts expire on their own.
func (s *Source) forget(repos []string) {
	keep := make(map[string]bool, len(repos))
	for _, r := range repos {
		keep[r] = true
	}
	s.mu.Lock()
	for r := range s.next {
		if !keep[r] && !s.running[r] {
			delete(s.next, r)
		}
	}
	s.mu.Unlock()
}

// refresh fetches one repository from every configured source and stores
// what was learnt.
func (s *Source) refresh(ctx context.Context, repo string) {
	next := s.now().Add(s.jittered())
	defer func() {
		s.mu.Lock()
		delete(s.running, repo)
		s.next[repo] = next
		s.mu.Unlock()
	}()
	old, _ := s.cache.Peek(repo)
	f := &facts{}
	if old != nil {
		*f = *old
	}
	if s.registry != nil {
		cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		latest, err := s.registry.latest(cctx, repo)
		cancel()
		if ctx.Err() != nil {
			return // stopping: keep what was known
		}
		f.registry = state{fetched: true}
		if err != nil {
			f.registry.err = s.failed(repo, "registry", err)
		} else {
			f.latestTag = latest
		}
	}
	if s.forge != nil {
		if until, ok := s.forgeBlocked(); ok {
			next = until // keep what was known, pending if nothing; retry when allowed
		} else {
			cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
			rels, err := s.forge.releases(cctx, forgeRepo(repo), s.now())
			cancel()
			if ctx.Err() != nil {
				return
			}
			var rl *rateLimited
			switch {
			case errors.As(err, &rl):
				s.rateLimited.Add(1)
				s.blockForge(rl.until)
				s.log.Warn("release forge asked to slow down; backing off", "repository", repo, "until", rl.until)
				next = rl.until
			case err != nil:
				f.forge = state{fetched: true, err: s.failed(repo, "forge", err)}
			default:
				f.forge = state{fetched: true}
				if until := rels.exhausted; !until.IsZero() {
					s.blockForge(until) // the answer used the last request: wait for the reset
					s.log.Info("release forge rate limit used up; waiting for its reset", "until", until)
				}
				rels.exhausted = time.Time{}
				f.releases = rels
			}
		}
	}
	s.refreshes.Add(1)
	if s.onRefresh != nil {
		s.onRefresh(f.registry.err == "" && f.forge.err == "", s.now())
	}
	s.cache.Add(repo, f)
	if !sameAnswers(old, f) {
		s.notify()
	}
}

// failed counts and logs a failure and returns its safe reason.
func (s *Source) failed(repo, source string, err error) string {
	s.failures.Add(1)
	reason := source + " failed"
	var fe *fetchError
	if errors.As(err, &fe) {
		reason = fe.reason
	}
	s.log.Warn("release fetch failed", "repository", repo, "source", source, "reason", reason, "err", err)
	return reason
}

func (s *Source) forgeBlocked() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.blocked, s.now().Before(s.blocked)
}

func (s *Source) blockForge(until time.Time) {
	s.mu.Lock()
	if until.After(s.blocked) {
		s.blocked = until
	}
	s.mu.Unlock()
}

// jittered is the refresh period ±10%, so repositories first seen
// together do not stay in step.
func (s *Source) jittered() time.Duration {
	p := s.cfg.Refresh
	return p - p/10 + time.Duration(rand.Int64N(int64(p/5)+1))
}
