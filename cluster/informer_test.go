package cluster

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/hanzoai/deploy/projection"
)

// TestObjectStore: the informer's store holds an object once per
// namespace and name, counts exactly what it holds (a deletion of an
// object it never held, or held twice, takes nothing), and gives the
// queue the keys cache.MetaNamespaceKeyFunc would, each back to its
// object.
func TestObjectStore(t *testing.T) {
	decode := qualified(decoder(projection.KindPod, projection.DefaultNamespaces().Watched, func(u metav1.Object, err error) { t.Errorf("%s: %v", u.GetName(), err) }), "east")
	pod := func(ns, name, rv string) *stored {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("Pod")
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetResourceVersion(rv)
		out, err := decode(u)
		if err != nil {
			t.Fatal(err)
		}
		return out.(*stored)
	}
	s := &objectStore{m: map[objectKey]*stored{}}
	a1, a2, b, c := pod("hanzo", "a", "1"), pod("hanzo", "a", "2"), pod("tenant-acme", "b", "3"), pod("kube-system", "c", "4")
	if old := s.put(a1); old != nil {
		t.Fatalf("a new object replaced %+v", old)
	}
	if old := s.put(a2); old != a1 {
		t.Fatalf("a's second version replaced %+v, want its first", old)
	}
	s.put(b)
	s.put(c)
	if n := s.Len(); n != 3 {
		t.Fatalf("holds %d, want 3 (a, b, and c outside the namespace map, kept for its identity)", n)
	}

	var want []string
	for _, st := range []*stored{a2, b, c} {
		key, err := cache.MetaNamespaceKeyFunc(st)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, key)
	}
	keys := s.ListKeys()
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Fatalf("keys %q, want %q", keys, want)
	}
	for _, key := range keys {
		obj, ok, err := s.GetByKey(key)
		if err != nil || !ok {
			t.Fatalf("GetByKey(%q) = %v, %v, %v", key, obj, ok, err)
		}
		if back, err := cache.MetaNamespaceKeyFunc(obj); err != nil || back != key {
			t.Fatalf("GetByKey(%q) gave the object of %q (%v)", key, back, err)
		}
	}
	if obj, ok, err := s.GetByKey("hanzo.east/gone"); obj != nil || ok || err != nil {
		t.Fatalf("GetByKey of a key not held = %v, %v, %v; want nil, false, nil", obj, ok, err)
	}

	// A deletion by the object, one by a tombstone's key, one of an
	// object never held, and the first deletion again.
	bKey, _ := cache.MetaNamespaceKeyFunc(b)
	for _, d := range []any{a2, cache.DeletedFinalStateUnknown{Key: bKey}, pod("hanzo", "never", "5"), a1} {
		if err := s.remove(d); err != nil {
			t.Fatal(err)
		}
	}
	if n, left := s.Len(), s.List(); n != 1 || len(left) != 1 {
		t.Fatalf("after three deletions of two held objects: holds %d, lists %d; want 1", n, len(left))
	}
	if err := s.remove("not an object"); err == nil {
		t.Fatal("a deletion of a string was taken")
	}
	if err := s.remove(cache.DeletedFinalStateUnknown{Key: "a/b/c"}); err == nil {
		t.Fatal("a tombstone of a key of three parts was taken")
	}
}
