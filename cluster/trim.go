package cluster

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hanzoai/deploy/projection"
)

// keptAnnotations are the only annotations the fold reads.
var keptAnnotations = []string{
	projection.AnnotationRevision,
	projection.AnnotationSyncRequestedAt,
	projection.AnnotationSyncRequestedBy,
}

// trimmer returns the informer transform of one kind: it rebuilds each
// object with only the fields the fold reads. Objects of a namespace outside
// the map become a stub (identity and version only), so the caches of
// cluster-wide informers hold next to nothing for namespaces deployd ignores.
func trimmer(kind projection.Kind, watched func(namespace string) bool) func(any) (any, error) {
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil // a tombstone or anything else passes through
		}
		return &unstructured.Unstructured{Object: Trim(kind, u.Object, watched(u.GetNamespace()))}, nil
	}
}

// Trim rebuilds an object with only what the fold reads for its kind; with
// full false, only its identity. managedFields, the last-applied
// configuration and every other annotation are never kept.
func Trim(kind projection.Kind, obj map[string]any, full bool) map[string]any {
	md, _ := obj["metadata"].(map[string]any)
	out := map[string]any{
		"apiVersion": obj["apiVersion"],
		"kind":       obj["kind"],
	}
	meta := pick(md, "name", "namespace", "uid", "resourceVersion")
	out["metadata"] = meta
	if !full {
		return out
	}
	copyKeys(meta, md, "generation", "creationTimestamp", "deletionTimestamp", "labels")
	if ann, ok := md["annotations"].(map[string]any); ok {
		if kept := pick(ann, keptAnnotations...); len(kept) > 0 {
			meta["annotations"] = kept
		}
	}
	if owners, ok := md["ownerReferences"].([]any); ok {
		trimmed := make([]any, 0, len(owners))
		for _, x := range owners {
			if r, ok := x.(map[string]any); ok {
				trimmed = append(trimmed, pick(r, "apiVersion", "kind", "name", "uid", "controller"))
			}
		}
		meta["ownerReferences"] = trimmed
	}
	spec, _ := obj["spec"].(map[string]any)
	status, _ := obj["status"].(map[string]any)
	set := func(key string, v map[string]any) {
		if len(v) > 0 {
			out[key] = v
		}
	}
	switch kind {
	case projection.KindApp:
		set("spec", pick(spec, "image", "replicas", "role", "ingress"))
		set("status", status)
	case projection.KindDeployment, projection.KindStatefulSet, projection.KindReplicaSet, projection.KindDaemonSet:
		s := pick(spec, "replicas", "paused", "selector", "updateStrategy")
		if tmpl, ok := spec["template"].(map[string]any); ok {
			t := map[string]any{}
			if tmd, ok := tmpl["metadata"].(map[string]any); ok {
				if ann, ok := tmd["annotations"].(map[string]any); ok {
					if kept := pick(ann, projection.AnnotationRestartedAt); len(kept) > 0 {
						t["metadata"] = map[string]any{"annotations": kept}
					}
				}
			}
			if ps, ok := tmpl["spec"].(map[string]any); ok {
				t["spec"] = map[string]any{"containers": containers(ps["containers"])}
			}
			s["template"] = t
		}
		set("spec", s)
		set("status", status)
	case projection.KindPod:
		s := pick(spec, "restartPolicy", "nodeName")
		s["containers"] = containers(spec["containers"])
		set("spec", s)
		st := pick(status, "phase", "message", "reason", "startTime", "podIP", "conditions")
		for _, f := range []string{"containerStatuses", "initContainerStatuses"} {
			if list, ok := status[f].([]any); ok {
				out := make([]any, 0, len(list))
				for _, x := range list {
					if c, ok := x.(map[string]any); ok {
						out = append(out, pick(c, "name", "image", "ready", "restartCount", "state", "lastState"))
					}
				}
				st[f] = out
			}
		}
		set("status", st)
	case projection.KindService:
		set("spec", pick(spec, "type"))
		set("status", pick(status, "loadBalancer"))
	case projection.KindIngress:
		s := pick(spec, "tls")
		if rules, ok := spec["rules"].([]any); ok {
			hosts := make([]any, 0, len(rules))
			for _, x := range rules {
				if r, ok := x.(map[string]any); ok {
					hosts = append(hosts, pick(r, "host"))
				}
			}
			s["rules"] = hosts
		}
		set("spec", s)
		set("status", pick(status, "loadBalancer"))
	case projection.KindHPA:
		set("status", pick(status, "conditions"))
	case projection.KindMiddleware:
		set("spec", pick(spec, "staticFiles"))
	case projection.KindIngressRoute:
		set("spec", pick(spec, "routes"))
	case projection.KindCDApplication:
		set("spec", pick(spec, "project", "source", "destination"))
		set("status", pick(status, "sync", "health"))
	case projection.KindAppProject:
		set("spec", pick(spec, "description"))
	}
	return out
}

// containers keeps each container's name and image.
func containers(v any) []any {
	list, _ := v.([]any)
	out := make([]any, 0, len(list))
	for _, x := range list {
		if c, ok := x.(map[string]any); ok {
			out = append(out, pick(c, "name", "image"))
		}
	}
	return out
}

// pick returns a new map with the given keys of m that are set.
func pick(m map[string]any, keys ...string) map[string]any {
	out := make(map[string]any, len(keys))
	copyKeys(out, m, keys...)
	return out
}

func copyKeys(dst, src map[string]any, keys ...string) {
	for _, k := range keys {
		if v, ok := src[k]; ok && v != nil {
			dst[k] = v
		}
	}
}
