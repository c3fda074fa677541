package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hanzoai/deploy/projection"
)

// ErrHistoryGone: the API server no longer holds the resourceVersion asked
// for (etcd compacted past it).
var ErrHistoryGone = errors.New("the API server no longer holds that resourceVersion (compacted)")

// historyKinds are the kinds whose objects are application rows of their
// own: what a stream resuming from a past position must know of that past.
var historyKinds = []projection.Kind{projection.KindApp, projection.KindCDApplication, projection.KindMiddleware}

// historyPage bounds one page of a list at a past resourceVersion.
const historyPage = 500

// RootsAt lists, as the cluster held them at exactly resourceVersion pos,
// the objects of the kinds that are rows of their own (Apps, CD
// Applications, Middlewares) in the watched namespaces, decoded as the fold
// decodes them. The API server reads them from etcd; once etcd has been
// compacted past pos the error wraps ErrHistoryGone. Kinds the cluster does
// not serve are left out.
func (w *Watcher) RootsAt(ctx context.Context, pos uint64) ([]*projection.Object, error) {
	served, err := w.servedKinds()
	if err != nil {
		return nil, err
	}
	rv := strconv.FormatUint(pos, 10)
	var out []*projection.Object
	for _, k := range historyKinds {
		if !served[k] {
			continue
		}
		res := w.dyn.Resource(k.GVR()).Namespace(metav1.NamespaceAll)
		opts := metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact, Limit: historyPage}
		for {
			list, err := res.List(ctx, opts)
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return nil, fmt.Errorf("%s at resourceVersion %d: %w", k, pos, ErrHistoryGone)
			}
			if err != nil {
				return nil, fmt.Errorf("list %s at resourceVersion %d: %w", k, pos, err)
			}
			for i := range list.Items {
				item := &list.Items[i]
				if !w.opts.Namespaces.Watched(item.GetNamespace()) {
					continue
				}
				o, err := projection.DecodeKind(k, item.Object)
				if err != nil {
					continue // the fold refuses it too
				}
				o.Namespace = projection.QualifyNamespace(o.Namespace, w.opts.Cluster)
				out = append(out, o)
			}
			if opts.Continue = list.GetContinue(); opts.Continue == "" {
				break
			}
			// A continued list keeps the first page's resourceVersion.
			opts.ResourceVersion, opts.ResourceVersionMatch = "", ""
		}
	}
	return out, nil
}

// ListedAt is the newest resourceVersion the watched kinds' lists and
// watches have reached (their reflectors' last sync): once the fold holds
// what they delivered, it holds the whole cluster as of at least this
// position. 0 before the first list.
func (w *Watcher) ListedAt() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var newest uint64
	for _, ki := range w.informers {
		if rv := projection.ParseResourceVersion(ki.ctrl.LastSyncResourceVersion()); rv > newest {
			newest = rv
		}
	}
	return newest
}
