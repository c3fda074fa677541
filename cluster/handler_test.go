package cluster

import (
	"testing"

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
	pod := func(ns, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("Pod")
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	h.OnAdd(pod("hanzo", "a"), true)
	h.OnUpdate(pod("hanzo", "a"), pod("hanzo", "a"))
	h.OnAdd(pod("kube-system", "coredns"), true)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "tenant-acme/b", Obj: "stale and unreadable"})
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "kube-system/c"})
	h.OnDelete(pod("hanzo", "a"))

	got := feed.take(nil)
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
