package projection

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kind identifies one kind of object deployd understands.
type Kind uint8

// The kinds of the closed registry (what the watcher reads), then the kinds that only
// have a health rule (they are never read from the cluster and Apply rejects
// them).
const (
	KindUnknown Kind = iota
	KindApp
	KindDeployment
	KindStatefulSet
	KindReplicaSet
	KindPod
	KindService
	KindConfigMap
	KindIngress
	KindHPA
	KindPDB
	KindMiddleware
	KindIngressRoute
	KindCDApplication
	KindAppProject

	KindDaemonSet
	KindPVC
	KindJob

	// KindEvent is read live only (the events route): listed per request,
	// never watched, never folded.
	KindEvent

	kindCount
)

// KindInfo describes a kind: its API coordinates and its place in the registry.
type KindInfo struct {
	Kind     Kind
	Group    string // "" for the core group
	Version  string
	Name     string // the Kubernetes kind, e.g. "Deployment"
	Resource string // the plural resource, e.g. "deployments"
	// Registry kinds are read from the cluster; the others only have a
	// health rule.
	Registry bool
	// Optional registry kinds are CRDs that may not be served; they are
	// picked up when their CRD appears.
	Optional bool
	// LiveOnly kinds are listed on demand for one request and never
	// watched or folded (Registry is false for them).
	LiveOnly bool
}

var kindInfos = [kindCount]KindInfo{
	KindApp:           {KindApp, "hanzo.ai", "v1", "App", "apps", true, false, false},
	KindDeployment:    {KindDeployment, "apps", "v1", "Deployment", "deployments", true, false, false},
	KindStatefulSet:   {KindStatefulSet, "apps", "v1", "StatefulSet", "statefulsets", true, false, false},
	KindReplicaSet:    {KindReplicaSet, "apps", "v1", "ReplicaSet", "replicasets", true, false, false},
	KindPod:           {KindPod, "", "v1", "Pod", "pods", true, false, false},
	KindService:       {KindService, "", "v1", "Service", "services", true, false, false},
	KindConfigMap:     {KindConfigMap, "", "v1", "ConfigMap", "configmaps", true, false, false},
	KindIngress:       {KindIngress, "networking.k8s.io", "v1", "Ingress", "ingresses", true, false, false},
	KindHPA:           {KindHPA, "autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", true, false, false},
	KindPDB:           {KindPDB, "policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", true, false, false},
	KindMiddleware:    {KindMiddleware, "hanzo.ai", "v1alpha1", "Middleware", "middlewares", true, true, false},
	KindIngressRoute:  {KindIngressRoute, "hanzo.ai", "v1alpha1", "IngressRoute", "ingressroutes", true, true, false},
	KindCDApplication: {KindCDApplication, "apps.hanzo.ai", "v1alpha1", "Application", "applications", true, true, false},
	KindAppProject:    {KindAppProject, "argoproj.io", "v1alpha1", "AppProject", "appprojects", true, true, false},
	KindDaemonSet:     {KindDaemonSet, "apps", "v1", "DaemonSet", "daemonsets", false, false, false},
	KindPVC:           {KindPVC, "", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", false, false, false},
	KindJob:           {KindJob, "batch", "v1", "Job", "jobs", false, false, false},
	KindEvent:         {KindEvent, "", "v1", "Event", "events", false, false, true},
}

// Info returns the kind's description; the zero KindInfo for KindUnknown or
// an out-of-range value.
func (k Kind) Info() KindInfo {
	if k >= kindCount {
		return KindInfo{}
	}
	return kindInfos[k]
}

// GVR is the group/version/resource the kind is read and written at: the
// one mapping of a kind to its API resource (GVROf finds it from an
// object's apiVersion and kind).
func (k Kind) GVR() schema.GroupVersionResource {
	ki := k.Info()
	return schema.GroupVersionResource{Group: ki.Group, Version: ki.Version, Resource: ki.Resource}
}

// String is the Kubernetes kind name ("Deployment"), or "Unknown".
func (k Kind) String() string {
	if k < kindCount && kindInfos[k].Name != "" {
		return kindInfos[k].Name
	}
	return "Unknown"
}

// InRegistry reports whether objects of this kind are read and folded.
func (k Kind) InRegistry() bool { return k < kindCount && kindInfos[k].Registry }

// Registry returns the registry's kinds in a fixed order.
func Registry() []KindInfo {
	out := make([]KindInfo, 0, kindCount)
	for _, ki := range kindInfos {
		if ki.Registry {
			out = append(out, ki)
		}
	}
	return out
}

// LiveOnly returns the kinds read live per request only (Events), in a
// fixed order.
func LiveOnly() []KindInfo {
	out := make([]KindInfo, 0, 1)
	for _, ki := range kindInfos {
		if ki.LiveOnly {
			out = append(out, ki)
		}
	}
	return out
}

// LookupKind finds a kind by API group and Kubernetes kind name. It knows
// the registry kinds and the health-only kinds; anything else (Secret above
// all) is KindUnknown.
func LookupKind(group, name string) Kind {
	for _, ki := range kindInfos {
		if ki.Name == name && ki.Group == group {
			return ki.Kind
		}
	}
	return KindUnknown
}

// LookupKindByAPIVersion is LookupKind for an apiVersion string such as
// "apps/v1" or "v1". The version must be the one the kind is read at.
func LookupKindByAPIVersion(apiVersion, name string) Kind {
	group, version := "", apiVersion
	if i := strings.LastIndexByte(apiVersion, '/'); i >= 0 {
		group, version = apiVersion[:i], apiVersion[i+1:]
	}
	k := LookupKind(group, name)
	if k == KindUnknown || k.Info().Version != version {
		return KindUnknown
	}
	return k
}

// GVROf is the resource of an object of a registry kind, named by its
// apiVersion and kind; false for any other kind.
func GVROf(apiVersion, kind string) (schema.GroupVersionResource, bool) {
	k := LookupKindByAPIVersion(apiVersion, kind)
	if k == KindUnknown {
		return schema.GroupVersionResource{}, false
	}
	return k.GVR(), true
}
