package projection

import (
	"slices"
	"testing"
)

// TestHistoryOrder: a rollback reuses an old ReplicaSet under a new
// revision; the history lists it last, after the releases only the
// operator remembers.
func TestHistoryOrder(t *testing.T) {
	s := fleetStore(t)
	// iam's revision-2 ReplicaSet (v1.4.1, created first) becomes revision
	// 4: a rollback to v1.4.1.
	var rs *Object
	for _, o := range loadObjects(t, "testdata/fleet.yaml") {
		if o.Kind == KindReplicaSet && o.Name == "iam-5c4b3a" && o.Namespace == "hanzo" {
			rs = o
		}
	}
	w := *rs.Spec.(*WorkloadSpec)
	w.Revision, w.RevisionID = "4", 4
	rolled := *rs
	rolled.Spec = &w
	if _, err := s.Apply(Change{Op: Upsert, Object: &rolled}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range s.Snapshot().Get("hanzo", "iam").History {
		got = append(got, itoa(int(h.ID))+":"+h.Revision)
	}
	if want := []string{"0:v1.3.0", "3:v1.4.2", "4:v1.4.1"}; !slices.Equal(got, want) {
		t.Fatalf("history %v, want %v", got, want)
	}
}
