package engine

import (
	"bytes"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

const tagFile = `# the fleet's web apps
apiVersion: hanzo.ai/v1
kind: App
metadata:
  name: web   # the storefront
  namespace: hanzo
spec:
  image:
    repository: ghcr.io/hanzoai/web
    tag: "v1.2.0"   # pinned
  replicas: 2
---
# second
apiVersion: hanzo.ai/v1
kind: App
metadata: {name: api}
spec:
  image: {repository: ghcr.io/hanzoai/api, tag: v0.9.1}
`

func TestEditTagSplicesOnlyTheTag(t *testing.T) {
	out, old, changed, err := EditTag([]byte(tagFile), "hanzo", "web", "hanzo", "v1.1.0")
	if err != nil || !changed || old != "v1.2.0" {
		t.Fatalf("web: %v %v %q", err, changed, old)
	}
	want := strings.Replace(tagFile, `tag: "v1.2.0"`, `tag: "v1.1.0"`, 1)
	if string(out) != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
	out, old, changed, err = EditTag([]byte(tagFile), "hanzo", "api", "hanzo", "v0.9.0")
	if err != nil || !changed || old != "v0.9.1" {
		t.Fatalf("api: %v %v %q", err, changed, old)
	}
	if want := strings.Replace(tagFile, "tag: v0.9.1}", "tag: v0.9.0}", 1); string(out) != want {
		t.Fatalf("got\n%s", out)
	}
	if _, _, changed, err := EditTag([]byte(tagFile), "hanzo", "web", "hanzo", "v1.2.0"); err != nil || changed {
		t.Fatalf("the declared tag: changed %v, %v", changed, err)
	}
	for _, c := range []struct{ ns, name, tag string }{
		{"hanzo", "nope", "v1.0.0"}, {"other", "web", "v1.0.0"}, {"hanzo", "web", "v1\nx: y"}, {"hanzo", "web", "-v"},
	} {
		if _, _, _, err := EditTag([]byte(tagFile), c.ns, c.name, "hanzo", c.tag); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if _, _, _, err := EditTag([]byte("kind: App\nmetadata: {name: a}\nspec: {image: {repository: r}}\n"), "hanzo", "a", "hanzo", "v1.0.0"); err != ErrNoTag {
		t.Errorf("no tag: %v", err)
	}
	// A later document that does not parse, or the App declared twice,
	// refuses the edit rather than writing the broken file back.
	broken := strings.Replace(tagFile, "kind: App\nmetadata: {name: api}", "kind: data: {name: api}", 1)
	if _, _, _, err := EditTag([]byte(broken), "hanzo", "web", "hanzo", "v3.0.0"); err == nil || !strings.Contains(err.Error(), "not YAML") {
		t.Errorf("a broken later document: %v", err)
	}
	twice := tagFile + "---\nkind: App\nmetadata: {name: web, namespace: hanzo}\nspec: {image: {tag: v2}}\n"
	if _, _, _, err := EditTag([]byte(twice), "hanzo", "web", "hanzo", "v3.0.0"); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("the App twice: %v", err)
	}
}

// FuzzEditTag: whatever the file, an edit that succeeds yields YAML that
// parses and differs from the input only in the tag's bytes.
func FuzzEditTag(f *testing.F) {
	f.Add([]byte(tagFile), "v3.0.0")
	f.Add([]byte(strings.Replace(tagFile, "kind: App\nmetadata: {name: api}", "kind: data: {name: api}", 1)), "v3.0.0")
	f.Add([]byte("kind: App\nmetadata:\n  name: web\nspec:\n  image:\n    tag: 'v1'\n"), "v2.0.0")
	f.Add([]byte("kind: App\nmetadata: {name: web, namespace: hanzo}\nspec: {image: {tag: v1}} # x\n"), "v10.0.0")
	f.Add([]byte("kind: App\nmetadata:\n  name: web\nspec:\n  image:\n    tag: |\n      v1\n"), "v2.0.0")
	f.Add([]byte("kind: App\nmetadata:\n  name: web\nspec:\n  image:\n    tag: &a v1\n    other: *a\n"), "v2.0.0")
	f.Fuzz(func(t *testing.T, in []byte, tag string) {
		out, old, changed, err := EditTag(in, "hanzo", "web", "hanzo", tag)
		if err != nil || !changed {
			return
		}
		i := 0
		for i < len(in) && i < len(out) && in[i] == out[i] {
			i++
		}
		j := 0
		for j < len(in)-i && j < len(out)-i && in[len(in)-1-j] == out[len(out)-1-j] {
			j++
		}
		gotOld, gotNew := string(in[i:len(in)-j]), string(out[i:len(out)-j])
		if !strings.Contains(old, gotOld) || !strings.Contains(tag, gotNew) {
			t.Fatalf("the edit changed %q into %q, more than the tag %q → %q", gotOld, gotNew, old, tag)
		}
		dec := yaml.NewDecoder(bytes.NewReader(out))
		for {
			var n yaml.Node
			if err := dec.Decode(&n); err != nil {
				if err.Error() != "EOF" {
					t.Fatalf("the edited file does not parse: %v\n%s", err, out)
				}
				break
			}
		}
		node, err := findTag(out, "hanzo", "web", "hanzo")
		if err != nil || node.Value != tag {
			t.Fatalf("the edited file declares %v, %v; want %q", node, err, tag)
		}
	})
}
