package cluster

import (
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
