package cluster

import (
	"strconv"
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hanzoai/deploy/projection"
)

// TestBuiltinDecodingInterns: two pods decoded from protobuf-typed objects
// hold one copy of each string they repeat, as DecodeKind's summaries do.
func TestBuiltinDecodingInterns(t *testing.T) {
	c := strings.Clone // each pod's strings are separate allocations
	pod := func(name string) *corev1.Pod {
		yes := true
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: c("hanzo"), Name: name, UID: types.UID(name + "-uid"),
				Labels:          map[string]string{c("app"): c("iam")},
				OwnerReferences: []metav1.OwnerReference{{Kind: c("ReplicaSet"), Name: c("iam-7d9f"), UID: types.UID(c("rs-uid")), Controller: &yes}},
			},
			Spec: corev1.PodSpec{NodeName: c("node-1"), RestartPolicy: corev1.RestartPolicy(c("Always")),
				Containers: []corev1.Container{{Name: c("iam"), Image: c("ghcr.io/hanzoai/iam:v1.2.3")}}},
			Status: corev1.PodStatus{Phase: corev1.PodPhase(c("Running")),
				ContainerStatuses: []corev1.ContainerStatus{{Name: c("iam"), Image: c("ghcr.io/hanzoai/iam:v1.2.3")}}},
		}
	}
	a, ok := decodeBuiltin(projection.KindPod, pod("iam-7d9f-a"))
	b, ok2 := decodeBuiltin(projection.KindPod, pod("iam-7d9f-b"))
	if !ok || !ok2 {
		t.Fatal("a Pod did not decode as a Pod")
	}
	same := func(what, x, y string) {
		t.Helper()
		if x != y || unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s: %q and %q are two copies, want one", what, x, y)
		}
	}
	pa, pb := a.Spec.(*projection.PodSpec), b.Spec.(*projection.PodSpec)
	same("namespace", a.Namespace, b.Namespace)
	same("label key", a.Labels[0].Key, b.Labels[0].Key)
	same("label value", a.Labels[0].Value, b.Labels[0].Value)
	same("owner kind", a.Owners[0].Kind, b.Owners[0].Kind)
	same("owner name", a.Owners[0].Name, b.Owners[0].Name)
	same("owner uid", a.Owners[0].UID, b.Owners[0].UID)
	same("image", pa.Containers[0].Image, pb.Containers[0].Image)
	same("status image", pa.Statuses[0].Image, pb.Statuses[0].Image)
	same("node", pa.NodeName, pb.NodeName)
	same("phase", pa.Phase, pb.Phase)
	same("restart policy", pa.RestartPolicy, pb.RestartPolicy)
}

// TestPodsOfOneReplicaSetShareSlices: two pods of one ReplicaSet decoded
// one after the other hold one copy of their labels, owner references,
// containers and container statuses; a pod whose status differs holds its
// own, equal to what it says, and still shares the rest; a repeat
// allocates its summary and its PodSpec alone.
func TestPodsOfOneReplicaSetShareSlices(t *testing.T) {
	c := strings.Clone
	yes := true
	pod := func(name string, ready bool, restarts int32) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: c("hanzo"), Name: name, UID: types.UID(name + "-uid"),
				Labels:          map[string]string{c("app"): c("kms"), c("pod-template-hash"): c("5f6c")},
				OwnerReferences: []metav1.OwnerReference{{Kind: c("ReplicaSet"), Name: c("kms-5f6c"), UID: types.UID(c("kms-rs-uid")), Controller: &yes}},
			},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: c("kms"), Image: c("ghcr.io/hanzoai/kms:v2")}}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
				Name: c("kms"), Image: c("ghcr.io/hanzoai/kms:v2"), Ready: ready, RestartCount: restarts,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			}}},
		}
	}
	decode := func(p *corev1.Pod) (*projection.Object, *projection.PodSpec) {
		t.Helper()
		o, ok := decodeBuiltin(projection.KindPod, p)
		if !ok {
			t.Fatal("a Pod did not decode as a Pod")
		}
		return o, o.Spec.(*projection.PodSpec)
	}
	a, pa := decode(pod("kms-5f6c-a", true, 0))
	b, pb := decode(pod("kms-5f6c-b", true, 0))
	same := func(what string, x, y unsafe.Pointer) {
		t.Helper()
		if x != y {
			t.Errorf("%s: two copies, want one", what)
		}
	}
	same("labels", unsafe.Pointer(&a.Labels[0]), unsafe.Pointer(&b.Labels[0]))
	same("owners", unsafe.Pointer(&a.Owners[0]), unsafe.Pointer(&b.Owners[0]))
	same("containers", unsafe.Pointer(&pa.Containers[0]), unsafe.Pointer(&pb.Containers[0]))
	same("statuses", unsafe.Pointer(&pa.Statuses[0]), unsafe.Pointer(&pb.Statuses[0]))
	if cap(a.Labels) != len(a.Labels) || cap(pa.Statuses) != len(pa.Statuses) || cap(a.Owners) != len(a.Owners) {
		t.Error("a shared slice has room beyond its length: an append would write into it")
	}

	cc, pc := decode(pod("kms-5f6c-c", false, 3))
	if &pc.Statuses[0] == &pa.Statuses[0] {
		t.Fatal("a pod whose container is not ready shares the ready pods' statuses")
	}
	if s := pc.Statuses[0]; s.Ready || s.RestartCount != 3 || !s.Running || s.Name != "kms" || s.Image != "ghcr.io/hanzoai/kms:v2" {
		t.Errorf("the not-ready pod's status: %+v", s)
	}
	same("labels of the not-ready pod", unsafe.Pointer(&a.Labels[0]), unsafe.Pointer(&cc.Labels[0]))
	if v := cc.Labels.Value("pod-template-hash"); v != "5f6c" || len(cc.Labels) != 2 {
		t.Errorf("labels %v", cc.Labels)
	}

	other := pod("kms-5f6c-d", true, 0)
	other.Labels["extra"] = "x"
	d, _ := decode(other)
	if len(d.Labels) != 3 || d.Labels.Value("extra") != "x" {
		t.Errorf("a pod with one more label holds %v", d.Labels)
	}

	repeat := pod("kms-5f6c-e", false, 3)
	decode(repeat)
	if n := testing.AllocsPerRun(50, func() { decodeBuiltin(projection.KindPod, repeat) }); n > 3 {
		t.Errorf("decoding a pod like its sibling allocated %.0f times, want 3 (its summary, its identity's one string, its PodSpec)", n)
	}
}

// TestSiblingTableBounded: the table of siblings forgets controllers it
// has not seen for a generation, so it never holds more than two; one
// asked for in the meantime is kept.
func TestSiblingTableBounded(t *testing.T) {
	var s siblingSlices
	rs := func(uid string) podSlices {
		return podSlices{owners: []projection.OwnerRef{{Kind: "ReplicaSet", UID: uid, Controller: true}}}
	}
	s.put(rs("kept"))
	s.put(rs("forgotten"))
	fill := func(prefix string) {
		for i := range siblingGeneration {
			s.put(rs(prefix + strconv.Itoa(i)))
		}
	}
	fill("a-")
	if got := s.get("kept"); len(got.owners) != 1 || got.owners[0].UID != "kept" {
		t.Fatal("a controller of the generation before was not found")
	}
	fill("b-")
	if got := s.get("kept"); len(got.owners) == 0 {
		t.Error("a controller asked for in the last generation was forgotten")
	}
	if got := s.get("forgotten"); len(got.owners) != 0 {
		t.Error("a controller not seen for a generation is still held")
	}
	for range 3 {
		fill("c-")
	}
	if n := len(s.cur) + len(s.prev); n > 2*siblingGeneration {
		t.Errorf("the table holds %d controllers, want at most %d", n, 2*siblingGeneration)
	}
	s.put(podSlices{owners: []projection.OwnerRef{{Kind: "ReplicaSet", UID: "none"}}})
	if _, ok := s.cur["none"]; ok {
		t.Error("an owner that is not the controller was remembered")
	}
}

// TestIdentityOneString: a summary's name, UID and resourceVersion are
// what the object said, held as parts of one allocation.
func TestIdentityOneString(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "hanzo", Name: "kms-5f6c-a", UID: "9b1d-0c7e", ResourceVersion: "48211"}}
	o, ok := decodeBuiltin(projection.KindPod, p)
	if !ok || o.Name != "kms-5f6c-a" || o.UID != "9b1d-0c7e" || o.ResourceVersion != "48211" {
		t.Fatalf("decoded %q %q %q (%v)", o.Name, o.UID, o.ResourceVersion, ok)
	}
	base := unsafe.StringData(o.Name)
	if unsafe.StringData(o.UID) != (*byte)(unsafe.Add(unsafe.Pointer(base), len(o.Name))) ||
		unsafe.StringData(o.ResourceVersion) != (*byte)(unsafe.Add(unsafe.Pointer(base), len(o.Name)+len(o.UID))) {
		t.Error("name, UID and resourceVersion are not one string's parts")
	}
	if unsafe.StringData(o.Name) == unsafe.StringData(p.Name) {
		t.Error("the summary's name is the decoded object's own string")
	}
	for _, c := range [][3]string{{"", "", ""}, {"a", "", ""}, {"", "u", "7"}, {"n", "u", ""}} {
		if n, u, r := identity(c[0], c[1], c[2]); n != c[0] || u != c[1] || r != c[2] {
			t.Errorf("identity%q = %q %q %q", c, n, u, r)
		}
	}
}
