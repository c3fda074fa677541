package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hanzoai/deploy/cluster"
	"github.com/hanzoai/deploy/demo/demotest"
	"github.com/hanzoai/deploy/demo/sim"
	"github.com/hanzoai/deploy/fleet"
	"github.com/hanzoai/deploy/projection"
)

// TestLateClusterFoldedAtOnce: a cluster that first answers once the
// plane serves streams (HoldLate reports true) reaches the fold in one
// Apply, whatever the feed's MaxBatch: every row goes out complete, at one
// position, not an App before its ReplicaSets. One that answers at start
// is folded as its lists arrive. Changes after the initial lists go to
// the feed as they come.
func TestLateClusterFoldedAtOnce(t *testing.T) {
	for _, late := range []bool{true, false} {
		t.Run(fmt.Sprintf("late=%v", late), func(t *testing.T) {
			fc := sim.NewFakeCluster(nil)
			if err := fleet.Load(t.Context(), fc.Dynamic(), fleet.RenderAll(fleet.Generate(3, 30))); err != nil {
				t.Fatal(err)
			}
			feed := cluster.NewFeed()
			feed.MaxBatch = 16
			store := projection.NewStore(projection.DefaultConfig())
			var mu sync.Mutex
			var publishes []int // deltas per Apply
			publish := func(ds []projection.Delta) {
				mu.Lock()
				publishes = append(publishes, len(ds))
				mu.Unlock()
			}
			ctx, cancel := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			t.Cleanup(func() { cancel(); wg.Wait() })
			wg.Go(func() { feed.Run(ctx, store, publish, slog.New(slog.DiscardHandler)) })
			var asked atomic.Int32
			w := cluster.NewWatcherForClients(fc.Dynamic(), fc.Discovery(), nil, feed, demotest.Options())
			w.HoldLate(func() bool { asked.Add(1); return late })
			wg.Go(func() { w.Run(ctx) })
			demotest.WaitFor(t, 10*time.Second, "ready", func() (bool, string) { st := w.Status(); return st.Ready(), st.Reason })

			mu.Lock()
			applies := len(publishes)
			mu.Unlock()
			pushed := feed.Pushed()
			if asked.Load() != 1 {
				t.Errorf("HoldLate's func asked %d times, want once (at the first change)", asked.Load())
			}
			switch {
			case pushed <= 16:
				t.Fatalf("%d changes pushed: the fleet must be larger than a batch for this test to mean anything", pushed)
			case late && applies != 1:
				t.Errorf("late cluster: its %d changes folded in %d Applies, want one", pushed, applies)
			case !late && applies < 2:
				t.Errorf("cluster answering at start: its %d changes folded in %d Apply, want them folded as they arrive, in batches of 16", pushed, applies)
			}
			fresh, err := demotest.ListStore(t.Context(), fc.Dynamic())
			if err != nil {
				t.Fatal(err)
			}
			if want, got := fresh.Snapshot().Canonical(), store.Snapshot().Canonical(); !bytes.Equal(want, got) {
				t.Fatalf("ready with a partial projection: %s", demotest.FirstDiff(string(want), string(got)))
			}

			// A change after the lists goes to the feed at once.
			app := fleet.RenderAll(fleet.Generate(4, 1))
			if err := fleet.Load(t.Context(), fc.Dynamic(), app); err != nil {
				t.Fatal(err)
			}
			demotest.WaitFor(t, 10*time.Second, "the new App folded", func() (bool, string) {
				return feed.Applied() > pushed, fmt.Sprintf("applied %d of %d", feed.Applied(), feed.Pushed())
			})
		})
	}
}

// TestEmptyClusterNotLate: a cluster whose lists were empty when the plane
// became ready is not late: its first object, created after, is a live
// change and is folded at once, not held for another discovery.
func TestEmptyClusterNotLate(t *testing.T) {
	fc := sim.NewFakeCluster(nil)
	feed := cluster.NewFeed()
	store := projection.NewStore(projection.DefaultConfig())
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() { feed.Run(ctx, store, nil, slog.New(slog.DiscardHandler)) })
	opts := demotest.Options()
	opts.Discovery = time.Hour // no second discovery: a held change would stay held
	w := cluster.NewWatcherForClients(fc.Dynamic(), fc.Discovery(), nil, feed, opts)
	w.HoldLate(func() bool { return true })
	wg.Go(func() { w.Run(ctx) })
	demotest.WaitFor(t, 10*time.Second, "ready, empty", func() (bool, string) { st := w.Status(); return st.Ready(), st.Reason })
	if err := fleet.Load(t.Context(), fc.Dynamic(), fleet.RenderAll(fleet.Generate(4, 1))); err != nil {
		t.Fatal(err)
	}
	demotest.WaitFor(t, 10*time.Second, "the new App folded", func() (bool, string) {
		return store.Snapshot().Len() > 0, fmt.Sprintf("%d rows, %d changes pushed", store.Snapshot().Len(), feed.Pushed())
	})
}
