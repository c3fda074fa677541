package cluster

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/hanzoai/deploy/projection"
)

// TestHandlerChanges: notifications become changes in order; objects of
// namespaces outside the map are dropped; a deletion the watch missed
// (a tombstone whose final state is unknown) is a Delete by its key.
func TestHandlerChanges(t *testing.T) {
	feed := NewFeed()
	w, _ := NewWatcher(nil, "", feed, Options{Namespaces: projection.DefaultNamespaces()})
	h := w.handler(projection.KindPod)
	decode := decoder(projection.KindPod, w.opts.Namespaces.Watched, func(u metav1.Object, err error) { t.Errorf("%s: %v", u.GetName(), err) })
	pod := func(ns, name string) any {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("Pod")
		u.SetNamespace(ns)
		u.SetName(name)
		st, err := decode(u)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	h.OnAdd(pod("hanzo", "a"), true)
	h.OnUpdate(pod("hanzo", "a"), pod("hanzo", "a"))
	h.OnAdd(pod("kube-system", "coredns"), true)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "tenant-acme/b", Obj: "stale and unreadable"})
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "kube-system/c"})
	h.OnDelete(pod("hanzo", "a"))

	got, _ := feed.take(nil)
	want := []struct {
		op       projection.Op
		ns, name string
	}{
		{projection.Upsert, "hanzo", "a"},
		{projection.Upsert, "hanzo", "a"},
		{projection.Delete, "tenant-acme", "b"},
		{projection.Delete, "hanzo", "a"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d changes, want %d: %+v", len(got), len(want), got)
	}
	if n := feed.Changes(projection.KindPod); n != uint64(len(want)) {
		t.Errorf("got %d Pod changes counted, want %d", n, len(want))
	}
	for i, c := range got {
		if c.Op != want[i].op || c.Object.Kind != projection.KindPod || c.Object.Namespace != want[i].ns || c.Object.Name != want[i].name {
			t.Errorf("change %d: got %s %s/%s, want %s %s/%s", i, c.Op, c.Object.Namespace, c.Object.Name, want[i].op, want[i].ns, want[i].name)
		}
	}
}

// TestNotConfigured: a watcher without a configuration runs (doing nothing)
// and reports why, in words safe to show.
func TestNotConfigured(t *testing.T) {
	_, _, err := RESTConfig(Source{Kubeconfig: "/nonexistent/kubeconfig"})
	if err == nil {
		t.Fatal("a missing kubeconfig resolved")
	}
	w, err := NewWatcher(nil, err.Error(), NewFeed(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := w.Status()
	if st.Configured || st.Ready() || st.Reason == "" {
		t.Fatalf("status %+v: want not configured, not ready, with the reason", st)
	}
	if _, err := w.Get(t.Context(), projection.KindPod, "hanzo", "x"); err == nil {
		t.Fatal("a live read without a cluster answered")
	}
	if _, err := w.MergePatch(t.Context(), projection.KindApp, "hanzo", "x", []byte(`{}`)); err == nil {
		t.Fatal("a write without a cluster answered")
	}
	if _, err := w.Get(t.Context(), projection.KindUnknown, "hanzo", "x"); err == nil {
		t.Fatal("a kind outside the registry was read")
	}
}

// TestDecoderStoresSummaries: the informer transform turns an object as the
// API server sends it into the projection's summary before anything stores
// it; other namespaces and unreadable objects keep only their identity; the
// informer machinery reads keys and versions from what it stores.
func TestDecoderStoresSummaries(t *testing.T) {
	var undecoded []string
	decode := decoder(projection.KindPod, projection.DefaultNamespaces().Watched, func(u metav1.Object, err error) {
		undecoded = append(undecoded, u.GetNamespace()+"/"+u.GetName()+": "+err.Error())
	})
	full := func(ns, name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{
				"namespace": ns, "name": name, "uid": "u-" + name, "resourceVersion": "42",
				"annotations":   map[string]any{projection.AnnotationLastApplied: `{"kind":"Pod"}`},
				"managedFields": []any{map[string]any{"manager": "kubectl", "operation": "Apply"}},
			},
			"spec":   map[string]any{"containers": []any{map[string]any{"name": "app", "image": "ghcr.io/hanzoai/iam:v1"}}},
			"status": map[string]any{"phase": "Running"},
		}}
	}

	in := full("hanzo", "iam-0")
	out, err := decode(in)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := out.(*stored)
	if !ok || !st.fold {
		t.Fatalf("watched pod stored as %#v, want a summary to fold", out)
	}
	want, err := projection.DecodeKind(projection.KindPod, full("hanzo", "iam-0").Object)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&st.obj, want) {
		t.Fatalf("stored %+v, want the projection's decoding %+v", st.obj, want)
	}
	if key, err := cache.MetaNamespaceKeyFunc(st); err != nil || key != "hanzo/iam-0" {
		t.Fatalf("key %q, %v", key, err)
	}
	if m, err := meta.Accessor(st); err != nil || m.GetResourceVersion() != "42" || m.GetUID() != "u-iam-0" {
		t.Fatalf("accessor %v, %v", m, err)
	}

	out, _ = decode(full("kube-system", "coredns-0"))
	if st := out.(*stored); st.fold || st.obj.Spec != nil || st.obj.Name != "coredns-0" || st.obj.ResourceVersion != "42" {
		t.Fatalf("unwatched pod stored as %+v (fold %v), want its identity only", st.obj, st.fold)
	}

	bad := full("hanzo", "")
	out, _ = decode(bad)
	if st := out.(*stored); st.fold || len(undecoded) != 1 {
		t.Fatalf("unreadable pod: fold %v, reported %q", st.fold, undecoded)
	}

	tomb := cache.DeletedFinalStateUnknown{Key: "hanzo/x", Obj: st}
	if out, _ := decode(tomb); out != tomb {
		t.Fatalf("tombstone transformed into %#v", out)
	}
	if out, _ := decode(st); out != st {
		t.Fatal("a stored summary was transformed again")
	}
}
