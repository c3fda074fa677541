package cluster_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hanzoai/deploy/cluster"
	"github.com/hanzoai/deploy/demo/demotest"
	"github.com/hanzoai/deploy/demo/fleet"
	"github.com/hanzoai/deploy/demo/sim"
	"github.com/hanzoai/deploy/projection"
)

// TestReadyWaitsForTheFold: every informer having listed is not enough to
// be ready — the writer must have folded what the lists returned, or a
// ready deployd would serve a fleet half loaded.
func TestReadyWaitsForTheFold(t *testing.T) {
	fc := sim.NewFakeCluster(nil)
	apps := fleet.Generate(7, 40)
	if err := fleet.Load(t.Context(), fc.Dynamic(), fleet.RenderAll(apps)); err != nil {
		t.Fatal(err)
	}
	feed := cluster.NewFeed()
	w := cluster.NewWatcherForClients(fc.Dynamic(), fc.Discovery(), nil, feed, demotest.Options())
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
	if st.Ready() || !strings.Contains(st.Reason, "folding") || feed.Pushed() == 0 {
		t.Fatalf("lists in, nothing folded: ready %v, reason %q, pushed %d", st.Ready(), st.Reason, feed.Pushed())
	}

	store := projection.NewStore(projection.DefaultConfig())
	go feed.Run(ctx, store, nil, slog.New(slog.DiscardHandler))
	demotest.WaitFor(t, 10*time.Second, "ready", func() (bool, string) { st := w.Status(); return st.Ready(), st.Reason })
	// At the first ready, the projection is the whole fleet.
	fresh, err := demotest.ListStore(t.Context(), fc.Dynamic())
	if err != nil {
		t.Fatal(err)
	}
	if want, got := fresh.Snapshot().Canonical(), store.Snapshot().Canonical(); !bytes.Equal(want, got) {
		t.Fatalf("ready with a partial projection: %s", demotest.FirstDiff(string(want), string(got)))
	}
}
