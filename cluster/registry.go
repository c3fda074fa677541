package cluster

import "github.com/hanzoai/deploy/projection"

// kindForResource finds the registry kind of a resource name in a group.
func kindForResource(group, resource string) (projection.Kind, bool) {
	for _, ki := range projection.Registry() {
		if ki.Group == group && ki.Resource == resource {
			return ki.Kind, true
		}
	}
	return projection.KindUnknown, false
}
