package cluster

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/hanzoai/deploy/projection"
)

// maxEvents bounds one namespace's Events read for one request.
const maxEvents = 1000

// Events lists the v1 Events of one namespace, live: Events are never
// watched or folded (projection.KindEvent is read per request only). With a
// uid, only the Events whose involvedObject has that uid are listed (a field
// selector the API server applies). At most 1000 are returned; the caller
// filters them further to the objects it may show.
func (w *Watcher) Events(ctx context.Context, namespace, uid string) ([]map[string]any, error) {
	if w.dyn == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotConfigured, w.reason)
	}
	opts := metav1.ListOptions{Limit: maxEvents}
	if uid != "" {
		opts.FieldSelector = fields.OneTermEqualSelector("involvedObject.uid", uid).String()
	}
	list, err := w.dyn.Resource(projection.KindEvent.GVR()).Namespace(namespace).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, 0, len(list.Items))
	for _, it := range list.Items {
		out = append(out, it.Object)
	}
	return out, nil
}
