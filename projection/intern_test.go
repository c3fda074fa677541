package projection

import (
	"strings"
	"testing"
	"unsafe"
)

// TestDecodeInterns: two pods decoded from separate JSON hold one copy of
// each string they repeat (namespace, labels, owner, image, node), and
// their own copies of what is theirs (name, UID).
func TestDecodeInterns(t *testing.T) {
	// strings.Clone: each pod's strings are separate allocations, as
	// two objects decoded off the wire are.
	pod := func(name, uid string) map[string]any {
		c := strings.Clone
		return map[string]any{
			"metadata": map[string]any{
				"namespace": c("hanzo"), "name": name, "uid": uid,
				"labels":          map[string]any{c("app"): c("iam"), c("pod-template-hash"): c("7d9f")},
				"ownerReferences": []any{map[string]any{"kind": c("ReplicaSet"), "name": c("iam-7d9f"), "uid": c("rs-uid")}},
			},
			"spec":   map[string]any{"nodeName": c("node-1"), "containers": []any{map[string]any{"name": c("iam"), "image": c("ghcr.io/hanzoai/iam:v1.2.3")}}},
			"status": map[string]any{"phase": c("Running")},
		}
	}
	a, err := DecodeKind(KindPod, pod("iam-7d9f-a", "uid-a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := DecodeKind(KindPod, pod("iam-7d9f-b", "uid-b"))
	if err != nil {
		t.Fatal(err)
	}
	same := func(what, x, y string) {
		t.Helper()
		if x != y || unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s: %q and %q are two copies, want one", what, x, y)
		}
	}
	pa, pb := a.Spec.(*PodSpec), b.Spec.(*PodSpec)
	same("namespace", a.Namespace, b.Namespace)
	for i := range a.Labels {
		same("label key", a.Labels[i].Key, b.Labels[i].Key)
		same("label value", a.Labels[i].Value, b.Labels[i].Value)
	}
	same("owner kind", a.Owners[0].Kind, b.Owners[0].Kind)
	same("owner name", a.Owners[0].Name, b.Owners[0].Name)
	same("owner uid", a.Owners[0].UID, b.Owners[0].UID)
	same("image", pa.Containers[0].Image, pb.Containers[0].Image)
	same("container", pa.Containers[0].Name, pb.Containers[0].Name)
	same("node", pa.NodeName, pb.NodeName)
	same("phase", pa.Phase, pb.Phase)
	if a.Name == b.Name {
		t.Fatalf("names: got %q twice", a.Name)
	}
}
