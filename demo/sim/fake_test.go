package sim_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/hanzoai/deploy/demo/demotest"
	"github.com/hanzoai/deploy/demo/sim"
	"github.com/hanzoai/deploy/fleet"
	"github.com/hanzoai/deploy/projection"
)

func configMap(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "hanzo"},
		"data":     map[string]any{"k": "v"},
	}}
}

// The fake cluster keeps metadata as an API server does, and merge patches
// (deployd's writes) work on it.
func TestFakeClusterMetadataAndPatches(t *testing.T) {
	c := demotest.NewClock(fleet.Epoch)
	fc := sim.NewFakeCluster(c.Now)
	apps := fc.Dynamic().Resource(projection.KindApp.GVR()).Namespace("hanzo")
	created, err := apps.Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "hanzo.ai/v1", "kind": "App",
		"metadata": map[string]any{"name": "iam", "namespace": "hanzo"},
		"spec":     map[string]any{"image": map[string]any{"repository": "ghcr.io/hanzoai/iam", "tag": "v1.0.0"}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.GetUID() == "" || created.GetResourceVersion() == "" || created.GetGeneration() != 1 || !created.GetCreationTimestamp().Time.Equal(fleet.Epoch) {
		t.Fatalf("created metadata uid %q rv %q generation %d created %v", created.GetUID(), created.GetResourceVersion(), created.GetGeneration(), created.GetCreationTimestamp())
	}
	rv := func(u *unstructured.Unstructured) int {
		n, err := strconv.Atoi(u.GetResourceVersion())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	steps := []struct {
		name, patch, sub string
		generation       int64
	}{
		{"sync annotation", `{"metadata":{"annotations":{"gitops.hanzo.ai/sync-requested-at":"2026-11-20T12:00:00Z"}}}`, "", 1},
		{"rollback", `{"spec":{"image":{"tag":"v0.9.0"}}}`, "", 2},
		{"status", `{"status":{"phase":"Running","observedGeneration":2}}`, "status", 2},
	}
	prev := created
	for _, s := range steps {
		var subs []string
		if s.sub != "" {
			subs = append(subs, s.sub)
		}
		out, err := apps.Patch(t.Context(), "iam", types.MergePatchType, []byte(s.patch), metav1.PatchOptions{}, subs...)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if out.GetGeneration() != s.generation || rv(out) <= rv(prev) || out.GetUID() != created.GetUID() {
			t.Fatalf("%s: generation %d rv %s uid %s; want generation %d, a newer rv, the same uid", s.name, out.GetGeneration(), out.GetResourceVersion(), out.GetUID(), s.generation)
		}
		prev = out
	}
	got, err := apps.Get(t.Context(), "iam", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tag, _, _ := unstructured.NestedString(got.Object, "spec", "image", "tag")
	repo, _, _ := unstructured.NestedString(got.Object, "spec", "image", "repository")
	if tag != "v0.9.0" || repo != "ghcr.io/hanzoai/iam" || got.GetAnnotations()[fleet.AnnotationSyncAt] == "" {
		t.Fatalf("after the patches: tag %q repository %q annotations %v", tag, repo, got.GetAnnotations())
	}
	stale := created.DeepCopy()
	if _, err := apps.Update(t.Context(), stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("update from a stale resourceVersion: %v, want a conflict", err)
	}
}

// A watch replays from its resourceVersion, ends (never panics, never
// blocks the writer) when its reader falls behind, and a watch from before
// the kept history is 410 Expired.
func TestFakeClusterWatch(t *testing.T) {
	fc := sim.NewFakeCluster(nil)
	cms := fc.Dynamic().Resource(projection.KindConfigMap.GVR())
	list, err := cms.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := list.GetResourceVersion()
	w, err := cms.Watch(t.Context(), metav1.ListOptions{ResourceVersion: start})
	if err != nil {
		t.Fatal(err)
	}
	// Far more writes than the watch buffers, none read.
	for i := range 3000 {
		if _, err := cms.Namespace("hanzo").Create(t.Context(), configMap(fmt.Sprintf("cm-%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var first, last string
	n := 0
	for ev := range w.ResultChan() { // ends: the watch was closed when it fell behind
		if ev.Type != watch.Added {
			t.Fatalf("event %d is %s, want ADDED", n, ev.Type)
		}
		last = ev.Object.(*unstructured.Unstructured).GetResourceVersion()
		if first == "" {
			first = last
		}
		n++
	}
	if n == 0 || n >= 3000 {
		t.Fatalf("the slow watch got %d events before it ended, want some but not all", n)
	}
	// Resuming from the last event seen replays exactly the rest.
	w2, err := cms.Watch(t.Context(), metav1.ListOptions{ResourceVersion: last})
	if err != nil {
		t.Fatal(err)
	}
	for n < 3000 {
		select {
		case ev := <-w2.ResultChan():
			if got := ev.Object.(*unstructured.Unstructured).GetName(); got != fmt.Sprintf("cm-%d", n) {
				t.Fatalf("resumed watch: event %d is %s, want cm-%d", n, got, n)
			}
			n++
		case <-time.After(5 * time.Second):
			t.Fatalf("resumed watch: %d of 3000 events", n)
		}
	}
	w2.Stop()
	// Past the kept history, a watch from the start is gone.
	for i := range 8192 {
		if _, err := cms.Namespace("hanzo").Patch(t.Context(), "cm-0", types.MergePatchType,
			fmt.Appendf(nil, `{"data":{"k":"%d"}}`, i), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cms.Watch(t.Context(), metav1.ListOptions{ResourceVersion: first}); !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Fatalf("watch from before the history: %v, want 410 Expired", err)
	}
}

// deployd's watcher sees a generated fleet through the fake clients, every
// write made afterwards, and an optional kind going away and coming back.
func TestFakeClusterWatchedByDeployd(t *testing.T) {
	fc := sim.NewFakeCluster(nil)
	apps := fleet.Generate(3, 12)
	if err := fleet.Load(t.Context(), fc.Dynamic(), fleet.RenderAll(apps)); err != nil {
		t.Fatal(err)
	}
	rs := demotest.WatchClients(t, fc.Dynamic(), fc.Discovery())
	rs.WaitConverged(t, fc.Dynamic(), 20*time.Second)
	snap := rs.Store.Snapshot()
	if snap.Len() != 13 || len(snap.CDApplications()) != 1 {
		t.Fatalf("%d rows and %d CD Applications, want 13 and 1", snap.Len(), len(snap.CDApplications()))
	}
	if _, err := fc.Dynamic().Resource(projection.KindApp.GVR()).Namespace("hanzo").Patch(t.Context(), "iam",
		types.MergePatchType, []byte(`{"spec":{"image":{"tag":"v7.7.7"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	demotest.WaitFor(t, 10*time.Second, "the patched tag reaches the projection", func() (bool, string) {
		a := rs.Store.Snapshot().Get("hanzo", "iam")
		return a.Declared == "v7.7.7" && a.Sync == projection.SyncOutOfSync, a.Declared + " " + string(a.Sync)
	})
	fc.SetServed(projection.KindCDApplication, false)
	demotest.WaitFor(t, 10*time.Second, "the CD Application goes with its kind", func() (bool, string) {
		return len(rs.Store.Snapshot().CDApplications()) == 0, ""
	})
	fc.SetServed(projection.KindCDApplication, true)
	demotest.WaitFor(t, 10*time.Second, "the CD Application comes back with its kind", func() (bool, string) {
		return len(rs.Store.Snapshot().CDApplications()) == 1, ""
	})
}

// Apply creates what does not exist and merges into what does, keeping the
// status and whole numbers whole: the demo's engine writes this way.
func TestFakeClusterApply(t *testing.T) {
	fc := sim.NewFakeCluster(nil)
	apps := fc.Dynamic().Resource(projection.KindApp.GVR()).Namespace("hanzo")
	app := func(tag string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "hanzo.ai/v1", "kind": "App",
			"metadata": map[string]any{"name": "iam", "namespace": "hanzo", "labels": map[string]any{"gitops.hanzo.ai/instance": "demo"}},
			"spec":     map[string]any{"image": map[string]any{"tag": tag}, "replicas": int64(2)},
		}}
	}
	opts := metav1.ApplyOptions{FieldManager: "deployd", Force: true}
	created, err := apps.Apply(t.Context(), "iam", app("v1.0.0"), opts)
	if err != nil {
		t.Fatalf("apply to create: %v", err)
	}
	if created.GetUID() == "" || created.GetGeneration() != 1 {
		t.Fatalf("created uid %q generation %d", created.GetUID(), created.GetGeneration())
	}
	if _, err := apps.Patch(t.Context(), "iam", types.MergePatchType, []byte(`{"status":{"phase":"Running"},"spec":{"role":"api"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := apps.Apply(t.Context(), "iam", app("v1.1.0"), opts)
	if err != nil {
		t.Fatalf("apply to change: %v", err)
	}
	tag, _, _ := unstructured.NestedString(out.Object, "spec", "image", "tag")
	role, _, _ := unstructured.NestedString(out.Object, "spec", "role")
	phase, _, _ := unstructured.NestedString(out.Object, "status", "phase")
	replicas, found, err := unstructured.NestedInt64(out.Object, "spec", "replicas")
	if tag != "v1.1.0" || role != "api" || phase != "Running" || !found || err != nil || replicas != 2 {
		t.Fatalf("after apply: tag %q role %q phase %q replicas %d (%v %v)", tag, role, phase, replicas, found, err)
	}
	if out.GetUID() != created.GetUID() || out.GetGeneration() != 3 {
		t.Fatalf("uid %q generation %d; want the same uid, generation 3", out.GetUID(), out.GetGeneration())
	}
}
