package release

import (
	"cmp"
	"strings"

	"github.com/hanzoai/deploy/projection"
)

// Version is a parsed "v"-prefixed semantic version tag. Numeric parts are
// kept as decimal strings without leading zeros, so a part of any length
// compares exactly (no integer overflow).
type Version struct {
	Core [3]string // major, minor, patch
	Pre  []string  // pre-release identifiers, nil for a release
	Tag  string    // the tag as written
}

// ParseTag reads a tag of the form vMAJOR.MINOR.PATCH[-PRE][+BUILD]. It
// accepts what projection.IsSemverTag accepts (leading zeros included) plus
// semver's pre-release and build parts; anything else (latest, main, sha-…)
// is not a version.
func ParseTag(tag string) (Version, bool) {
	rest, ok := strings.CutPrefix(tag, "v")
	if !ok {
		return Version{}, false
	}
	rest, build, hasBuild := strings.Cut(rest, "+")
	if hasBuild && !validIdents(build, false) {
		return Version{}, false
	}
	core, pre, hasPre := strings.Cut(rest, "-")
	if hasPre && !validIdents(pre, true) {
		return Version{}, false
	}
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return Version{}, false
	}
	v := Version{Tag: tag}
	for i, p := range parts {
		if p == "" || !allDigits(p) {
			return Version{}, false
		}
		v.Core[i] = trimZeros(p)
	}
	if hasPre {
		v.Pre = strings.Split(pre, ".")
	}
	return v, true
}

// Clean reports whether the tag is a plain release: vX.Y.Z with no
// pre-release or build part. Exactly the tags projection.IsSemverTag takes.
func (v Version) Clean() bool { return v.Pre == nil && projection.IsSemverTag(v.Tag) }

// Compare orders versions by semver precedence: the numeric core, then a
// release above its pre-releases, then the pre-release identifiers one by
// one (numeric below alphanumeric, numbers by value, words by ASCII, a
// shorter list first when equal so far). Build metadata is ignored. Ties
// between equal precedences (v1.2.3 and v01.2.3) are broken by the tag's
// text, so the order is total and Latest is deterministic.
func Compare(a, b Version) int {
	if c := comparePrecedence(a, b); c != 0 {
		return c
	}
	return strings.Compare(a.Tag, b.Tag)
}

func comparePrecedence(a, b Version) int {
	for i := range a.Core {
		if c := compareNumeric(a.Core[i], b.Core[i]); c != 0 {
			return c
		}
	}
	switch {
	case a.Pre == nil && b.Pre == nil:
		return 0
	case a.Pre == nil:
		return 1
	case b.Pre == nil:
		return -1
	}
	for i := 0; i < len(a.Pre) && i < len(b.Pre); i++ {
		x, y := a.Pre[i], b.Pre[i]
		xn, yn := allDigits(x), allDigits(y)
		var c int
		switch {
		case xn && yn:
			c = compareNumeric(trimZeros(x), trimZeros(y))
		case xn:
			c = -1
		case yn:
			c = 1
		default:
			c = strings.Compare(x, y)
		}
		if c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a.Pre), len(b.Pre))
}

// Latest is the highest clean release tag among tags, "" when there is
// none: pre-releases, build-tagged and floating tags are ignored.
func Latest(tags []string) string {
	var best Version
	found := false
	for _, t := range tags {
		v, ok := ParseTag(t)
		if !ok || !v.Clean() {
			continue
		}
		if !found || Compare(v, best) > 0 {
			best, found = v, true
		}
	}
	return best.Tag
}

// compareNumeric compares two digit strings without leading zeros.
func compareNumeric(a, b string) int {
	if c := cmp.Compare(len(a), len(b)); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func trimZeros(s string) string {
	t := strings.TrimLeft(s, "0")
	if t == "" {
		return "0"
	}
	return t
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// validIdents checks dot-separated semver identifiers: non-empty, of
// [0-9A-Za-z-]; in a pre-release, a numeric identifier has no leading zero.
func validIdents(s string, pre bool) bool {
	for id := range strings.SplitSeq(s, ".") {
		if id == "" {
			return false
		}
		for i := 0; i < len(id); i++ {
			c := id[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
				return false
			}
		}
		if pre && len(id) > 1 && id[0] == '0' && allDigits(id) {
			return false
		}
	}
	return true
}
