// Package demotest holds what the demo's tests share: deployd's read path
// (watcher, feed, store) run against any cluster, a projection built from a
// fresh LIST to compare it with, a condition wait with a deadline, a clock
// moved by hand, and a summary of a projection free of uids,
// resourceVersions and timestamps.
//
// A ReadSide owns two goroutines (the watcher and the feed); they stop, and
// are waited for, in the test's cleanup.
package demotest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/hanzoai/deploy/cluster"
	"github.com/hanzoai/deploy/projection"
)

// ReadSide is deployd's read path over one cluster: watcher, feed, store.
type ReadSide struct {
	Store   *projection.Store
	Watcher *cluster.Watcher

	mu     sync.Mutex
	deltas []projection.Delta
}

// Options are the watcher options tests use: the default namespace map and
// a fast discovery poll.
func Options() cluster.Options {
	return cluster.Options{Namespaces: projection.DefaultNamespaces(), Discovery: 100 * time.Millisecond, Log: slog.New(slog.DiscardHandler)}
}

// WatchClients runs deployd's read path over the given clients (a
// FakeCluster's) until the test ends.
func WatchClients(t testing.TB, dyn dynamic.Interface, disco discovery.DiscoveryInterface) *ReadSide {
	t.Helper()
	feed := cluster.NewFeed()
	return Watch(t, cluster.NewWatcherForClients(dyn, disco, nil, feed, Options()), feed)
}

// Watch runs w and feed into a fresh store until the test ends.
func Watch(t testing.TB, w *cluster.Watcher, feed *cluster.Feed) *ReadSide {
	t.Helper()
	rs := &ReadSide{Store: projection.NewStore(projection.DefaultConfig()), Watcher: w}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); w.Run(ctx) }()
	go func() {
		defer wg.Done()
		feed.Run(ctx, rs.Store, func(d []projection.Delta) {
			rs.mu.Lock()
			rs.deltas = append(rs.deltas, d...)
			rs.mu.Unlock()
		}, slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return rs
}

// TakeDeltas returns the deltas published since the last call.
func (rs *ReadSide) TakeDeltas() []projection.Delta {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	d := rs.deltas
	rs.deltas = nil
	return d
}

// WaitConverged waits until the watched projection equals one built from a
// fresh LIST through dyn: every write so far has reached the store.
func (rs *ReadSide) WaitConverged(t testing.TB, dyn dynamic.Interface, timeout time.Duration) {
	t.Helper()
	WaitFor(t, timeout, "the watched projection converges to a fresh list", func() (bool, string) {
		if st := rs.Watcher.Status(); !st.Ready() {
			return false, "watcher not ready: " + st.Reason
		}
		fresh, err := ListStore(t.Context(), dyn)
		if err != nil {
			return false, err.Error()
		}
		want, got := fresh.Snapshot().Canonical(), rs.Store.Snapshot().Canonical()
		if bytes.Equal(want, got) {
			return true, ""
		}
		return false, FirstDiff(string(want), string(got))
	})
}

// ListStore builds a projection from a fresh LIST of every registry kind,
// decoded as the watcher does.
func ListStore(ctx context.Context, dyn dynamic.Interface) (*projection.Store, error) {
	s := projection.NewStore(projection.DefaultConfig())
	ns := projection.DefaultNamespaces()
	var batch []projection.Change
	for _, ki := range projection.Registry() {
		list, err := dyn.Resource(ki.Kind.GVR()).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, item := range list.Items {
			if !ns.Watched(item.GetNamespace()) {
				continue
			}
			o, err := projection.DecodeKind(ki.Kind, item.Object)
			if err != nil {
				return nil, err
			}
			batch = append(batch, projection.Change{Op: projection.Upsert, Object: o})
		}
	}
	_, err := s.Apply(batch...)
	return s, err
}

// WaitFor polls cond (from a millisecond, backing off to 50 ms) until it
// holds, failing the test at the deadline with cond's last word.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	interval := time.Millisecond
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last: %s", what, timeout, last)
		}
		timer := time.NewTimer(interval)
		select {
		case <-t.Context().Done():
			timer.Stop()
			t.Fatalf("%s: the test ended", what)
		case <-timer.C:
		}
		interval = min(interval*2, 50*time.Millisecond)
	}
}

// FirstDiff names the first line where two texts differ.
func FirstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) && i < len(g); i++ {
		if w[i] != g[i] {
			return fmt.Sprintf("line %d: want %q, got %q", i+1, w[i], g[i])
		}
	}
	return fmt.Sprintf("lengths %d vs %d lines", len(w), len(g))
}

// Clock is a clock a test moves by hand.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
