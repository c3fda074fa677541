package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hanzoai/deploy/auth/authtest"
	"github.com/hanzoai/deploy/cluster"
	"github.com/hanzoai/deploy/demo/demotest"
	"github.com/hanzoai/deploy/demo/sim"
	"github.com/hanzoai/deploy/fleet"
	"github.com/hanzoai/deploy/projection"
)

// TestReadyWaitsForTheFold: every informer having listed is not enough to
// be ready — the writer must have folded what the lists returned, or a
// ready deployd would serve a fleet half loaded. OnReady is called once,
// when it is.
func TestReadyWaitsForTheFold(t *testing.T) {
	fc := sim.NewFakeCluster(nil)
	apps := fleet.Generate(7, 40)
	if err := fleet.Load(t.Context(), fc.Dynamic(), fleet.RenderAll(apps)); err != nil {
		t.Fatal(err)
	}
	feed := cluster.NewFeed()
	opts := demotest.Options()
	logs := &authtest.LogBuffer{}
	opts.Log, opts.Progress = slog.New(slog.NewTextHandler(logs, nil)), 10*time.Millisecond
	var readyCalls atomic.Int32
	opts.OnReady = func() { readyCalls.Add(1) }
	w := cluster.NewWatcherForClients(fc.Dynamic(), fc.Discovery(), nil, feed, opts)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// The writer is not running: the lists are in, nothing is folded.
	demotest.WaitFor(t, 10*time.Second, "every kind lists", func() (bool, string) {
		st := w.Status()
		if !st.AppCRD {
			return false, st.Reason
		}
		for _, ks := range st.Kinds {
			if ks.Served && !ks.Synced {
				return false, ks.Kind + " not synced"
			}
		}
		return true, ""
	})
	st := w.Status()
	if st.Ready() || !strings.Contains(st.Reason, "folding") || feed.Pushed() == 0 || readyCalls.Load() != 0 {
		t.Fatalf("lists in, nothing folded: ready %v, reason %q, pushed %d, OnReady called %d times", st.Ready(), st.Reason, feed.Pushed(), readyCalls.Load())
	}
	// The progress says so, in counts.
	if want := fmt.Sprintf("syncing: %d of %d kinds listed, 0 objects folded", st.KindsServed, st.KindsServed); st.KindsServed == 0 || st.Progress != want {
		t.Fatalf("progress %q, want %q", st.Progress, want)
	}

	// And the log, every Progress while the lists wait for the fold.
	demotest.WaitFor(t, 10*time.Second, "a progress line", func() (bool, string) {
		return strings.Contains(logs.String(), fmt.Sprintf("msg=\"initial sync\" kindsListed=%d kinds=%d objectsFolded=0", st.KindsServed, st.KindsServed)), logs.String()
	})

	store := projection.NewStore(projection.DefaultConfig())
	var batched atomic.Uint64
	feed.OnBatch = func(b cluster.Batch) { batched.Add(uint64(b.Size)) }
	go feed.Run(ctx, store, nil, slog.New(slog.DiscardHandler))
	demotest.WaitFor(t, 10*time.Second, "ready", func() (bool, string) { st := w.Status(); return st.Ready(), st.Reason })
	if st := w.Status(); st.Progress != "" || st.Folded == 0 {
		t.Fatalf("ready: progress %q, folded %d; want no progress and the lists folded", st.Progress, st.Folded)
	}
	demotest.WaitFor(t, 10*time.Second, "the ready line", func() (bool, string) {
		return strings.Contains(logs.String(), "msg=ready apps=40 objects="), logs.String()
	})
	demotest.WaitFor(t, 10*time.Second, "OnReady", func() (bool, string) {
		return readyCalls.Load() == 1, fmt.Sprintf("called %d times", readyCalls.Load())
	})
	demotest.WaitFor(t, 10*time.Second, "every batch reported", func() (bool, string) {
		return batched.Load() == feed.Applied(), fmt.Sprintf("%d of %d", batched.Load(), feed.Applied())
	})
	if n := feed.Changes(projection.KindApp); n < 40 {
		t.Errorf("%d App changes counted, want at least the 40 Apps", n)
	}
	// At the first ready, the projection is the whole fleet.
	fresh, err := demotest.ListStore(t.Context(), fc.Dynamic())
	if err != nil {
		t.Fatal(err)
	}
	if want, got := fresh.Snapshot().Canonical(), store.Snapshot().Canonical(); !bytes.Equal(want, got) {
		t.Fatalf("ready with a partial projection: %s", demotest.FirstDiff(string(want), string(got)))
	}
}
