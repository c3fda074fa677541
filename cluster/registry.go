package cluster

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/hanzoai/deploy/projection"
)

// GVR is the group/version/resource a registry kind is read at.
func GVR(k projection.Kind) schema.GroupVersionResource {
	ki := k.Info()
	return schema.GroupVersionResource{Group: ki.Group, Version: ki.Version, Resource: ki.Resource}
}

// kindForResource finds the registry kind of a resource name in a group.
func kindForResource(group, resource string) (projection.Kind, bool) {
	for _, ki := range projection.Registry() {
		if ki.Group == group && ki.Resource == resource {
			return ki.Kind, true
		}
	}
	return projection.KindUnknown, false
}
