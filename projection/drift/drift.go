// Package drift is desired-vs-live: whether a live object differs from the
// state declared for it, and how. It is the one meaning of "drifted" in
// deployd: the engine heals exactly what the diff routes show as modified,
// and the reverse.
//
// The desired state of an object comes from the engine's rendering of the
// repository when the engine manages the object (SourceGit), else from its
// kubectl last-applied configuration (SourceLastApplied), else there is
// none (SourceNone): see Desired.
//
// Comparison: both sides are normalized (Normalize drops what the cluster
// manages), and only the fields the desired side declares count — a field
// the server defaulted was declared by nobody (Declared). Maps compare key
// by key, lists element by element and by length, numbers by value, and a
// field declared null is satisfied by its absence. The patch is the RFC
// 6902 JSON Patch that turns the declared part of live into desired.
package drift

import (
	"encoding/json"

	"gomodules.xyz/jsonpatch/v2"

	"github.com/hanzoai/deploy/projection"
)

// Where a desired state comes from.
const (
	SourceGit         = "git"
	SourceLastApplied = "last-applied"
	SourceNone        = "none"
)

// Diff is the difference between a live object and its desired state.
type Diff struct {
	Modified bool `json:"modified"`
	// DesiredManifest is the desired state, normalized.
	DesiredManifest map[string]any `json:"desiredManifest"`
	// Patch turns the declared part of live into desired (empty when not
	// modified).
	Patch []jsonpatch.Operation `json:"patch"`
}

// managedMetadata are the metadata fields the cluster manages.
var managedMetadata = map[string]bool{
	"managedFields": true, "resourceVersion": true, "uid": true, "generation": true,
	"creationTimestamp": true, "deletionTimestamp": true, "ownerReferences": true, "selfLink": true,
}

// Normalize copies an object without what the cluster manages: its status,
// the metadata the server keeps (resourceVersion, uid, generation,
// managedFields, creation and deletion times, ownerReferences, selfLink)
// and the last-applied annotation. The input is not changed.
func Normalize(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "status" {
			out[k] = v
		}
	}
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		return out
	}
	m := make(map[string]any, len(md))
	for k, v := range md {
		if managedMetadata[k] {
			continue
		}
		if k == "annotations" {
			ann, _ := v.(map[string]any)
			kept := make(map[string]any, len(ann))
			for ak, av := range ann {
				if ak != projection.AnnotationLastApplied {
					kept[ak] = av
				}
			}
			if len(kept) > 0 {
				m[k] = kept
			}
			continue
		}
		m[k] = v
	}
	out["metadata"] = m
	return out
}

// Declared cuts live down to the shape of desired: the keys of maps that
// desired has, and lists element by element when both have the same length
// (otherwise the whole live list).
func Declared(live, desired any) any {
	switch d := desired.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return live
		}
		out := make(map[string]any, len(d))
		for k, dv := range d {
			if lv, ok := l[k]; ok {
				out[k] = Declared(lv, dv)
			}
		}
		return out
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(d) {
			return live
		}
		out := make([]any, len(l))
		for i := range l {
			out[i] = Declared(l[i], d[i])
		}
		return out
	}
	return live
}

// Drifted reports whether live differs from desired in a field desired
// declares, both normalized. It is Compare's Modified, without the patch.
func Drifted(live, desired map[string]any) bool {
	return !covers(Normalize(live), Normalize(desired))
}

// Compare compares live with desired and answers the difference; a nil
// desired (none is known) is no difference, with no desired manifest.
func Compare(live, desired map[string]any) (Diff, error) {
	if desired == nil {
		return Diff{Patch: []jsonpatch.Operation{}}, nil
	}
	want := Normalize(desired)
	have := Normalize(live)
	d := Diff{Patch: []jsonpatch.Operation{}, DesiredManifest: want}
	if covers(have, want) {
		return d, nil
	}
	d.Modified = true
	a, err := json.Marshal(Declared(have, want))
	if err != nil {
		return d, err
	}
	b, err := json.Marshal(dropNulls(want))
	if err != nil {
		return d, err
	}
	ops, err := jsonpatch.CreatePatch(a, b)
	if err != nil {
		return d, err
	}
	if ops != nil {
		d.Patch = ops
	}
	return d, nil
}

// covers reports whether have holds every field of want with the same
// value: maps key by key (a key wanted null may be absent), lists element
// by element with the same length, numbers by value.
func covers(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			hv, present := h[k]
			if !present {
				if wv == nil {
					continue
				}
				return false
			}
			if !covers(hv, wv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !covers(h[i], w[i]) {
				return false
			}
		}
		return true
	case int64, float64, int, int32:
		wf, ok1 := number(want)
		hf, ok2 := number(have)
		return ok1 && ok2 && wf == hf
	default:
		return want == have
	}
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	}
	return 0, false
}

// dropNulls copies v without the map keys whose value is null (a field
// declared null asks for its absence, which covers already checked).
func dropNulls(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			if x != nil {
				out[k] = dropNulls(x)
			}
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = dropNulls(x)
		}
		return out
	}
	return v
}

// LastApplied is the desired state an object carries in its kubectl
// last-applied annotation, when that parses.
func LastApplied(live map[string]any) (map[string]any, bool) {
	md, _ := live["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	raw, _ := ann[projection.AnnotationLastApplied].(string)
	var desired map[string]any
	if raw == "" || json.Unmarshal([]byte(raw), &desired) != nil || desired == nil {
		return nil, false
	}
	return desired, true
}

// Rendered looks up the engine's rendering of an object: its desired state
// and whether the engine declares it.
type Rendered func(kind projection.Kind, namespace, name string) (map[string]any, bool)

// Desired is the desired state of a live object of kind and where it comes
// from: the engine's rendering when rendered (nil when the engine is off)
// declares the object, else its last-applied configuration, else none.
func Desired(kind projection.Kind, live map[string]any, rendered Rendered) (map[string]any, string) {
	md, _ := live["metadata"].(map[string]any)
	if rendered != nil {
		ns, _ := md["namespace"].(string)
		name, _ := md["name"].(string)
		if d, ok := rendered(kind, ns, name); ok && d != nil {
			return d, SourceGit
		}
	}
	if d, ok := LastApplied(live); ok {
		return d, SourceLastApplied
	}
	return nil, SourceNone
}
