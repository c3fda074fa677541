package projection

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Position is where the fold stands in each cluster's order: per cluster,
// the newest resourceVersion folded (0: none yet). resourceVersions of two
// clusters come from two etcds and are never compared with each other, so
// a position is a vector, ordered part by part. With one cluster it is one
// number, written as before (a decimal); with several it is written
// "<cluster>=<resourceVersion>,…" in the configuration's order. The zero
// Position is the start of every cluster. A Position is a value; its parts
// are never modified once made.
type Position struct {
	first uint64    // the first cluster's
	more  *otherPos // the other clusters'; nil with one cluster
}

// otherPos holds the parts of the clusters after the first.
type otherPos struct {
	names []string // every cluster's name, the first's first; shared
	rv    []uint64 // by cluster index - 1
}

// At returns a single cluster's position: the first cluster's rv.
func At(rv uint64) Position { return Position{first: rv} }

// ZeroPosition is the start of every cluster of names (the clusters'
// names, the first's first; nil or one name for one cluster).
func ZeroPosition(names []string) Position {
	if len(names) <= 1 {
		return Position{}
	}
	return Position{more: &otherPos{names: names, rv: make([]uint64, len(names)-1)}}
}

// Of is cluster i's part.
func (p Position) Of(i int) uint64 {
	if i == 0 {
		return p.first
	}
	if p.more == nil || i > len(p.more.rv) {
		return 0
	}
	return p.more.rv[i-1]
}

// First is the first cluster's part.
func (p Position) First() uint64 { return p.first }

// With returns p with cluster i's part set to rv; p is not modified.
func (p Position) With(i int, rv uint64) Position {
	if i == 0 {
		p.first = rv
		return p
	}
	if p.more == nil || i > len(p.more.rv) || p.more.rv[i-1] == rv {
		return p
	}
	rvs := append([]uint64(nil), p.more.rv...)
	rvs[i-1] = rv
	p.more = &otherPos{names: p.more.names, rv: rvs}
	return p
}

// Only is the position holding cluster i's part of p and zero elsewhere:
// a row's own position.
func (p Position) Only(i int, rv uint64) Position {
	if p.more == nil {
		return Position{first: rv}
	}
	return ZeroPosition(p.more.names).With(i, rv)
}

// Covers reports whether p is at or past q in every cluster: a client at p
// has seen everything up to q.
func (p Position) Covers(q Position) bool {
	if q.first > p.first {
		return false
	}
	if q.more == nil {
		return true
	}
	for i, rv := range q.more.rv {
		if rv > p.Of(i+1) {
			return false
		}
	}
	return true
}

// Max is the newest of p and q in every part.
func (p Position) Max(q Position) Position {
	if p.more == q.more || q.more == nil || p.more == nil {
		p.first = max(p.first, q.first)
		if p.more == nil {
			p.more = q.more
		}
		if p.more == q.more || q.more == nil {
			return p
		}
	}
	if p.Covers(q) {
		return p
	}
	if q.Covers(p) {
		return q
	}
	p.first = max(p.first, q.first)
	if q.more == nil {
		return p
	}
	if p.more == nil {
		p.more = q.more
		return p
	}
	for i, rv := range q.more.rv {
		if rv > p.Of(i+1) {
			p = p.With(i+1, rv)
		}
	}
	return p
}

// IsZero reports whether no cluster has a part.
func (p Position) IsZero() bool {
	if p.first != 0 {
		return false
	}
	if p.more != nil {
		for _, rv := range p.more.rv {
			if rv != 0 {
				return false
			}
		}
	}
	return true
}

// Equal reports whether p and q hold the same parts.
func (p Position) Equal(q Position) bool { return p.Covers(q) && q.Covers(p) }

// Append appends the position's written form to b.
func (p Position) Append(b []byte) []byte {
	if p.more == nil {
		return strconv.AppendUint(b, p.first, 10)
	}
	for i, name := range p.more.names {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, name...)
		b = append(b, '=')
		b = strconv.AppendUint(b, p.Of(i), 10)
	}
	return b
}

// String is the position's written form.
func (p Position) String() string { return string(p.Append(nil)) }

// maxPositionLen bounds a written position a client sends.
const maxPositionLen = 4096

// ParsePosition reads a written position against the clusters of names
// (the configuration's, the first's first): a decimal is the first
// cluster's part (the one-cluster form, and what a client holds from
// before other clusters were added); "<cluster>=<rv>,…" gives parts by
// name, a cluster it leaves out at 0. A cluster the configuration does
// not name is skipped: this deployd holds nothing of it. "" and "0" are
// the zero Position. The error says what is wrong.
func ParsePosition(s string, names []string) (Position, error) {
	s = strings.TrimSpace(s)
	zero := ZeroPosition(names)
	if s == "" {
		return zero, nil
	}
	if len(s) > maxPositionLen {
		return zero, fmt.Errorf("it is longer than %d bytes", maxPositionLen)
	}
	if !strings.Contains(s, "=") {
		rv, err := parseDecimal(s)
		if err != nil {
			return zero, err
		}
		return zero.With(0, rv), nil
	}
	p := zero
	for part := range strings.SplitSeq(s, ",") {
		name, num, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || name == "" {
			return zero, fmt.Errorf("part %q: want <cluster>=<resourceVersion>", cut(part))
		}
		rv, err := parseDecimal(num)
		if err != nil {
			return zero, fmt.Errorf("cluster %q: %w", cut(name), err)
		}
		if len(names) <= 1 {
			if len(names) == 0 || names[0] == name {
				p.first = rv
			}
			continue
		}
		for i, n := range names {
			if n == name {
				p = p.With(i, rv)
			}
		}
	}
	return p, nil
}

func parseDecimal(s string) (uint64, error) {
	if s == "" {
		return 0, errors.New("want a decimal number such as 1761234567")
	}
	if len(s) > 20 {
		return 0, errors.New("it has more than 20 digits")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("want a decimal number such as 1761234567")
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, errors.New("it does not fit in 64 bits")
	}
	return n, nil
}

func cut(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
