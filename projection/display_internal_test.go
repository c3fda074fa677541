package projection

import (
	"strings"
	"testing"
)

// FuzzSourceDisplayExpand: expand writes what strings.NewReplacer of
// {namespace} and {name} would, for any template and values.
func FuzzSourceDisplayExpand(f *testing.F) {
	for _, s := range []string{"", "plain", "{namespace}/{name}", "{{name}}", "{name", "a{namespace}{name}{b}", "{namespace}{namespace", "{nam{name}e}"} {
		f.Add(s, "hanzo", "web")
	}
	f.Add("{namespace}", "{name}", "{namespace}")
	f.Fuzz(func(t *testing.T, s, namespace, name string) {
		want := strings.NewReplacer("{namespace}", namespace, "{name}", name).Replace(s)
		if got := (SourceDisplay{}).expand(s, namespace, name); got != want {
			t.Fatalf("expand(%q, %q, %q) = %q, want %q", s, namespace, name, got, want)
		}
	})
}
