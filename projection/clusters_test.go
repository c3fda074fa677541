package projection

import (
	"strings"
	"testing"
)

// TestUnreachableCluster: while a cluster does not answer, its Apps (and
// no other's) carry a condition naming it and since when, as a change of
// their Application, at the same resourceVersions, the position marking
// it; once it answers, the condition and the mark go.
func TestUnreachableCluster(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Clusters = []ClusterRef{{Name: "staging", Server: "https://staging:6443", Namespaces: DefaultNamespaces()}}
	s := NewStore(cfg)
	var changes []Change
	changes = append(changes, upserts(benchApp("hanzo", "", "web", 0))...)
	changes = append(changes, upserts(benchApp("hanzo.staging", "", "web", 0))...)
	if _, err := s.Apply(changes...); err != nil {
		t.Fatal(err)
	}
	deltas, err := s.Apply(Change{Op: Unreachable, Cluster: 1, Since: 1_760_000_000})
	if err != nil || len(deltas) != 1 || deltas[0].Key != (AppKey{"hanzo.staging", "web"}) || !deltas[0].AppChanged {
		t.Fatalf("unreachable: %v %+v", err, deltas)
	}
	before := s.Snapshot().Position.WithDown(1, 0)
	if p := deltas[0].Position; p.Down(1) != 1_760_000_000 || p.Down(0) != 0 || !p.Covers(before) || !before.Covers(p) || !strings.HasSuffix(p.String(), "~1760000000") {
		t.Errorf("the condition's position %s: want the resourceVersions as before, staging's part marked", p)
	}
	got := string(s.Snapshot().Get("hanzo.staging", "web").ApplicationJSON())
	if !strings.Contains(got, `"conditions":[{"type":"ComparisonError","message":"cluster staging has not answered since 2025-10-09T08:53:20Z`) {
		t.Errorf("staging's web: %s", got)
	}
	if home := string(s.Snapshot().Get("hanzo", "web").ApplicationJSON()); strings.Contains(home, "conditions") {
		t.Errorf("in-cluster's web carries a condition: %s", home)
	}
	if d, _ := s.Apply(Change{Op: Unreachable, Cluster: 1, Since: 1_760_000_000}); len(d) != 0 {
		t.Errorf("the same state again: %d deltas", len(d))
	}
	if d, _ := s.Apply(Change{Op: Unreachable, Cluster: 1}); len(d) != 1 || strings.Contains(string(s.Snapshot().Get("hanzo.staging", "web").ApplicationJSON()), "conditions") || !d[0].Position.Equal(before) {
		t.Errorf("answering again: %d deltas, the condition stays, or the position %s is not %s", len(d), s.Snapshot().Position, before)
	}
	if _, err := s.Apply(Change{Op: Unreachable, Cluster: 5, Since: 1}); err == nil {
		t.Error("a cluster not configured was accepted")
	}
}
