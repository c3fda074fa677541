package projection

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzApply reads arbitrary bytes as a sequence of changes over a small
// universe of objects (three bytes a change: which object, what variant or a
// deletion, where a batch ends). After every batch the invariants hold; at
// the end the store equals one built from the final objects alone.
func FuzzApply(f *testing.F) {
	ids := universe([]string{"hanzo", "tenant-acme"}, 2, 2, 2)
	f.Add([]byte{0, 1, 0, 1, 2, 0, 5, 3, 1})
	f.Add([]byte{5, 0, 0, 4, 9, 1, 0, 255, 0, 1, 4, 0})
	r := rand.New(rand.NewPCG(3, 4))
	for range 8 {
		steps, _ := history(r, ids, true)
		var seed []byte
		for _, st := range steps {
			v := byte(st.variant)
			if st.del {
				v = 255
			}
			seed = append(seed, byte(st.id), v, byte(r.IntN(2)))
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := NewStore(DefaultConfig())
		final := map[int]int{}
		var batch []Change
		flush := func() {
			if _, err := s.Apply(batch...); err != nil {
				t.Fatalf("apply: %v", err)
			}
			batch = batch[:0]
			if err := checkInvariants(s); err != nil {
				t.Fatal(err)
			}
		}
		for len(data) >= 3 {
			i, v, end := int(data[0])%len(ids), data[1], data[2]
			data = data[3:]
			id := ids[i]
			if v == 255 {
				batch = append(batch, Change{Op: Delete, Object: &Object{Kind: id.kind, Namespace: id.namespace, Name: id.name}})
				delete(final, i)
			} else {
				batch = append(batch, Change{Op: Upsert, Object: id.build(int(v))})
				final[i] = int(v)
			}
			if end%2 == 1 {
				flush()
			}
		}
		flush()
		if got, want := s.Snapshot().Canonical(), reference(ids, final).Snapshot().Canonical(); !bytes.Equal(got, want) {
			t.Fatalf("store differs from one built from the final objects:\n%s", lineDiff(string(want), string(got)))
		}
	})
}

// FuzzDecode: any JSON-shaped map decodes without panicking.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x","namespace":"hanzo"},"spec":{"replicas":"3","selector":{"matchExpressions":[1]}}}`))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","ownerReferences":[null,{"uid":5}]},"status":{"containerStatuses":[{"state":{"waiting":7}}]}}`))
	f.Add([]byte(`{"apiVersion":"hanzo.ai/v1","kind":"App","metadata":{"name":"a","creationTimestamp":"bad"},"spec":{"replicas":1e300},"status":{"upgradeHistory":[{}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m map[string]any
		if err := jsonUnmarshal(data, &m); err != nil || m == nil {
			return
		}
		o, err := Decode(m)
		if err != nil {
			return
		}
		s := NewStore(DefaultConfig())
		o.Namespace = "hanzo"
		if _, err := s.Apply(Change{Op: Upsert, Object: o}); err != nil && o.Kind.InRegistry() {
			t.Fatalf("apply decoded %s: %v", o.Kind, err)
		}
		if err := checkInvariants(s); err != nil {
			t.Fatal(err)
		}
		for a := range s.Snapshot().Apps() {
			_ = a.ApplicationJSON()
			_ = a.ApplicationTreeJSON()
		}
	})
}

// FuzzIsLabel: IsLabel accepts exactly what validation.IsDNS1123Label
// accepts.
func FuzzIsLabel(f *testing.F) {
	for _, s := range []string{"", "a", "-", "a-", "-a", "a-b", "web-01", "Web", "a_b", "a.b", "é",
		strings.Repeat("a", 63), strings.Repeat("a", 64), "0", "9-z", "a\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := IsLabel(s), len(validation.IsDNS1123Label(s)) == 0; got != want {
			t.Errorf("IsLabel(%q) = %v; validation.IsDNS1123Label says %v", s, got, want)
		}
	})
}
