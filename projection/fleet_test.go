package projection

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// loadObjects decodes every document of a multi-document YAML file.
func loadObjects(t testing.TB, path string) []*Object {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	var out []*Object
	for i, doc := range splitYAML(raw) {
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatalf("%s document %d: %v", path, i, err)
		}
		if m == nil {
			continue
		}
		o, err := Decode(m)
		if err != nil {
			t.Fatalf("%s document %d: %v", path, i, err)
		}
		out = append(out, o)
	}
	return out
}

func splitYAML(raw []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(raw, []byte("\n---\n")) {
		if len(bytes.TrimSpace(d)) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}

func upserts(objs []*Object) []Change {
	out := make([]Change, len(objs))
	for i, o := range objs {
		out[i] = Change{Op: Upsert, Object: o}
	}
	return out
}

// goldenJSON compares v, encoded as indented JSON, with testdata/name; with
// -update it rewrites the file.
func goldenJSON(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden %s (run go test -update to create it): %v", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n%s", path, lineDiff(string(want), string(got)))
	}
}

// lineDiff shows the first differing lines of two texts.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl
		}
	}
	return "(equal)"
}

func itoa(i int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + jsonNumber(i)) }

func jsonNumber(i int) string { b, _ := json.Marshal(i); return string(b) }

func fleetStore(t testing.TB) *Store {
	t.Helper()
	s := NewStore(DefaultConfig())
	if _, err := s.Apply(upserts(loadObjects(t, "testdata/fleet.yaml"))...); err != nil {
		t.Fatalf("apply fleet: %v", err)
	}
	return s
}

func TestFleetGolden(t *testing.T) {
	snap := fleetStore(t).Snapshot()
	var apps []json.RawMessage
	for a := range snap.Apps() {
		apps = append(apps, a.ApplicationJSON())
	}
	for _, a := range snap.CDApplications() {
		apps = append(apps, a.ApplicationJSON())
	}
	goldenJSON(t, "fleet.applications.golden.json", apps)

	trees := map[string]json.RawMessage{}
	for a := range snap.Apps() {
		trees[a.Key().String()] = a.ApplicationTreeJSON()
	}
	goldenJSON(t, "fleet.trees.golden.json", trees)

	var board []AppView
	for a := range snap.Apps() {
		if a.Row == RowApp {
			board = append(board, a.View("in-cluster", nil))
		}
	}
	goldenJSON(t, "fleet.paas.golden.json", board)

	var native []NativeTree
	for a := range snap.Apps() {
		native = append(native, a.NativeTree())
	}
	goldenJSON(t, "fleet.native.golden.json", native)
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
