package release

import (
	"cmp"
	"slices"
	"strings"
	"testing"

	"github.com/hanzoai/deploy/projection"
)

func TestParseTag(t *testing.T) {
	for _, tc := range []struct {
		tag   string
		ok    bool
		clean bool
	}{
		{"v1.2.3", true, true},
		{"v0.0.0", true, true},
		{"v01.2.3", true, true}, // what projection.IsSemverTag takes
		{"v1.10.0", true, true},
		{"v2.0.0-rc.1", true, false},
		{"v1.0.0+build.5", true, false},
		{"v1.0.0-alpha-1.beta+exp.sha.5114f85", true, false},
		{"1.2.3", false, false},
		{"latest", false, false},
		{"v1.2", false, false},
		{"v1.2.3.4", false, false},
		{"v1..3", false, false},
		{"v1.2.3-", false, false},
		{"v1.2.3-01", false, false},
		{"v1.2.3+", false, false},
		{"v1.2.3-a..b", false, false},
		{"v1.2.3-ä", false, false},
		{"V1.2.3", false, false},
		{"v-1.2.3", false, false},
		{"sha-abc123", false, false},
	} {
		v, ok := ParseTag(tc.tag)
		if ok != tc.ok || (ok && v.Clean() != tc.clean) {
			t.Errorf("ParseTag(%q): got ok=%v clean=%v, want ok=%v clean=%v", tc.tag, ok, ok && v.Clean(), tc.ok, tc.clean)
		}
	}
}

func TestCompareFollowsSemverPrecedence(t *testing.T) {
	// semver.org §11's example order, then numeric parts of any length.
	ordered := []string{
		"v1.0.0-alpha", "v1.0.0-alpha.1", "v1.0.0-alpha.beta", "v1.0.0-beta", "v1.0.0-beta.2",
		"v1.0.0-beta.11", "v1.0.0-rc.1", "v1.0.0", "v1.2.0", "v1.10.0", "v1.11.0", "v2.0.0-rc.1",
		"v2.0.0", "v10.0.0", "v99999999999999999999.0.0",
	}
	for i := range ordered {
		for j := range ordered {
			a, _ := ParseTag(ordered[i])
			b, _ := ParseTag(ordered[j])
			if got, want := Compare(a, b), cmp.Compare(i, j); got != want {
				t.Errorf("Compare(%s, %s): got %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
}

func TestLatest(t *testing.T) {
	for _, tc := range []struct {
		tags []string
		want string
	}{
		{[]string{"v1.0.0", "v1.2.0", "v1.10.0", "latest", "v2.0.0-rc.1"}, "v1.10.0"},
		{[]string{"latest", "main", "v3.0.0-beta"}, ""},
		{nil, ""},
		{[]string{"v1.2.3", "v01.2.3"}, "v1.2.3"}, // equal precedence: the text breaks the tie
		{[]string{"v1.9.9", "v1.10.0+meta"}, "v1.9.9"},
	} {
		if got := Latest(tc.tags); got != tc.want {
			t.Errorf("Latest(%q): got %q, want %q", tc.tags, got, tc.want)
		}
	}
}

func TestForgeRepo(t *testing.T) {
	for in, want := range map[string]string{
		"ghcr.io/hanzoai/iam":                "hanzoai/iam",
		"ghcr.io/acme/web/api":               "acme/web",
		"localhost:5000/acme/api":            "acme/api",
		"127.0.0.1:5000/octocat/hello-world": "octocat/hello-world",
		"hanzoai/iam":                        "hanzoai/iam",
		"ghcr.io/iam":                        "",
		"nginx":                              "",
	} {
		if got := forgeRepo(in); got != want {
			t.Errorf("forgeRepo(%q): got %q, want %q", in, got, want)
		}
	}
}

// FuzzParseTag: a tag parses back to itself, clean tags are exactly the
// ones the drift rules call releases, and the order is a total order that
// agrees with the precedence of the numeric core.
func FuzzParseTag(f *testing.F) {
	for _, s := range []string{"v1.2.3", "v1.10.0", "v2.0.0-rc.1", "v1.0.0+b", "latest", "v01.0.0", "v1.0.0-0.a", "v1.2"} {
		f.Add(s, "v1.2.3")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		va, oka := ParseTag(a)
		if oka != (oka && va.Tag == a) {
			t.Fatalf("ParseTag(%q) kept %q", a, va.Tag)
		}
		if got, want := oka && va.Clean(), projection.IsSemverTag(a); got != want {
			t.Fatalf("%q: clean %v, IsSemverTag %v", a, got, want)
		}
		vb, okb := ParseTag(b)
		if !oka || !okb {
			return
		}
		ab, ba := Compare(va, vb), Compare(vb, va)
		if ab != -ba {
			t.Fatalf("Compare(%q,%q)=%d but Compare(%q,%q)=%d", a, b, ab, b, a, ba)
		}
		if (ab == 0) != (a == b) {
			t.Fatalf("Compare(%q,%q)=%d: equal only for the same tag", a, b, ab)
		}
		if va.Clean() && vb.Clean() {
			latest := Latest([]string{a, b, "latest"})
			want := a
			if ab < 0 {
				want = b
			}
			if latest != want {
				t.Fatalf("Latest(%q,%q) = %q, want %q", a, b, latest, want)
			}
		}
	})
}

// FuzzCompareTransitive sorts three tags and checks the order holds
// pairwise (transitivity of Compare).
func FuzzCompareTransitive(f *testing.F) {
	f.Add("v1.0.0-alpha", "v1.0.0-alpha.1", "v1.0.0")
	f.Add("v1.0.0-1", "v1.0.0-a", "v1.0.0-A")
	f.Add("v1.2.3", "v01.2.3", "v1.2.3+x")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		var vs []Version
		for _, s := range []string{a, b, c} {
			v, ok := ParseTag(s)
			if !ok {
				return
			}
			vs = append(vs, v)
		}
		slices.SortFunc(vs, Compare)
		for i := range vs {
			for j := i + 1; j < len(vs); j++ {
				if Compare(vs[i], vs[j]) > 0 {
					tags := make([]string, len(vs))
					for k, v := range vs {
						tags[k] = v.Tag
					}
					t.Fatalf("sorted %s, but %s > %s", strings.Join(tags, " "), vs[i].Tag, vs[j].Tag)
				}
			}
		}
	})
}
