package clustertest

import (
	"bytes"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/hanzoai/deploy/fleet"
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

// ApplyFleet creates fixture objects the way the operator and the
// controllers would have, with the fleet's loader (fleet.Loader): namespaces
// first, each level of ownership after its owners, owner references
// remapped to the uids the API server assigns (a reference to an owner
// outside the fixture is kept as it is), statuses written through the
// status subresource; an object that exists already is replaced. It
// returns the stored objects in the order of objs.
func (c *Cluster) ApplyFleet(t testing.TB, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	l := fleet.NewLoader(c.Dynamic())
	l.Replace = true
	out, err := l.LoadObjects(t.Context(), objs)
	if err != nil {
		t.Fatalf("apply the fixture: %v", err)
	}
	return out
}
