package projection

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
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
	v *posVec // nil: the start of every cluster
}

// posVec holds a position's parts. One cluster's is one allocation.
type posVec struct {
	names []string // every cluster's name, the first's first; nil with one
	rv    []uint64 // by cluster index
	one   [1]uint64
	// down is, by cluster index, since when (Unix seconds) the cluster
	// has not answered, 0 while it answers; nil when every one answers
	// (and always with one cluster).
	down []int64
	// book keeps the compact ids given of this position and those made
	// from it (nil: ids are written whole); id is its id once worked out
	// ("" when it is written whole).
	book *Book
	id   atomic.Pointer[string]
}

func newPosVec(names []string) *posVec {
	v := &posVec{names: names}
	if len(names) <= 1 {
		v.names, v.rv = nil, v.one[:]
	} else {
		v.rv = make([]uint64, len(names))
	}
	return v
}

// At returns a single cluster's position: the first cluster's rv.
func At(rv uint64) Position {
	v := newPosVec(nil)
	v.rv[0] = rv
	return Position{v}
}

// ZeroPosition is the start of every cluster of names (the clusters'
// names, the first's first; nil or one name for one cluster).
func ZeroPosition(names []string) Position {
	if len(names) <= 1 {
		return Position{}
	}
	return Position{newPosVec(names)}
}

// positionOf is the position of the parts rvs (copied), of the clusters
// of names, with the clusters down (by index, since when; nil: none)
// marked.
func positionOf(names []string, rvs []uint64, down map[int]int64) Position {
	v := newPosVec(names)
	copy(v.rv, rvs)
	if v.names != nil {
		for i, since := range down {
			if since != 0 && i < len(v.rv) {
				if v.down == nil {
					v.down = make([]int64, len(v.rv))
				}
				v.down[i] = since
			}
		}
	}
	return Position{v}
}

// clone is a copy of p's parts, of the clusters of names (p's when nil).
func (p Position) clone(names []string) *posVec {
	if names == nil {
		names = p.names()
	}
	v := newPosVec(names)
	if p.v != nil {
		v.book = p.v.book
		copy(v.rv, p.v.rv)
		if p.v.down != nil && v.names != nil {
			v.down = make([]int64, len(v.rv))
			copy(v.down, p.v.down)
		}
	}
	return v
}

// Of is cluster i's part.
func (p Position) Of(i int) uint64 {
	if p.v == nil || i < 0 || i >= len(p.v.rv) {
		return 0
	}
	return p.v.rv[i]
}

// Down is since when (Unix seconds) cluster i had not answered, as the
// replica that gave p saw it; 0 while it answered.
func (p Position) Down(i int) int64 {
	if p.v == nil || p.v.down == nil || i < 0 || i >= len(p.v.down) {
		return 0
	}
	return p.v.down[i]
}

// WithDown returns p with cluster i marked as not answering since since
// (0: answering); p is not modified. A one-cluster position is returned
// as it is: its written form stays one decimal.
func (p Position) WithDown(i int, since int64) Position {
	if p.Down(i) == since || p.names() == nil || i < 0 || i >= p.parts() {
		return p
	}
	v := p.clone(nil)
	if v.down == nil {
		v.down = make([]int64, len(v.rv))
	}
	v.down[i] = since
	return Position{v}
}

// SameDown reports whether p and q mark cluster i alike.
func (p Position) SameDown(q Position, i int) bool { return p.Down(i) == q.Down(i) }

// WithMarksOf is p with q's mark on every part: the position a client is
// given marks each cluster as the client holds it.
func (p Position) WithMarksOf(q Position) Position {
	out := p
	for i := range p.parts() {
		if !out.SameDown(q, i) {
			out = out.WithDown(i, q.Down(i))
		}
	}
	return out
}

// Len is how many clusters p has parts of.
func (p Position) Len() int { return p.parts() }

// SameDowns reports whether p and q mark every cluster alike.
func (p Position) SameDowns(q Position) bool {
	if (p.v == nil || p.v.down == nil) && (q.v == nil || q.v.down == nil) {
		return true
	}
	for i := range max(p.parts(), q.parts()) {
		if !p.SameDown(q, i) {
			return false
		}
	}
	return true
}

// Saw reports whether a client at p has seen a change of cluster i made
// at q: q's part of i is older than p's, or the same with the same
// condition (a change of the condition alone moves no resourceVersion).
func (p Position) Saw(q Position, i int) bool {
	return q.Of(i) < p.Of(i) || (q.Of(i) == p.Of(i) && p.SameDown(q, i))
}

// First is the first cluster's part.
func (p Position) First() uint64 { return p.Of(0) }

// book is the Book p's ids are kept in, nil for none.
func (p Position) book() *Book {
	if p.v == nil {
		return nil
	}
	return p.v.book
}

// names are the clusters' names (nil with one cluster).
func (p Position) names() []string {
	if p.v == nil {
		return nil
	}
	return p.v.names
}

// parts is how many parts p holds.
func (p Position) parts() int {
	if p.v == nil {
		return 0
	}
	return len(p.v.rv)
}

// With returns p with cluster i's part set to rv; p is not modified. A
// zero Position takes the single-cluster form unless i > 0 (then it holds
// nothing of that cluster: make it with ZeroPosition).
func (p Position) With(i int, rv uint64) Position {
	if p.Of(i) == rv && (i < p.parts() || rv == 0) {
		return p
	}
	if i >= max(p.parts(), 1) {
		return p
	}
	v := p.clone(nil)
	v.rv[i] = rv
	return Position{v}
}

// Covers reports whether p is at or past q in every cluster: a client at p
// has seen everything up to q.
func (p Position) Covers(q Position) bool {
	if q.v == nil || p.v == q.v {
		return true
	}
	for i, rv := range q.v.rv {
		if rv > p.Of(i) {
			return false
		}
	}
	return true
}

// Max is the newest of p and q in every part, with that part's condition;
// where both have the same resourceVersion, p's.
func (p Position) Max(q Position) Position {
	switch {
	case p.Covers(q):
		return p
	case q.Covers(p) && !p.downDiffersAtTie(q):
		return q
	}
	names := p.names()
	if len(q.names()) > len(names) {
		names = q.names()
	}
	v := newPosVec(names)
	if v.book = p.book(); v.book == nil {
		v.book = q.book()
	}
	for i := range v.rv {
		from := p
		if q.Of(i) > p.Of(i) {
			from = q
		}
		v.rv[i] = from.Of(i)
		if d := from.Down(i); d != 0 && v.names != nil {
			if v.down == nil {
				v.down = make([]int64, len(v.rv))
			}
			v.down[i] = d
		}
	}
	return Position{v}
}

// downDiffersAtTie reports whether a part of the same resourceVersion in
// p and q is marked differently.
func (p Position) downDiffersAtTie(q Position) bool {
	if p.v == nil || q.v == nil || (p.v.down == nil && q.v.down == nil) {
		return false
	}
	for i := range max(p.parts(), q.parts()) {
		if p.Of(i) == q.Of(i) && !p.SameDown(q, i) {
			return true
		}
	}
	return false
}

// Within is p without the parts of the clusters held holds nothing of: a
// part is 0 where held's is. A replica at held has folded nothing of
// such a cluster (it has not answered since the replica started), so of
// p it can only have the other parts. With one cluster, p unless held is
// the zero Position.
func (p Position) Within(held Position) Position {
	out := p
	for i := range p.parts() {
		if held.Of(i) == 0 && p.Of(i) != 0 {
			out = out.With(i, 0)
		}
	}
	return out
}

// Behind is p's parts of the clusters in which q is newer than p, 0 in
// the others: of a client at p, the clusters a replica at q has changes
// of that the client has not seen.
func (p Position) Behind(q Position) Position {
	out := p
	for i := range p.parts() {
		if q.Of(i) <= p.Of(i) && p.Of(i) != 0 {
			out = out.With(i, 0)
		}
	}
	return out
}

// IsZero reports whether no cluster has a part.
func (p Position) IsZero() bool {
	if p.v != nil {
		for _, rv := range p.v.rv {
			if rv != 0 {
				return false
			}
		}
	}
	return true
}

// Equal reports whether p and q hold the same parts, conditions included.
func (p Position) Equal(q Position) bool {
	return p.Covers(q) && q.Covers(p) && p.SameDowns(q)
}

// Append appends the position's written form to b.
func (p Position) Append(b []byte) []byte {
	names := p.names()
	if names == nil {
		return strconv.AppendUint(b, p.First(), 10)
	}
	for i, name := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, name...)
		b = append(b, '=')
		b = strconv.AppendUint(b, p.Of(i), 10)
		if d := p.Down(i); d != 0 {
			b = append(b, '~')
			b = strconv.AppendInt(b, d, 10)
		}
	}
	return b
}

// String is the position's written form.
func (p Position) String() string { return string(p.Append(nil)) }

// maxPositionLen bounds a written position a client sends: the full
// form of a thousand clusters with short names.
const maxPositionLen = 64 << 10

// ParsePosition reads a written position against the clusters of names
// (the configuration's, the first's first): a decimal is the first
// cluster's part (the one-cluster form, and what a client holds from
// before other clusters were added); "<cluster>=<rv>,…" gives parts by
// name, a cluster it leaves out at 0, each optionally marked "~<since>"
// (the cluster had not answered since then). A cluster the configuration does
// not name is skipped: this deployd holds nothing of it (with no names,
// every named part is). "" and "0" are
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
		if len(names) <= 1 {
			return At(rv), nil
		}
		return zero.With(0, rv), nil
	}
	var v *posVec // the parts read so far, made on the first known cluster
	var index map[string]int
	if len(names) > 8 {
		index = make(map[string]int, len(names))
		for i, n := range names {
			if _, dup := index[n]; !dup {
				index[n] = i
			}
		}
	}
	p := zero
	for part := range strings.SplitSeq(s, ",") {
		name, num, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || name == "" {
			return zero, fmt.Errorf("part %q: want <cluster>=<resourceVersion>", cut(part))
		}
		num, mark, marked := strings.Cut(num, "~")
		rv, err := parseDecimal(num)
		if err != nil {
			return zero, fmt.Errorf("cluster %q: %w", cut(name), err)
		}
		var since uint64
		if marked {
			if since, err = parseDecimal(mark); err != nil || since > math.MaxInt64 {
				return zero, fmt.Errorf("cluster %q: after ~, the time since when it has not answered: want Unix seconds such as 1764687600", cut(name))
			}
		}
		if len(names) <= 1 {
			if len(names) == 1 && names[0] == name {
				p = At(rv)
			}
			continue // without names, no part is known to be the one cluster's
		}
		i := -1
		if index != nil {
			if at, ok := index[name]; ok {
				i = at
			}
		} else {
			for at, n := range names {
				if n == name {
					i = at
					break
				}
			}
		}
		if i < 0 {
			continue
		}
		if v == nil {
			v = newPosVec(names)
		}
		v.rv[i] = rv
		if since != 0 {
			if v.down == nil {
				v.down = make([]int64, len(v.rv))
			}
			v.down[i] = int64(since)
		} else if v.down != nil {
			v.down[i] = 0
		}
	}
	if v != nil {
		p = Position{v}
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
