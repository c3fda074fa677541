package fleet_test

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/hanzoai/deploy/cluster"
	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/demo/demotest"
	"github.com/hanzoai/deploy/demo/sim"
	"github.com/hanzoai/deploy/fleet"
	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/projection/projectiontest"
)

// The same generated fleet, loaded into a real API server and into the
// fake cluster and watched by deployd in both, gives the same projection as
// folding the rendered objects directly: row by row the same names, health,
// sync, versions, histories and trees.
func TestLoadRealAndFakeAgree(t *testing.T) {
	c := clustertest.Start(t)
	objs := fleet.RenderAll(fleet.Generate(11, fleet.DefaultSize))

	dyn, err := dynamic.NewForConfig(fleet.FastConfig(c.Config))
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := fleet.Load(t.Context(), dyn, objs); err != nil {
		t.Fatal(err)
	}
	t.Logf("loaded %d objects into kube-apiserver in %v", len(objs), time.Since(began).Round(time.Millisecond))
	feed := cluster.NewFeed()
	w, err := cluster.NewWatcher(c.Config, "", feed, demotest.Options())
	if err != nil {
		t.Fatal(err)
	}
	real := demotest.Watch(t, w, feed)

	fc := sim.NewFakeCluster(nil)
	if err := fleet.Load(t.Context(), fc.Dynamic(), objs); err != nil {
		t.Fatal(err)
	}
	fake := demotest.WatchClients(t, fc.Dynamic(), fc.Discovery())

	real.WaitConverged(t, dyn, 60*time.Second)
	fake.WaitConverged(t, fc.Dynamic(), 20*time.Second)

	direct := projection.NewStore(projection.DefaultConfig())
	for _, u := range objs {
		o, err := projection.Decode(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := direct.Apply(projection.Change{Op: projection.Upsert, Object: o}); err != nil {
			t.Fatal(err)
		}
	}
	want := projectiontest.Summary(direct.Snapshot())
	if got := projectiontest.Summary(real.Store.Snapshot()); !slices.Equal(got, want) {
		t.Fatalf("the real API server's projection differs from the rendered fleet's: %s", demotest.FirstDiff(strings.Join(want, "\n"), strings.Join(got, "\n")))
	}
	if got := projectiontest.Summary(fake.Store.Snapshot()); !slices.Equal(got, want) {
		t.Fatalf("the fake cluster's projection differs from the rendered fleet's: %s", demotest.FirstDiff(strings.Join(want, "\n"), strings.Join(got, "\n")))
	}
	if len(want) != fleet.DefaultSize+2 {
		t.Fatalf("%d rows compared, want %d Apps, the site and the CD Application", len(want), fleet.DefaultSize+2)
	}
}

// BenchmarkLoad loads a generated fleet into a real API server, once
// (run it with -benchtime=1x). DEPLOYD_LOAD_APPS sets the size (default
// 1000; the performance budget's fleet is 10000).
func BenchmarkLoad(b *testing.B) {
	size := 1000
	if v, err := strconv.Atoi(os.Getenv("DEPLOYD_LOAD_APPS")); err == nil && v > 0 {
		size = v
	}
	c := clustertest.Start(b)
	objs := fleet.RenderAll(fleet.Generate(1, size))
	dyn, err := dynamic.NewForConfig(fleet.FastConfig(c.Config))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	began := time.Now()
	for range b.N {
		if err := fleet.Load(b.Context(), dyn, objs); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(began)
	b.ReportMetric(float64(len(objs)*b.N)/elapsed.Seconds(), "objects/s")
	b.ReportMetric(float64(len(objs)), "objects")
}
