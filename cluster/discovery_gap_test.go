package cluster_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/hanzoai/deploy/cluster"
	"github.com/hanzoai/deploy/demo/demotest"
	"github.com/hanzoai/deploy/demo/sim"
	"github.com/hanzoai/deploy/fleet"
	"github.com/hanzoai/deploy/projection"
)

// gappyDiscovery answers one group-version 404 while gaps > 0, one
// discovery at a time (as an API server that has just started serves its
// CRDs' groups a moment after its own), then as the cluster does.
type gappyDiscovery struct {
	discovery.DiscoveryInterface
	gv   string
	gaps atomic.Int32
}

func (d *gappyDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	if gv == d.gv && d.gaps.Load() > 0 {
		d.gaps.Add(-1)
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "apps.hanzo.ai"}, gv)
	}
	return d.DiscoveryInterface.ServerResourcesForGroupVersion(gv)
}

// TestKindMissingOnceIsKept: a discovery that does not list a kind the
// watcher reads (its CRD's group not served yet, as right after the API
// server started) does not drop the kind's objects from the fold; two in
// a row (the CRD removed) do.
func TestKindMissingOnceIsKept(t *testing.T) {
	fc := sim.NewFakeCluster(nil)
	if err := fleet.Load(t.Context(), fc.Dynamic(), fleet.RenderAll(fleet.Generate(3, 12))); err != nil {
		t.Fatal(err)
	}
	ki := projection.KindCDApplication.Info()
	disco := &gappyDiscovery{DiscoveryInterface: fc.Discovery(), gv: schema.GroupVersion{Group: ki.Group, Version: ki.Version}.String()}
	feed := cluster.NewFeed()
	store := projection.NewStore(projection.DefaultConfig())
	opts := demotest.Options()
	opts.Discovery = 20 * time.Millisecond
	w := cluster.NewWatcherForClients(fc.Dynamic(), disco, nil, feed, opts)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var lost atomic.Bool
	wg.Go(func() {
		feed.Run(ctx, store, func([]projection.Delta) {
			if w.Status().Ready() && len(store.Snapshot().CDApplications()) == 0 {
				lost.Store(true)
			}
		}, slog.New(slog.DiscardHandler))
	})
	wg.Go(func() { w.Run(ctx) })
	demotest.WaitFor(t, 10*time.Second, "ready with the CD Application", func() (bool, string) {
		return w.Status().Ready() && len(store.Snapshot().CDApplications()) == 1, w.Status().Reason
	})

	// One discovery misses the group, then several answer it.
	disco.gaps.Store(1)
	demotest.WaitFor(t, 10*time.Second, "the gap to be discovered", func() (bool, string) { return disco.gaps.Load() == 0, "" })
	time.Sleep(10 * opts.Discovery)
	if lost.Load() || len(store.Snapshot().CDApplications()) != 1 {
		t.Fatalf("a discovery that missed the CD Applications' group once dropped them: %d held", len(store.Snapshot().CDApplications()))
	}
	// Missing for good: the kind goes, with its objects.
	disco.gaps.Store(1 << 30)
	demotest.WaitFor(t, 10*time.Second, "the CD Application goes with its kind", func() (bool, string) {
		return len(store.Snapshot().CDApplications()) == 0, fmt.Sprint(len(store.Snapshot().CDApplications()))
	})
}
