package projection_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hanzoai/deploy/fleet"
	"github.com/hanzoai/deploy/projection"
)

// TestTwoClustersSameUIDs: two clusters may hold the same UIDs (one
// restored from the other's etcd). Each cluster's trees are still its own,
// whatever order the objects arrive in: staging's rows have the very trees,
// history and health of the first cluster's rows of the same objects.
func TestTwoClustersSameUIDs(t *testing.T) {
	cfg := projection.DefaultConfig()
	cfg.Clusters = []projection.ClusterRef{{Name: "staging", Server: "https://staging:6443", Namespaces: projection.DefaultNamespaces()}}
	var changes []projection.Change
	for _, u := range fleet.RenderAll(fleet.Generate(1, 120)) {
		for _, cluster := range []string{"", "staging"} {
			o, err := projection.Decode(u.Object)
			if err != nil {
				t.Fatal(err)
			}
			o.Namespace = projection.QualifyNamespace(o.Namespace, cluster)
			changes = append(changes, projection.Change{Op: projection.Upsert, Object: o})
		}
	}
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		order := r.Perm(len(changes))
		s := projection.NewStore(cfg)
		for i := 0; i < len(order); {
			n := 1 + r.IntN(64)
			batch := make([]projection.Change, 0, n)
			for _, j := range order[i:min(i+n, len(order))] {
				batch = append(batch, changes[j])
			}
			if _, err := s.Apply(batch...); err != nil {
				t.Fatal(err)
			}
			i += n
		}
		snap := s.Snapshot()
		compared := 0
		for a := range snap.Apps() {
			if a.ClusterIndex() != 0 {
				continue
			}
			b := snap.Get(projection.QualifyNamespace(a.Namespace, "staging"), a.Name)
			if b == nil {
				t.Fatalf("seed %d: %s/%s has no twin in staging", seed, a.Namespace, a.Name)
			}
			if len(a.Tree) != len(b.Tree) || a.Health.Status != b.Health.Status || !slices.Equal(a.History, b.History) {
				t.Fatalf("seed %d: %s/%s: %d nodes, health %s, %d history entries in the first cluster; %d, %s, %d in staging",
					seed, a.Namespace, a.Name, len(a.Tree), a.Health.Status, len(a.History), len(b.Tree), b.Health.Status, len(b.History))
			}
			compared++
		}
		if compared == 0 {
			t.Fatalf("seed %d: no App compared", seed)
		}
	}
}
