package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func names(docs []Doc) []string {
	var out []string
	for _, d := range docs {
		out = append(out, d.Object.GetKind()+"/"+d.Object.GetName()+"@"+d.where())
	}
	return out
}

func TestRenderFiles(t *testing.T) {
	files := map[string][]byte{
		"crs/b/web.yaml": []byte("# leading comment\n---\napiVersion: hanzo.ai/v1\nkind: App\nmetadata: {name: web}\nspec: {replicas: 2}\n---\n# only a comment\n---\n\n---\napiVersion: hanzo.ai/v1\nkind: App\nmetadata: {name: api, namespace: hanzo-devnet}\n"),
		"crs/a.yml":      []byte("apiVersion: hanzo.ai/v1alpha1\nkind: Middleware\nmetadata:\n  name: auth\n"),
		"crs/c.json":     []byte(`{"apiVersion":"hanzo.ai/v1","kind":"App","metadata":{"name":"json"}}`),
		"crs/README.md":  []byte("not: [a manifest"),
		"other/x.yaml":   []byte("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n"),
		"crs/list.yaml":  []byte("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: hanzo.ai/v1, kind: App, metadata: {name: l1}}\n- {apiVersion: hanzo.ai/v1, kind: App, metadata: {name: l2}}\n"),
	}
	docs, err := Render(t.Context(), files, "crs")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Middleware/auth@crs/a.yml:1",
		"App/web@crs/b/web.yaml:3",
		"App/api@crs/b/web.yaml:12",
		"App/json@crs/c.json:1",
		"App/l1@crs/list.yaml:1",
		"App/l2@crs/list.yaml:1",
	}
	if diff := cmp.Diff(want, names(docs)); diff != "" {
		t.Errorf("rendered (-want +got):\n%s", diff)
	}
	if r, _, _ := unstructuredInt(docs[1].Object.Object, "spec", "replicas"); r != 2 {
		t.Errorf("replicas decoded as %v, want int64 2", r)
	}
}

func unstructuredInt(m map[string]any, path ...string) (int64, bool, error) {
	var cur any = m
	for _, p := range path {
		cur = cur.(map[string]any)[p]
	}
	v, ok := cur.(int64)
	return v, ok, nil
}

func TestRenderErrorsNameFileAndLine(t *testing.T) {
	cases := []struct {
		name, content, want string
	}{
		{"bad indentation", "apiVersion: hanzo.ai/v1\nkind: App\nmetadata:\n  name: a\n---\napiVersion: hanzo.ai/v1\nkind: App\nmetadata:\n  name: b\n   bad: x\n", "render crs/apps.yaml:10: "},
		{"no kind", "---\napiVersion: hanzo.ai/v1\nmetadata: {name: a}\n", "render crs/apps.yaml:2: the object has no apiVersion or no kind"},
		{"not an object", "- a\n- b\n", "render crs/apps.yaml:1: the document is not an object"},
		{"no name", "apiVersion: hanzo.ai/v1\nkind: App\nmetadata: {}\n", "render crs/apps.yaml:1: App has no metadata.name"},
		{"label not a string", "apiVersion: hanzo.ai/v1\nkind: App\nmetadata: {name: a, labels: {x: 1}}\n", `render crs/apps.yaml:1: App's metadata.labels["x"] is not a string`},
		{"unclosed flow", "apiVersion: hanzo.ai/v1\nkind: App\nmetadata: {name: a\n", "render crs/apps.yaml:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Render(t.Context(), map[string][]byte{"crs/apps.yaml": []byte(c.content), "crs/ok.yaml": []byte("apiVersion: hanzo.ai/v1\nkind: App\nmetadata: {name: ok}\n")}, "crs")
			var re *RenderError
			if !errors.As(err, &re) {
				t.Fatalf("got %v, want a RenderError", err)
			}
			if !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("got %q, want it to start %q", err, c.want)
			}
		})
	}
}

func TestRenderKustomize(t *testing.T) {
	files := map[string][]byte{
		"base/app.yaml":                []byte("apiVersion: hanzo.ai/v1\nkind: App\nmetadata: {name: web}\nspec: {replicas: 3, image: {repository: r, tag: v1}}\n"),
		"base/kustomization.yaml":      []byte("resources: [app.yaml]\n"),
		"overlay/kustomization.yaml":   []byte("resources: [../base]\nnamespace: hanzo-devnet\nnamePrefix: dev-\n"),
		"overlay/ignored-by-kust.yaml": []byte("apiVersion: hanzo.ai/v1\nkind: App\nmetadata: {name: not-listed}\n"),
	}
	docs, err := Render(t.Context(), files, "overlay")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 1 || docs[0].Object.GetName() != "dev-web" || docs[0].Object.GetNamespace() != "hanzo-devnet" {
		t.Fatalf("got %v, want one App dev-web in hanzo-devnet", names(docs))
	}
	// Numbers are the API server's JSON types (kustomize hands out int):
	// the object can be deep-copied and compared with a live one.
	if r, ok, _ := unstructuredInt(docs[0].Object.DeepCopy().Object, "spec", "replicas"); !ok || r != 3 {
		t.Errorf("replicas %v (int64 %v), want int64 3", r, ok)
	}
}

func TestRenderKustomizeRefusesRemoteAndPlugins(t *testing.T) {
	cases := map[string]string{
		"remote git base":  "resources:\n- github.com/hanzoai/universe//infra?ref=main\n",
		"remote https":     "resources: [https://example.com/app.yaml]\n",
		"exec generator":   "generators: [gen.yaml]\n",
		"outside the root": "resources: [../../etc/passwd]\n",
	}
	for name, kust := range cases {
		t.Run(name, func(t *testing.T) {
			files := map[string][]byte{
				"k/kustomization.yaml": []byte(kust),
				"k/gen.yaml":           []byte("apiVersion: example.com/v1\nkind: Gen\nmetadata:\n  name: g\n  annotations:\n    config.kubernetes.io/function: |\n      exec: {path: /bin/sh}\n"),
			}
			docs, err := Render(t.Context(), files, "k")
			var re *RenderError
			if !errors.As(err, &re) {
				t.Fatalf("got %v, %v; want a RenderError", names(docs), err)
			}
			if !strings.Contains(err.Error(), "k/kustomization.yaml") {
				t.Errorf("got %q, want it to name k/kustomization.yaml", err)
			}
		})
	}
}

func TestSplitDocumentsLines(t *testing.T) {
	docs := splitDocuments([]byte("a: 1\n---\nb: 2\n--- # c\n\nc: 3\n---"))
	var lines []int
	for _, d := range docs {
		lines = append(lines, d.line)
	}
	if diff := cmp.Diff([]int{1, 3, 5, 8}, lines); diff != "" {
		t.Errorf("document lines (-want +got):\n%s", diff)
	}
}

// FuzzRender: any file content renders or fails with a RenderError naming
// the file; it never panics, and every object rendered has a kind and a
// name.
func FuzzRender(f *testing.F) {
	f.Add([]byte("apiVersion: hanzo.ai/v1\nkind: App\nmetadata: {name: a}\n---\n# c\n"))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: X, metadata: {name: y}}]\n"))
	f.Add([]byte("{\"apiVersion\":\"hanzo.ai/v1\",\"kind\":\"App\",\"metadata\":{\"name\":\"j\",\"labels\":{\"a\":\"b\"}}}"))
	f.Add([]byte("a: [\n---\n- 1\n"))
	f.Fuzz(func(t *testing.T, content []byte) {
		docs, err := Render(t.Context(), map[string][]byte{"d/f.yaml": content}, "d")
		if err != nil {
			var re *RenderError
			if !errors.As(err, &re) || re.File != "d/f.yaml" {
				t.Fatalf("got %v, want a RenderError naming d/f.yaml", err)
			}
			return
		}
		for _, d := range docs {
			d.Object.DeepCopy() // panics on a number of a type JSON does not decode to
			if d.Object.GetKind() == "" || d.Object.GetName() == "" || d.Line < 1 {
				t.Fatalf("rendered %v at line %d", d.Object.Object, d.Line)
			}
		}
	})
}
