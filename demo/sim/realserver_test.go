package sim_test

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/hanzoai/deploy/cluster"
	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/demo/demotest"
	"github.com/hanzoai/deploy/demo/sim"
	"github.com/hanzoai/deploy/fleet"
	"github.com/hanzoai/deploy/projection"
)

// The simulator runs against a real API server as against the fake one:
// the server assigns uids and generations, statuses go through the status
// subresource, and a rollback and a rolling restart roll out as they do in
// the fake cluster.
func TestSimulatorOnRealAPIServer(t *testing.T) {
	c := clustertest.Start(t)
	dyn, err := dynamic.NewForConfig(fleet.FastConfig(c.Config))
	if err != nil {
		t.Fatal(err)
	}
	clock := demotest.NewClock(time.Now().UTC().Truncate(time.Second))
	s, err := sim.New(t.Context(), dyn, sim.Options{Seed: 1, Apps: 10, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	feed := cluster.NewFeed()
	w, err := cluster.NewWatcher(c.Config, "", feed, demotest.Options())
	if err != nil {
		t.Fatal(err)
	}
	rs := demotest.Watch(t, w, feed)
	rs.WaitConverged(t, dyn, 60*time.Second)

	step := func() {
		t.Helper()
		clock.Advance(10 * time.Second)
		if err := s.Step(t.Context()); err != nil {
			t.Fatalf("step %d: %v", s.StepCount(), err)
		}
		rs.WaitConverged(t, dyn, 30*time.Second)
	}
	row := func(ns, name string) *projection.App { return rs.Store.Snapshot().Get(ns, name) }
	patch := func(kind projection.Kind, ns, name, body string) {
		t.Helper()
		if _, err := dyn.Resource(kind.GVR()).Namespace(ns).Patch(t.Context(), name, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	until := func(ns, name string, limit int, done func(*projection.App) bool) []string {
		t.Helper()
		var seq []string
		for range limit {
			step()
			a := row(ns, name)
			seq = append(seq, state(a))
			if done(a) {
				return seq
			}
		}
		t.Fatalf("%s/%s not done within %d steps: %v", ns, name, limit, seq)
		return nil
	}

	app, _, _ := s.App("hanzo", "gateway")
	previous := app.Releases[len(app.Releases)-2].Tag
	patch(projection.KindApp, "hanzo", "gateway", `{"spec":{"image":{"tag":"`+previous+`"}}}`)
	seq := until("hanzo", "gateway", 6, func(a *projection.App) bool { return state(a) == "Healthy/Synced" && a.Running == previous })
	t.Logf("rollback on kube-apiserver: %v", seq)

	before := row("hanzo", "iam")
	patch(projection.KindDeployment, "hanzo", "iam", `{"spec":{"template":{"metadata":{"annotations":{"hanzo.ai/restartedAt":"2026-11-20T12:05:00Z"}}}}}`)
	seq = until("hanzo", "iam", 10, func(a *projection.App) bool {
		return state(a) == "Healthy/Synced" && len(a.History) == len(before.History)+1
	})
	t.Logf("rolling restart on kube-apiserver: %v", seq)
	if !slices.Contains(seq, "Progressing/Synced") {
		t.Fatalf("sequence %v: the restart never showed Progressing", seq)
	}
}
