package projection

import (
	"fmt"
	"strings"
	"testing"
)

// TestCompactIDs: a Store's position is written whole while it is short
// and as a compact id once it is longer than CompactOver; the positions
// made from it keep their Book, and an id maps back to its position.
func TestCompactIDs(t *testing.T) {
	for _, n := range []int{2, 60} {
		cfg := DefaultConfig()
		cfg.ClusterName = "cluster-000"
		for i := 1; i < n; i++ {
			cfg.Clusters = append(cfg.Clusters, ClusterRef{Name: fmt.Sprintf("cluster-%03d", i), Namespaces: DefaultNamespaces()})
		}
		s := NewStore(cfg)
		o := &Object{Kind: KindConfigMap, Namespace: QualifyNamespace("hanzo", "cluster-001"), Name: "x", UID: "u", ResourceVersion: "77"}
		if _, err := s.Apply(Change{Op: Upsert, Object: o}); err != nil {
			t.Fatal(err)
		}
		pos := s.Snapshot().Position
		id := pos.ID()
		long := len(pos.String()) > CompactOver
		if IsID(id) != long {
			t.Fatalf("%d clusters: written %d bytes, id %.40q: compact %v, want %v", n, len(pos.String()), id, IsID(id), long)
		}
		if !long {
			if id != pos.String() {
				t.Errorf("%d clusters: id %q, want the written position %q", n, id, pos.String())
			}
			continue
		}
		if got, ok := s.Positions().Held(id); !ok || !got.Equal(pos) {
			t.Errorf("%d clusters: id %s maps back to %v %.60s", n, id, ok, got.String())
		}
		moved := pos.With(5, 99).Max(ZeroPosition(cfg.ClusterNames()))
		if mid := moved.ID(); !IsID(mid) || mid == id {
			t.Errorf("%d clusters: a position made from the store's has id %.40q: want its own compact id", n, mid)
		} else if got, ok := s.Positions().Held(mid); !ok || !got.Equal(moved) || !strings.Contains(got.String(), "cluster-005=99") {
			t.Errorf("%d clusters: the moved position's id does not map back", n)
		}
	}
}
