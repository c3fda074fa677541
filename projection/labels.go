package projection

import "sort"

// Label is one key/value pair of metadata.labels.
type Label struct {
	Key   string
	Value string
}

// Labels is a set of labels sorted by key: smaller than a map and
// deterministic to encode.
type Labels []Label

// MakeLabels builds sorted Labels from a map.
func MakeLabels(m map[string]string) Labels {
	if len(m) == 0 {
		return nil
	}
	out := make(Labels, 0, len(m))
	for k, v := range m {
		out = append(out, Label{Intern(k), Intern(v)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// EqualMap reports whether the labels are exactly m's.
func (l Labels) EqualMap(m map[string]string) bool {
	if len(l) != len(m) {
		return false
	}
	for _, kv := range l {
		if v, ok := m[kv.Key]; !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// Get returns the value of key and whether it is set.
func (l Labels) Get(key string) (string, bool) {
	i := sort.Search(len(l), func(i int) bool { return l[i].Key >= key })
	if i < len(l) && l[i].Key == key {
		return l[i].Value, true
	}
	return "", false
}

// Value returns the value of key, "" when absent.
func (l Labels) Value(key string) string {
	v, _ := l.Get(key)
	return v
}

// Map returns the labels as a new map (nil when empty).
func (l Labels) Map() map[string]string {
	if len(l) == 0 {
		return nil
	}
	m := make(map[string]string, len(l))
	for _, kv := range l {
		m[kv.Key] = kv.Value
	}
	return m
}

// Has reports whether key is set.
func (l Labels) Has(key string) bool { _, ok := l.Get(key); return ok }

// Selector is a workload's label selector (matchLabels and matchExpressions).
type Selector struct {
	MatchLabels Labels
	Expressions []Requirement
	// Invalid is set when the selector could not be read; it matches nothing.
	Invalid bool
}

// Requirement is one matchExpressions entry.
type Requirement struct {
	Key      string
	Operator string // In, NotIn, Exists, DoesNotExist
	Values   []string
}

// Empty reports whether the selector has no terms. An empty selector matches
// nothing here: a workload without a selector owns no pods by selection.
func (s Selector) Empty() bool { return len(s.MatchLabels) == 0 && len(s.Expressions) == 0 }

// Matches reports whether the labels satisfy every term of the selector.
func (s Selector) Matches(l Labels) bool {
	if s.Invalid || s.Empty() {
		return false
	}
	for _, kv := range s.MatchLabels {
		if v, ok := l.Get(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	for _, r := range s.Expressions {
		v, ok := l.Get(r.Key)
		switch r.Operator {
		case "In":
			if !ok || !contains(r.Values, v) {
				return false
			}
		case "NotIn":
			if ok && contains(r.Values, v) {
				return false
			}
		case "Exists":
			if !ok {
				return false
			}
		case "DoesNotExist":
			if ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
