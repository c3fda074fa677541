package handlers

import (
	"encoding/json"

	"gomodules.xyz/jsonpatch/v2"

	"github.com/hanzoai/deploy/projection"
)

type resourceDiff struct {
	Modified        bool                  `json:"modified"`
	DesiredManifest map[string]any        `json:"desiredManifest"`
	Patch           []jsonpatch.Operation `json:"patch"`
}

// desiredVsLive compares the live object with the desired state it carries:
// the last-applied configuration when it parses ("last-applied"), else
// nothing ("none").
func desiredVsLive(live map[string]any) (string, resourceDiff, error) {
	md, _ := live["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	raw, _ := ann[projection.AnnotationLastApplied].(string)
	var desired map[string]any
	if raw == "" || json.Unmarshal([]byte(raw), &desired) != nil || desired == nil {
		return "none", resourceDiff{Patch: []jsonpatch.Operation{}}, nil
	}
	d, err := diffAgainst(live, desired)
	return "last-applied", d, err
}

// diffAgainst compares live with desired. Both sides are normalized —
// status, managedFields, resourceVersion, uid, generation,
// creationTimestamp, ownerReferences and the last-applied annotation
// dropped — and the live side is cut to the fields the desired side
// declares (what the server defaults, nobody declared). The patch is the
// RFC 6902 JSON Patch that turns live into desired.
func diffAgainst(live, desired map[string]any) (resourceDiff, error) {
	d := resourceDiff{Patch: []jsonpatch.Operation{}}
	desired = normalize(desired)
	actual := declaredPart(normalize(live), desired)
	a, err := json.Marshal(actual)
	if err != nil {
		return d, err
	}
	b, err := json.Marshal(desired)
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
	d.Modified = len(ops) > 0
	d.DesiredManifest = desired
	return d, nil
}

// normalize copies an object without what the cluster manages.
func normalize(obj map[string]any) map[string]any {
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
		switch k {
		case "managedFields", "resourceVersion", "uid", "generation", "creationTimestamp", "ownerReferences", "selfLink":
			continue
		case "annotations":
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

// declaredPart cuts live down to the shape of desired: keys of maps that
// desired has, and lists element by element when both have the same length
// (otherwise the whole live list).
func declaredPart(live, desired any) any {
	switch d := desired.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return live
		}
		out := make(map[string]any, len(d))
		for k, dv := range d {
			if lv, ok := l[k]; ok {
				out[k] = declaredPart(lv, dv)
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
			out[i] = declaredPart(l[i], d[i])
		}
		return out
	}
	return live
}
