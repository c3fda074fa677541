package cluster

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hanzoai/deploy/projection"
)

// FieldManager names deployd's writes in managedFields.
const FieldManager = "deployd"

// MergePatch applies a JSON merge patch to an App or a Deployment — the
// only objects deployd writes (sync and rollback patch the App; a rolling
// restart patches the app's Deployment) — and returns the object as stored.
func (w *Watcher) MergePatch(ctx context.Context, kind projection.Kind, namespace, name string, patch []byte) (map[string]any, error) {
	if kind != projection.KindApp && kind != projection.KindDeployment {
		return nil, fmt.Errorf("deployd does not write %s objects", kind)
	}
	if w.dyn == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotConfigured, w.reason)
	}
	u, err := w.dyn.Resource(kind.GVR()).Namespace(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, err
	}
	return u.Object, nil
}
