package projection

import (
	"iter"
	"slices"
)

// rowSet is a set of App rows held inline for the common case of one: an
// object in more than one tree (a Deployment rendered for one App and named
// after another) is rare.
type rowSet struct {
	one  *appRow
	more *[]*appRow
}

func (rs *rowSet) all() iter.Seq[*appRow] {
	return func(yield func(*appRow) bool) {
		if rs.one != nil && !yield(rs.one) {
			return
		}
		if rs.more != nil {
			for _, r := range *rs.more {
				if !yield(r) {
					return
				}
			}
		}
	}
}

func (rs *rowSet) has(r *appRow) bool {
	return rs.one == r || (rs.more != nil && slices.Contains(*rs.more, r))
}

func (rs *rowSet) add(r *appRow) {
	switch {
	case rs.has(r):
	case rs.one == nil:
		rs.one = r
	case rs.more == nil:
		rs.more = &[]*appRow{r}
	default:
		*rs.more = append(*rs.more, r)
	}
}

func (rs *rowSet) remove(r *appRow) {
	if rs.more == nil {
		if rs.one == r {
			rs.one = nil
		}
		return
	}
	l := *rs.more
	if rs.one == r {
		rs.one = l[len(l)-1] // the last spilled row moves inline
	} else if i := slices.Index(l, r); i >= 0 {
		l[i] = l[len(l)-1]
	} else {
		return
	}
	l[len(l)-1] = nil
	if l = l[:len(l)-1]; len(l) == 0 {
		rs.more = nil
	} else {
		*rs.more = l
	}
}
