package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Limits of the fields parameter.
const (
	maxFields     = 64
	maxFieldBytes = 256
)

// Fields is Argo CD's fields parameter of a watch, parsed: dotted paths into
// the event document {"result":{"type":…,"application":{…}}} to keep, or,
// when Exclude is set (a leading "-"), to drop. A path through an array
// applies to each element. The zero Fields keeps everything.
type Fields struct {
	// Paths are sorted and unique, each starting with "result".
	Paths   []string
	Exclude bool
}

// FieldsSyntax is what Argo CD's fields parameter may name in one
// document: paths starting with one of Roots. It is the one parser of the
// parameter, for the streams' events and the routes' lists alike.
type FieldsSyntax struct {
	Doc     string   // what the paths are into, for messages ("event", "list")
	Roots   []string // the first segments a path may start with
	Example string   // a valid parameter, for messages
}

// EventFields is the syntax of a stream's fields: paths into the event
// document {"result":{"type":…,"application":{…}}}.
var EventFields = FieldsSyntax{Doc: "event", Roots: []string{"result"}, Example: "result.type,result.application.metadata.name"}

// ParseFields reads a stream's fields parameter (EventFields).
func ParseFields(s string) (Fields, error) { return EventFields.Parse(s) }

// Parse reads a fields parameter: comma-separated dotted paths of names
// (letters, digits, '_', '-' and '/'), each starting with one of the
// roots, optionally led by "-" to exclude them instead. "" keeps
// everything. At most 64 paths of at most 256 bytes.
func (fs FieldsSyntax) Parse(s string) (Fields, error) {
	var f Fields
	s = strings.TrimSpace(s)
	if s == "" {
		return f, nil
	}
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		f.Exclude, s = true, rest
	}
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if len(p) > maxFieldBytes {
			return Fields{}, fmt.Errorf("field %s is longer than %d bytes", quoteShort(p), maxFieldBytes)
		}
		segs := strings.Split(p, ".")
		if !slices.Contains(fs.Roots, segs[0]) {
			return Fields{}, fmt.Errorf("field %s is not in the %s: its fields start with %s. (for example %s)",
				quoteShort(p), fs.Doc, strings.Join(fs.Roots, ". or "), fs.Example)
		}
		for _, seg := range segs {
			if !validFieldName(seg) {
				return Fields{}, fmt.Errorf("field %s is not a dotted path of names (letters, digits, '_', '-' and '/')", quoteShort(p))
			}
		}
		f.Paths = append(f.Paths, p)
	}
	if len(f.Paths) > maxFields {
		return Fields{}, fmt.Errorf("too many fields: at most %d", maxFields)
	}
	if len(f.Paths) == 0 {
		return Fields{}, nil
	}
	slices.Sort(f.Paths)
	f.Paths = slices.Compact(f.Paths)
	return f, nil
}

func validFieldName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '/') {
			return false
		}
	}
	return true
}

// IsZero reports whether the fields keep whole events.
func (f Fields) IsZero() bool { return len(f.Paths) == 0 }

// String is the canonical parameter value ("" for the zero Fields).
func (f Fields) String() string {
	if f.IsZero() {
		return ""
	}
	s := strings.Join(f.Paths, ",")
	if f.Exclude {
		return "-" + s
	}
	return s
}

// Apply trims a JSON document to the fields. The zero Fields returns doc;
// a document that is not valid JSON is an error.
func (f Fields) Apply(doc []byte) ([]byte, error) {
	if f.IsZero() {
		return doc, nil
	}
	if !json.Valid(doc) {
		return nil, fmt.Errorf("apply fields: %w", errNotJSON)
	}
	return f.compile().apply(doc)
}

// fieldTree is Fields compiled: one node per path segment.
type fieldTree struct {
	exclude bool
	root    *fieldNode
}

type fieldNode struct {
	leaf     bool // the path ends here: the whole value is kept (or dropped)
	children map[string]*fieldNode
}

func (f Fields) compile() *fieldTree {
	if f.IsZero() {
		return nil
	}
	t := &fieldTree{exclude: f.Exclude, root: &fieldNode{}}
	for _, p := range f.Paths {
		n := t.root
		for _, seg := range strings.Split(p, ".") {
			if n.leaf {
				break // a shorter path already covers this one
			}
			c := n.children[seg]
			if c == nil {
				c = &fieldNode{}
				if n.children == nil {
					n.children = map[string]*fieldNode{}
				}
				n.children[seg] = c
			}
			n = c
		}
		n.leaf, n.children = true, nil
	}
	return t
}

// apply trims doc, which the caller knows to be valid JSON (an encoded
// Application, or one checked by Apply). It copies spans of the document
// as they are and decodes nothing but the keys it compares.
func (t *fieldTree) apply(doc []byte) ([]byte, error) {
	out := make([]byte, 0, len(doc)/2)
	var err error
	if t.exclude {
		out, err = drop(out, doc, t.root)
	} else {
		var kept bool
		if out, kept, err = keep(out, doc, t.root); !kept {
			out = append(out[:0], "{}"...) // the document holds none of the paths
		}
	}
	if err != nil {
		return nil, fmt.Errorf("apply fields: %w", err)
	}
	return out, nil
}

// keep appends the parts of v the node selects; it reports false (and
// appends nothing) when a path continues into a value that is neither an
// object nor an array.
func keep(out, v []byte, n *fieldNode) ([]byte, bool, error) {
	if n.leaf {
		return append(out, v...), true, nil
	}
	switch firstByte(v) {
	case '{':
		out = append(out, '{')
		first := true
		err := eachMember(v, func(rawKey, key, mv []byte) error {
			c := n.children[string(key)]
			if c == nil {
				return nil
			}
			mark := len(out)
			if !first {
				out = append(out, ',')
			}
			out = append(out, rawKey...)
			out = append(out, ':')
			var ok bool
			var err error
			if out, ok, err = keep(out, mv, c); !ok {
				out = out[:mark]
				return err
			}
			first = false
			return err
		})
		return append(out, '}'), true, err
	case '[':
		out = append(out, '[')
		first := true
		err := eachElement(v, func(ev []byte) error {
			mark := len(out)
			if !first {
				out = append(out, ',')
			}
			var ok bool
			var err error
			if out, ok, err = keep(out, ev, n); !ok {
				out = out[:mark]
				return err
			}
			first = false
			return err
		})
		return append(out, ']'), true, err
	}
	return out, false, nil
}

// drop appends v without the parts the node names.
func drop(out, v []byte, n *fieldNode) ([]byte, error) {
	switch firstByte(v) {
	case '{':
		out = append(out, '{')
		first := true
		err := eachMember(v, func(rawKey, key, mv []byte) error {
			c := n.children[string(key)]
			if c != nil && c.leaf {
				return nil
			}
			if !first {
				out = append(out, ',')
			}
			first = false
			out = append(out, rawKey...)
			out = append(out, ':')
			if c == nil {
				out = append(out, mv...)
				return nil
			}
			var err error
			out, err = drop(out, mv, c)
			return err
		})
		return append(out, '}'), err
	case '[':
		out = append(out, '[')
		first := true
		err := eachElement(v, func(ev []byte) error {
			if !first {
				out = append(out, ',')
			}
			first = false
			var err error
			out, err = drop(out, ev, n)
			return err
		})
		return append(out, ']'), err
	}
	return append(out, v...), nil
}

var errNotJSON = errors.New("not a JSON document")

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

func firstByte(v []byte) byte {
	if i := skipSpace(v, 0); i < len(v) {
		return v[i]
	}
	return 0
}

// stringEnd returns the index just past the string starting at b[i] ('"').
func stringEnd(b []byte, i int) (int, error) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, nil
		}
	}
	return 0, errNotJSON
}

// valueEnd returns the index just past the value starting at b[i].
func valueEnd(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errNotJSON
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, err := stringEnd(b, i)
				if err != nil {
					return 0, err
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1, nil
				}
			}
		}
		return 0, errNotJSON
	}
	start := i
	for i < len(b) && !isSpace(b[i]) && b[i] != ',' && b[i] != '}' && b[i] != ']' {
		i++
	}
	if i == start {
		return 0, errNotJSON
	}
	return i, nil
}

// eachMember calls f for each member of the JSON object v, in document
// order, with the key as written (quoted), the key's text, and the value.
func eachMember(v []byte, f func(rawKey, key, val []byte) error) error {
	i := skipSpace(v, 0)
	if i >= len(v) || v[i] != '{' {
		return errNotJSON
	}
	i = skipSpace(v, i+1)
	if i < len(v) && v[i] == '}' {
		return nil
	}
	for {
		if i >= len(v) || v[i] != '"' {
			return errNotJSON
		}
		end, err := stringEnd(v, i)
		if err != nil {
			return err
		}
		rawKey, key := v[i:end], v[i+1:end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var s string
			if err := json.Unmarshal(rawKey, &s); err != nil {
				return errNotJSON
			}
			key = []byte(s)
		}
		i = skipSpace(v, end)
		if i >= len(v) || v[i] != ':' {
			return errNotJSON
		}
		i = skipSpace(v, i+1)
		end, err = valueEnd(v, i)
		if err != nil {
			return err
		}
		if err := f(rawKey, key, v[i:end]); err != nil {
			return err
		}
		i = skipSpace(v, end)
		if i >= len(v) {
			return errNotJSON
		}
		switch v[i] {
		case '}':
			return nil
		case ',':
			i = skipSpace(v, i+1)
		default:
			return errNotJSON
		}
	}
}

// eachElement calls f for each element of the JSON array v.
func eachElement(v []byte, f func(val []byte) error) error {
	i := skipSpace(v, 0)
	if i >= len(v) || v[i] != '[' {
		return errNotJSON
	}
	i = skipSpace(v, i+1)
	if i < len(v) && v[i] == ']' {
		return nil
	}
	for {
		end, err := valueEnd(v, i)
		if err != nil {
			return err
		}
		if err := f(v[i:end]); err != nil {
			return err
		}
		i = skipSpace(v, end)
		if i >= len(v) {
			return errNotJSON
		}
		switch v[i] {
		case ']':
			return nil
		case ',':
			i = skipSpace(v, i+1)
		default:
			return errNotJSON
		}
	}
}
