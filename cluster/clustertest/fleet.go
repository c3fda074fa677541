package clustertest

import (
	"bytes"
	"os"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// Manifests reads every document of a multi-document YAML file.
func Manifests(t testing.TB, path string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	var out []*unstructured.Unstructured
	for i, doc := range bytes.Split(raw, []byte("\n---\n")) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatalf("%s document %d: %v", path, i, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out
}

// kindRank orders creation so that owners exist before what they own.
var kindRank = []string{"Namespace", "App", "Middleware", "IngressRoute", "Application", "AppProject",
	"Deployment", "StatefulSet", "Service", "ConfigMap", "Ingress", "HorizontalPodAutoscaler", "PodDisruptionBudget",
	"ReplicaSet", "Pod"}

// ApplyFleet creates fixture objects the way the operator and the
// controllers would have: namespaces first, owners before what they own.
// Fixture uids are replaced by the ones the API server assigns, in every
// ownerReference too (a reference to an owner outside the fixture is kept
// as it is); resourceVersions and creation times are the server's.
// It returns the stored objects in creation order.
func (c *Cluster) ApplyFleet(t testing.TB, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	var namespaces []string
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" && !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}
	for _, ns := range namespaces {
		_, err := c.clientset.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create namespace %s: %v", ns, err)
		}
	}
	rank := func(u *unstructured.Unstructured) int {
		if i := slices.Index(kindRank, u.GetKind()); i >= 0 {
			return i
		}
		return len(kindRank)
	}
	ordered := slices.Clone(objs)
	slices.SortStableFunc(ordered, func(a, b *unstructured.Unstructured) int { return rank(a) - rank(b) })
	inFixture := map[string]bool{}
	for _, o := range objs {
		inFixture[string(o.GetUID())] = true
	}
	uids := map[string]string{}
	var out []*unstructured.Unstructured
	for _, o := range ordered {
		u := o.DeepCopy()
		fixtureUID := u.GetUID()
		u.SetUID("")
		u.SetResourceVersion("")
		u.SetCreationTimestamp(metav1.Time{})
		refs := u.GetOwnerReferences()
		for i := range refs {
			real, ok := uids[string(refs[i].UID)]
			if !ok && !inFixture[string(refs[i].UID)] {
				continue // an owner outside the fixture: the reference dangles, as in the fixture
			}
			if !ok {
				t.Fatalf("%s %s/%s: owner %s %s is not created before it", u.GetKind(), u.GetNamespace(), u.GetName(), refs[i].Kind, refs[i].Name)
			}
			refs[i].UID = types.UID(real)
		}
		u.SetOwnerReferences(refs)
		stored := c.Apply(t, u)[0]
		if fixtureUID != "" {
			uids[string(fixtureUID)] = string(stored.GetUID())
		}
		out = append(out, stored)
	}
	if len(out) != len(objs) {
		t.Fatalf("applied %d of %d objects", len(out), len(objs))
	}
	return out
}
