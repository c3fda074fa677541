package projection

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestPositionAndChanged: the snapshot's position is the newest
// resourceVersion folded (deletions included); a row's ResourceVersion is
// its own object's; Changed(p) says whether the row may differ from what
// it was at p, including when an object left its tree after p.
func TestPositionAndChanged(t *testing.T) {
	s := NewStore(DefaultConfig())
	app := func(rv int) *Object {
		return &Object{Kind: KindApp, Namespace: "hanzo", Name: "web", UID: "u-web", ResourceVersion: strconv.Itoa(rv), Generation: 1,
			Spec: &AppSpec{Repository: "ghcr.io/hanzoai/web", Tag: "v1", Replicas: 1, HasStatus: true, Phase: "Running", ReadyReplicas: 1, ObservedGeneration: 1}}
	}
	cm := func(rv int) *Object {
		return &Object{Kind: KindConfigMap, Namespace: "hanzo", Name: "web-config", UID: "u-cm", ResourceVersion: strconv.Itoa(rv),
			Owners: []OwnerRef{{Kind: "App", Name: "web", UID: "u-web", Controller: true}}}
	}
	apply := func(c ...Change) {
		t.Helper()
		if _, err := s.Apply(c...); err != nil {
			t.Fatal(err)
		}
	}
	apply(Change{Op: Upsert, Object: app(10)}, Change{Op: Upsert, Object: cm(12)})
	snap := s.Snapshot()
	a := snap.Get("hanzo", "web")
	if snap.Position.First() != 12 || a.ResourceVersion != 10 || len(a.Tree) != 2 {
		t.Fatalf("position %d, row version %d, %d nodes; want 12, 10 and 2", snap.Position.First(), a.ResourceVersion, len(a.Tree))
	}
	if !a.Changed(At(11)) || a.Changed(At(12)) {
		t.Errorf("Changed(At(11))=%v Changed(At(12))=%v; want true, false (the ConfigMap is at 12)", a.Changed(At(11)), a.Changed(At(12)))
	}
	// The ConfigMap goes at 20: no object left in the tree is newer than
	// 12, yet the row changed after 12.
	apply(Change{Op: Delete, Object: cm(20)})
	snap = s.Snapshot()
	a = snap.Get("hanzo", "web")
	if snap.Position.First() != 20 || len(a.Tree) != 1 {
		t.Fatalf("position %d, %d nodes; want 20 and 1", snap.Position.First(), len(a.Tree))
	}
	if !a.Changed(At(12)) || a.Changed(At(20)) {
		t.Errorf("after the removal: Changed(At(12))=%v Changed(At(20))=%v; want true, false", a.Changed(At(12)), a.Changed(At(20)))
	}
	// A later change of the App keeps the removal's stamp.
	apply(Change{Op: Upsert, Object: app(25)})
	if a = s.Snapshot().Get("hanzo", "web"); a.Removed != 20 || a.ResourceVersion != 25 {
		t.Errorf("Removed %d, ResourceVersion %d; want 20 and 25", a.Removed, a.ResourceVersion)
	}
}

// TestPastRows: the rows built from the row objects alone (as a list at a
// past resourceVersion returns them) are the rows the fold made of them:
// Apps, CD Applications and static sites, named as the fold names them
// (a site whose preferred name an App takes keeps its Middleware's).
func TestPastRows(t *testing.T) {
	objs := append(loadObjects(t, "testdata/sites.yaml"), loadObjects(t, "testdata/fleet.yaml")...)
	s := NewStore(DefaultConfig())
	if _, err := s.Apply(upserts(objs)...); err != nil {
		t.Fatal(err)
	}
	snap := s.Snapshot()
	var want []PastRow
	for a := range snap.Apps() {
		want = append(want, PastRow{Row: a.Row, Key: a.Key(), Org: a.Org, Project: a.Project, Env: a.Env, ResourceVersion: a.ResourceVersion})
	}
	for _, a := range snap.CDApplications() {
		want = append(want, PastRow{Row: a.Row, Key: a.Key(), Org: a.Org, Project: a.Project, Env: a.Env, ResourceVersion: a.ResourceVersion})
	}
	got := s.PastRows(objs)
	byKey := func(a, b PastRow) int {
		if c := strings.Compare(a.Key.Namespace, b.Key.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Key.Name, b.Key.Name)
	}
	slices.SortFunc(want, byKey)
	slices.SortFunc(got, byKey)
	if !slices.Equal(got, want) {
		t.Errorf("past rows differ from the fold's:\n got %+v\nwant %+v", got, want)
	}
	var sites int
	for _, r := range got {
		if r.Row == RowSite {
			sites++
		}
	}
	if sites < 3 {
		t.Errorf("%d site rows, want the fixture's three or more", sites)
	}
}
