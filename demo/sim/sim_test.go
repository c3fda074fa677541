package sim_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hanzoai/deploy/demo/demotest"
	"github.com/hanzoai/deploy/demo/sim"
	"github.com/hanzoai/deploy/fleet"
	"github.com/hanzoai/deploy/projection"
)

// harness runs a simulator on a fake cluster watched by deployd's read
// path.
type harness struct {
	t     *testing.T
	clock *demotest.Clock
	fc    *sim.FakeCluster
	sim   *sim.Simulator
	rs    *demotest.ReadSide
}

func newHarness(t *testing.T, opts sim.Options) *harness {
	t.Helper()
	h := &harness{t: t, clock: demotest.NewClock(fleet.Epoch)}
	h.fc = sim.NewFakeCluster(h.clock.Now)
	if opts.Apps == 0 {
		opts.Apps = 30
	}
	opts.Now = h.clock.Now
	s, err := sim.New(t.Context(), h.fc.Dynamic(), opts)
	if err != nil {
		t.Fatal(err)
	}
	h.sim = s
	h.rs = demotest.WatchClients(t, h.fc.Dynamic(), h.fc.Discovery())
	h.rs.WaitConverged(t, h.fc.Dynamic(), 20*time.Second)
	if n := h.rs.Store.Snapshot().Len(); n != opts.Apps+1 {
		t.Fatalf("%d rows after the load, want %d", n, opts.Apps+1)
	}
	return h
}

// step advances the clock and the simulation by one step and waits until
// the store has seen every write of it.
func (h *harness) step() {
	h.t.Helper()
	h.clock.Advance(10 * time.Second)
	if err := h.sim.Step(h.t.Context()); err != nil {
		h.t.Fatalf("step %d: %v", h.sim.StepCount(), err)
	}
	h.rs.WaitConverged(h.t, h.fc.Dynamic(), 20*time.Second)
}

func (h *harness) row(namespace, name string) *projection.App {
	h.t.Helper()
	a := h.rs.Store.Snapshot().Get(namespace, name)
	if a == nil {
		h.t.Fatalf("no row %s/%s", namespace, name)
	}
	return a
}

// patch merge-patches an object, as deployd's writes do.
func (h *harness) patch(kind projection.Kind, namespace, name, patch string) *unstructured.Unstructured {
	h.t.Helper()
	out, err := h.fc.Dynamic().Resource(kind.GVR()).Namespace(namespace).
		Patch(h.t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		h.t.Fatalf("patch %s %s/%s: %v", kind, namespace, name, err)
	}
	h.rs.WaitConverged(h.t, h.fc.Dynamic(), 20*time.Second)
	return out
}

func (h *harness) get(kind projection.Kind, namespace, name string) *unstructured.Unstructured {
	h.t.Helper()
	u, err := h.fc.Dynamic().Resource(kind.GVR()).Namespace(namespace).Get(h.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatalf("get %s %s/%s: %v", kind, namespace, name, err)
	}
	return u
}

func state(a *projection.App) string { return string(a.Health.Status) + "/" + string(a.Sync) }

// stepUntil steps until done holds of the row, at most limit steps, and
// returns the row's health/sync after each step and the steps taken.
func (h *harness) stepUntil(namespace, name string, limit int, done func(*projection.App) bool) ([]string, int) {
	h.t.Helper()
	var seq []string
	for i := 1; i <= limit; i++ {
		h.step()
		a := h.row(namespace, name)
		seq = append(seq, state(a))
		if done(a) {
			return seq, i
		}
	}
	h.t.Fatalf("%s/%s not done within %d steps: %v (last %q)", namespace, name, limit, seq, h.row(namespace, name).Health.Message)
	return nil, 0
}

func treeCount(a *projection.App, kind projection.Kind) int {
	n := 0
	for _, node := range a.Tree {
		if node.Obj.Kind == kind {
			n++
		}
	}
	return n
}

// A new tag declared on an App (a merge patch, as deployd's rollback
// writes) rolls out: OutOfSync, Progressing while the new ReplicaSet comes
// up and the old one goes down, then Healthy and Synced.
func TestRollout(t *testing.T) {
	h := newHarness(t, sim.Options{Seed: 1})
	before := h.row("hanzo", "iam")
	if state(before) != "Healthy/Synced" || before.Replicas != 2 {
		t.Fatalf("hanzo/iam starts %s with %d replicas, want Healthy/Synced with 2", state(before), before.Replicas)
	}
	h.patch(projection.KindApp, "hanzo", "iam", `{"spec":{"image":{"tag":"v9.0.0"}}}`)
	a := h.row("hanzo", "iam")
	if a.Declared != "v9.0.0" || a.Sync != projection.SyncOutOfSync || a.Health.Status != projection.HealthProgressing {
		t.Fatalf("after the patch: declared %s, %s %q; want v9.0.0 OutOfSync/Progressing", a.Declared, state(a), a.Health.Message)
	}

	seq, steps := h.stepUntil("hanzo", "iam", 10, func(a *projection.App) bool {
		return state(a) == "Healthy/Synced" && a.Running == "v9.0.0"
	})
	t.Logf("rollout of 2 replicas: %d steps: %v", steps, seq)
	if !slices.Contains(seq, "Progressing/Synced") {
		t.Fatalf("sequence %v: the rollout never showed Progressing", seq)
	}
	a = h.row("hanzo", "iam")
	last := a.History[len(a.History)-1]
	if last.Revision != "v9.0.0" || last.ID != int64(len(before.History)+1) {
		t.Fatalf("last history entry %+v: want v9.0.0 at revision %d", last, len(before.History)+1)
	}
	if pods := treeCount(a, projection.KindPod); pods != 2 {
		t.Fatalf("%d pods after the rollout, want 2", pods)
	}
	app := h.get(projection.KindApp, "hanzo", "iam")
	observed, _, _ := unstructured.NestedInt64(app.Object, "status", "observedGeneration")
	history, _, _ := unstructured.NestedSlice(app.Object, "status", "upgradeHistory")
	lastUp, _ := history[len(history)-1].(map[string]any)
	if observed != app.GetGeneration() || lastUp["tag"] != "v9.0.0" || lastUp["result"] != fleet.UpgradeSucceeded {
		t.Fatalf("App status: observedGeneration %d (generation %d), last upgrade %v", observed, app.GetGeneration(), lastUp)
	}
	if _, ok := app.Object["status"].(map[string]any)["replicas"]; ok {
		t.Fatal("the App status carries status.replicas")
	}
}

// The crash-looping pod restarts while it crashes, then recovers.
func TestCrashLoopRecovers(t *testing.T) {
	h := newHarness(t, sim.Options{Seed: 1})
	a := h.row(fleet.NamespaceAcme, "web")
	if a.Health.Status != projection.HealthDegraded || !strings.Contains(a.Health.Message, "CrashLoopBackOff") {
		t.Fatalf("tenant-acme/web starts %s %q, want Degraded by a CrashLoopBackOff", a.Health.Status, a.Health.Message)
	}
	crashing := func() (string, int64) {
		for _, n := range h.row(fleet.NamespaceAcme, "web").Tree {
			if n.Obj.Kind == projection.KindPod && n.Reason == "CrashLoopBackOff" {
				pod := h.get(projection.KindPod, fleet.NamespaceAcme, n.Obj.Name)
				statuses, _, _ := unstructured.NestedSlice(pod.Object, "status", "containerStatuses")
				restarts, _, _ := unstructured.NestedInt64(statuses[0].(map[string]any), "restartCount")
				return n.Obj.Name, restarts
			}
		}
		return "", 0
	}
	pod, restarts := crashing()
	h.step()
	if p, r := crashing(); p != pod || r <= restarts {
		t.Fatalf("after a step pod %s has %d restarts, want %s with more than %d", p, r, pod, restarts)
	}
	seq, steps := h.stepUntil(fleet.NamespaceAcme, "web", fleet.CrashSteps+2, func(a *projection.App) bool {
		return a.Health.Status == projection.HealthHealthy
	})
	t.Logf("crash loop recovered after %d more steps: %v", steps, seq)
}

// A sync request (deployd's annotation) is reconciled: the operator
// records it in a condition and the sync operation completes.
func TestSyncRequestHandled(t *testing.T) {
	h := newHarness(t, sim.Options{Seed: 1})
	const at = "2026-11-20T12:03:00Z"
	h.patch(projection.KindApp, fleet.NamespaceGlobex, "api",
		`{"metadata":{"annotations":{"gitops.hanzo.ai/sync-requested-at":"`+at+`","gitops.hanzo.ai/sync-requested-by":"ada"}}}`)
	h.step()
	app := h.get(projection.KindApp, fleet.NamespaceGlobex, "api")
	conds, _, _ := unstructured.NestedSlice(app.Object, "status", "conditions")
	found := false
	for _, c := range conds {
		c := c.(map[string]any)
		found = found || (c["type"] == fleet.ConditionReconciled && c["status"] == "True" && strings.Contains(c["message"].(string), at))
	}
	if !found {
		t.Fatalf("conditions %v: want %s naming %s", conds, fleet.ConditionReconciled, at)
	}
	a := h.row(fleet.NamespaceGlobex, "api")
	if a.Operation == nil || a.Operation.Phase != "Succeeded" || a.Operation.StartedAt != at || a.Operation.InitiatedBy != "ada" {
		t.Fatalf("operation %+v: want Succeeded, started at %s by ada", a.Operation, at)
	}
}

// A rollback (deployd's merge patch of spec.image.tag to an earlier
// release) rolls out; here it repairs the rollout stuck on an image that
// cannot be pulled, reusing the earlier ReplicaSet as Kubernetes does.
func TestRollbackRollsOut(t *testing.T) {
	h := newHarness(t, sim.Options{Seed: 1})
	app, _, _ := h.sim.App("hanzo", "gateway")
	if app.Fault != fleet.FaultImagePull {
		t.Fatalf("hanzo/gateway has fault %s, want %s", app.Fault, fleet.FaultImagePull)
	}
	a := h.row("hanzo", "gateway")
	if a.Health.Status != projection.HealthDegraded || !strings.Contains(a.Health.Message, "ImagePullBackOff") {
		t.Fatalf("hanzo/gateway starts %s %q, want Degraded by ImagePullBackOff", a.Health.Status, a.Health.Message)
	}
	previous := app.Releases[len(app.Releases)-2].Tag
	revisions := len(a.History)
	h.patch(projection.KindApp, "hanzo", "gateway", `{"spec":{"image":{"tag":"`+previous+`"}}}`)

	seq, steps := h.stepUntil("hanzo", "gateway", 6, func(a *projection.App) bool {
		return state(a) == "Healthy/Synced" && a.Running == previous
	})
	t.Logf("rollback to %s: %d steps: %v", previous, steps, seq)
	a = h.row("hanzo", "gateway")
	if pods := treeCount(a, projection.KindPod); pods != 1 {
		t.Fatalf("%d pods after the rollback, want 1", pods)
	}
	// Kubernetes reuses the ReplicaSet of the earlier template and gives it
	// the next revision; it keeps its creation time, so its place in the
	// history (ordered by deployment time) does not move.
	if len(a.History) != revisions || !slices.ContainsFunc(a.History, func(e projection.HistoryEntry) bool {
		return e.Revision == previous && e.ID == int64(revisions+1)
	}) {
		t.Fatalf("history %+v: want %d entries, %s as revision %d (the old ReplicaSet reused)", a.History, revisions, previous, revisions+1)
	}
}

// A rolling restart (deployd's patch of the pod template's restartedAt)
// makes a new ReplicaSet with the same image.
func TestRollingRestart(t *testing.T) {
	h := newHarness(t, sim.Options{Seed: 1})
	before := h.row(fleet.NamespaceGlobex, "api")
	const at = "2026-11-20T12:05:00Z"
	h.patch(projection.KindDeployment, fleet.NamespaceGlobex, "api",
		`{"spec":{"template":{"metadata":{"annotations":{"hanzo.ai/restartedAt":"`+at+`"}}}}}`)
	if a := h.row(fleet.NamespaceGlobex, "api"); a.Health.Status != projection.HealthProgressing {
		t.Fatalf("after the restart patch: %s, want Progressing (generation not yet observed)", state(a))
	}
	seq, steps := h.stepUntil(fleet.NamespaceGlobex, "api", 10, func(a *projection.App) bool {
		return state(a) == "Healthy/Synced" && len(a.History) == len(before.History)+1 && treeCount(a, projection.KindPod) == int(a.Replicas)
	})
	t.Logf("rolling restart of %d replicas: %d steps: %v", before.Replicas, steps, seq)
	a := h.row(fleet.NamespaceGlobex, "api")
	last, prev := a.History[len(a.History)-1], a.History[len(a.History)-2]
	if a.Running != before.Running || last.Revision != before.Running || prev.Revision != before.Running {
		t.Fatalf("history %+v, running %s: want two revisions of %s", a.History, a.Running, before.Running)
	}
	d := h.get(projection.KindDeployment, fleet.NamespaceGlobex, "api")
	if got, _, _ := unstructured.NestedString(d.Object, "spec", "template", "metadata", "annotations", "hanzo.ai/restartedAt"); got != at {
		t.Fatalf("the Deployment's restartedAt is %q, want %q kept", got, at)
	}
	for _, n := range a.Tree {
		if n.Obj.Kind == projection.KindPod && !slices.Contains(n.Images(), "ghcr.io/globex/api:"+before.Running) {
			t.Fatalf("pod %s runs %v, want the same image", n.Obj.Name, n.Images())
		}
	}
}

// An App someone creates gets its children; an App deleted loses them.
func TestAdoptAndForget(t *testing.T) {
	h := newHarness(t, sim.Options{Seed: 1, Apps: 8})
	apps := h.fc.Dynamic().Resource(projection.KindApp.GVR()).Namespace("hanzo")
	app := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "hanzo.ai/v1", "kind": "App",
		"metadata": map[string]any{"name": "ledger", "namespace": "hanzo"},
		"spec":     map[string]any{"image": map[string]any{"repository": "ghcr.io/hanzoai/ledger", "tag": "v1.0.0"}, "replicas": int64(2)},
	}}
	if _, err := apps.Create(t.Context(), app, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.rs.WaitConverged(t, h.fc.Dynamic(), 20*time.Second)
	seq, steps := h.stepUntil("hanzo", "ledger", 10, func(a *projection.App) bool { return state(a) == "Healthy/Synced" })
	t.Logf("a new App came up in %d steps: %v", steps, seq)
	if err := apps.Delete(t.Context(), "ledger", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.step()
	pods, err := h.fc.Dynamic().Resource(projection.KindPod.GVR()).Namespace("hanzo").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.GetName(), "ledger-") {
			t.Fatalf("pod %s outlived its App", p.GetName())
		}
	}
}

// Same seed, same steps, same outside writes: the same objects.
func TestSimulationIsDeterministic(t *testing.T) {
	run := func() string {
		c := demotest.NewClock(fleet.Epoch)
		fc := sim.NewFakeCluster(c.Now)
		s, err := sim.New(t.Context(), fc.Dynamic(), sim.Options{Seed: 5, Apps: 12, Now: c.Now, CrashEvery: 2, ReleaseEvery: 3})
		if err != nil {
			t.Fatal(err)
		}
		for range 12 {
			c.Advance(10 * time.Second)
			if err := s.Step(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		var b strings.Builder
		for _, ki := range projection.Registry() {
			list, err := fc.Dynamic().Resource(ki.Kind.GVR()).List(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			slices.SortFunc(list.Items, func(x, y unstructured.Unstructured) int {
				return strings.Compare(x.GetNamespace()+"/"+x.GetName(), y.GetNamespace()+"/"+y.GetName())
			})
			for _, item := range list.Items {
				item.SetResourceVersion("") // the order of a parallel load's creates varies
				fmt.Fprintf(&b, "%v\n", item.Object)
			}
		}
		return b.String()
	}
	if a, b := run(), run(); a != b {
		t.Fatalf("two runs differ: %s", demotest.FirstDiff(a, b))
	}
}

// A long run with releases and crash loops, watched while it runs: no step
// fails, deployd's projection keeps up, nothing grows without bound, every
// rollout of an App without a fault completes within a few steps, and every
// such App not rolling out at the end is Healthy and Synced.
func TestLongRun(t *testing.T) {
	c := demotest.NewClock(fleet.Epoch)
	fc := sim.NewFakeCluster(c.Now)
	const pace = 2 * time.Second
	s, err := sim.New(t.Context(), fc.Dynamic(), sim.Options{Seed: 9, Apps: 16, Now: c.Now, CrashEvery: 4, ReleaseEvery: 2})
	if err != nil {
		t.Fatal(err)
	}
	rs := demotest.WatchClients(t, fc.Dynamic(), fc.Discovery())
	const steps = 200
	for range steps {
		c.Advance(pace)
		if err := s.Step(t.Context()); err != nil {
			t.Fatalf("step %d: %v", s.StepCount(), err)
		}
	}
	rs.WaitConverged(t, fc.Dynamic(), 30*time.Second)
	snap := rs.Store.Snapshot()
	rollouts, longest := 0, time.Duration(0)
	for _, app := range s.Apps() {
		_, st, _ := s.App(app.Namespace, app.Name)
		key := app.Namespace + "/" + app.Name
		// The current ReplicaSet, one still scaling down, and ten idle ones.
		if len(st.ReplicaSets) > 12 || len(st.Upgrades) > 10 {
			t.Errorf("%s keeps %d ReplicaSets and %d upgrades", key, len(st.ReplicaSets), len(st.Upgrades))
		}
		a := snap.Get(app.Namespace, app.Name)
		if app.Fault != fleet.FaultNone || app.Replicas == 0 {
			continue
		}
		for _, u := range st.Upgrades {
			if u.StartedAt.Before(fleet.Epoch) {
				continue // from the generated history
			}
			switch u.Result {
			case fleet.UpgradeSucceeded:
				rollouts++
				longest = max(longest, u.CompletedAt.Sub(u.StartedAt))
			case fleet.UpgradeProgressing:
			default:
				t.Errorf("%s: rollout to %s ended %s: %s", key, u.Tag, u.Result, u.Message)
			}
		}
		// (A release declared at the very last step is not observed yet.)
		if last := st.Upgrades[len(st.Upgrades)-1]; last.Result == fleet.UpgradeSucceeded && a.Declared == last.Tag && state(a) != "Healthy/Synced" {
			t.Errorf("%s is %s after its last rollout: %s", key, state(a), a.Health.Message)
		}
	}
	if rollouts < steps/4 || longest > 7*pace {
		t.Fatalf("%d rollouts, the longest %v: want at least %d, none longer than 7 steps", rollouts, longest, steps/4)
	}
	t.Logf("%d steps: %d rollouts completed, the longest in %d steps; cluster at resourceVersion %d",
		s.StepCount(), rollouts, int(longest/pace), fc.ResourceVersion())
}
