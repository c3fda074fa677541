package drift_test

import (
	"encoding/json"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/projection/drift"
	"github.com/hanzoai/deploy/projection/drift/drifttest"
)

// Every pair: Drifted and Compare agree with the pair's answer, and a
// modified pair's patch turns the declared part of live into desired.
func TestPairs(t *testing.T) {
	for _, p := range drifttest.Pairs() {
		if got := drift.Drifted(p.Live, p.Desired); got != p.Drifted {
			t.Errorf("%s: Drifted %v, want %v", p.Name, got, p.Drifted)
		}
		d, err := drift.Compare(p.Live, p.Desired)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		if d.Modified != p.Drifted || (len(d.Patch) > 0) != p.Drifted {
			t.Errorf("%s: modified %v with %d operations, want %v", p.Name, d.Modified, len(d.Patch), p.Drifted)
		}
		if !d.Modified {
			continue
		}
		ops, _ := json.Marshal(d.Patch)
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			t.Fatalf("%s: the patch %s does not decode: %v", p.Name, ops, err)
		}
		cut, _ := json.Marshal(drift.Declared(drift.Normalize(p.Live), d.DesiredManifest))
		patched, err := patch.Apply(cut)
		if err != nil {
			t.Fatalf("%s: the patch %s does not apply: %v", p.Name, ops, err)
		}
		var got map[string]any
		json.Unmarshal(patched, &got)
		if drift.Drifted(got, p.Desired) {
			t.Errorf("%s: live patched with %s still drifts: %s", p.Name, ops, patched)
		}
	}
}

// Numbers compare by value, whatever their Go type.
func TestNumbersByValue(t *testing.T) {
	live := map[string]any{"spec": map[string]any{"replicas": int64(2), "ports": []any{int64(80)}}}
	for _, c := range []struct {
		want    map[string]any
		drifted bool
	}{
		{map[string]any{"spec": map[string]any{"replicas": float64(2)}}, false},
		{map[string]any{"spec": map[string]any{"replicas": 2}}, false},
		{map[string]any{"spec": map[string]any{"replicas": int32(3)}}, true},
		{map[string]any{"spec": map[string]any{"ports": []any{float64(80)}}}, false},
	} {
		if got := drift.Drifted(live, c.want); got != c.drifted {
			t.Errorf("%v against %v: drifted %v, want %v", c.want, live, got, c.drifted)
		}
	}
}

func TestDesiredSources(t *testing.T) {
	live := map[string]any{"metadata": map[string]any{"name": "x", "namespace": "hanzo",
		"annotations": map[string]any{"kubectl.kubernetes.io/last-applied-configuration": `{"spec":{"a":1}}`}}}
	git := map[string]any{"spec": map[string]any{"a": 2}}
	rendered := func(_ projection.Kind, ns, name string) (map[string]any, bool) {
		return git, ns == "hanzo" && name == "x"
	}
	if d, src := drift.Desired(projection.KindApp, live, rendered); src != drift.SourceGit || d["spec"].(map[string]any)["a"] != 2 {
		t.Errorf("with the engine's rendering: %v from %s", d, src)
	}
	if d, src := drift.Desired(projection.KindApp, live, nil); src != drift.SourceLastApplied || d["spec"].(map[string]any)["a"] != float64(1) {
		t.Errorf("without the engine: %v from %s", d, src)
	}
	if d, src := drift.Desired(projection.KindApp, map[string]any{}, nil); src != drift.SourceNone || d != nil {
		t.Errorf("without either: %v from %s", d, src)
	}
	if d, err := drift.Compare(live, nil); err != nil || d.Modified || d.DesiredManifest != nil || d.Patch == nil {
		t.Errorf("Compare with no desired state: %+v %v", d, err)
	}
}
