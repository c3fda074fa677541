package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/hanzoai/deploy/projection"
)

// DefaultWorkers is how many requests Load keeps in flight.
const DefaultWorkers = 32

// NamespaceGVR is the resource of namespaces.
var NamespaceGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// FastConfig returns a copy of cfg whose client-side rate limit allows a
// bulk load (QPS 2000, burst 4000); the default of 5 requests per second
// would make loading a large fleet take hours.
func FastConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 2000, 4000
	return c
}

// Load creates objects the way the operator and the controllers would have
// (see Loader.Load). It is Loader.Load with a fresh Loader.
func Load(ctx context.Context, dyn dynamic.Interface, objs []*unstructured.Unstructured) error {
	return NewLoader(dyn).Load(ctx, objs)
}

// Loader creates rendered objects in a cluster and remembers the uid the
// API server gave each one, so owner references written later (by the
// simulator) point at the live owners. Safe for concurrent use.
type Loader struct {
	// Workers bounds the requests in flight (DefaultWorkers when ≤ 0).
	Workers int
	// Replace makes an object that exists already take the rendered form
	// (an update, then its status), instead of being kept as it is.
	Replace bool

	dyn  dynamic.Interface
	mu   sync.RWMutex
	uids map[types.UID]types.UID // rendered uid → live uid
}

// NewLoader returns a loader writing through dyn. The throughput of a load
// is bounded by dyn's client-side rate limit: build it from FastConfig.
func NewLoader(dyn dynamic.Interface) *Loader {
	return &Loader{dyn: dyn, uids: map[types.UID]types.UID{}}
}

// LiveUID returns the uid the API server gave the object rendered with uid,
// or uid itself when the loader created no such object.
func (l *Loader) LiveUID(uid types.UID) types.UID {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if live, ok := l.uids[uid]; ok {
		return live
	}
	return uid
}

// Remember records that the object rendered with uid lives with uid live.
func (l *Loader) Remember(uid, live types.UID) {
	if uid == "" || live == "" {
		return
	}
	l.mu.Lock()
	l.uids[uid] = live
	l.mu.Unlock()
}

// Load creates objs: their namespaces first, then each level of ownership
// after the level that owns it (Apps, then their Deployments, Services and
// the like, then ReplicaSets, then Pods), each level with up to Workers
// requests in flight. Owner references are remapped to the uids the server
// gave the owners; a status is written through the status subresource when
// the create did not keep it (a kind with a status subresource). An object
// that already exists is left as it is (or replaced, with Replace) and its
// uid remembered. The first failure stops the load and is returned, naming
// the object.
func (l *Loader) Load(ctx context.Context, objs []*unstructured.Unstructured) error {
	_, err := l.load(ctx, objs, false)
	return err
}

// LoadObjects is Load answering the objects as the API server stored them,
// in the order of objs.
func (l *Loader) LoadObjects(ctx context.Context, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	return l.load(ctx, objs, true)
}

func (l *Loader) load(ctx context.Context, objs []*unstructured.Unstructured, keep bool) ([]*unstructured.Unstructured, error) {
	if err := l.namespaces(ctx, objs); err != nil {
		return nil, err
	}
	var stored map[*unstructured.Unstructured]*unstructured.Unstructured
	if keep {
		stored = make(map[*unstructured.Unstructured]*unstructured.Unstructured, len(objs))
	}
	for _, level := range ownershipLevels(objs) {
		if err := l.parallel(ctx, level, stored); err != nil {
			return nil, err
		}
	}
	if !keep {
		return nil, nil
	}
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = stored[o]
	}
	return out, nil
}

func (l *Loader) namespaces(ctx context.Context, objs []*unstructured.Unstructured) error {
	seen := map[string]bool{}
	var nss []*unstructured.Unstructured
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" && !seen[ns] {
			seen[ns] = true
			nss = append(nss, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}})
		}
	}
	for _, ns := range nss {
		_, err := l.dyn.Resource(NamespaceGVR).Create(ctx, ns, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", ns.GetName(), err)
		}
	}
	return nil
}

// ownershipLevels splits objs by depth of ownership within objs: level 0
// owns nothing in objs, level n is owned by an object of level n-1.
func ownershipLevels(objs []*unstructured.Unstructured) [][]*unstructured.Unstructured {
	byUID := make(map[types.UID]*unstructured.Unstructured, len(objs))
	for _, o := range objs {
		if uid := o.GetUID(); uid != "" {
			byUID[uid] = o
		}
	}
	depth := make(map[*unstructured.Unstructured]int, len(objs))
	var depthOf func(o *unstructured.Unstructured, guard int) int
	depthOf = func(o *unstructured.Unstructured, guard int) int {
		if d, ok := depth[o]; ok {
			return d
		}
		d := 0
		if guard < 16 { // ownership cycles cannot exist; bound the walk anyway
			for _, ref := range o.GetOwnerReferences() {
				if owner, ok := byUID[ref.UID]; ok && owner != o {
					d = max(d, depthOf(owner, guard+1)+1)
				}
			}
		}
		depth[o] = d
		return d
	}
	var levels [][]*unstructured.Unstructured
	for _, o := range objs {
		d := depthOf(o, 0)
		for len(levels) <= d {
			levels = append(levels, nil)
		}
		levels[d] = append(levels[d], o)
	}
	return levels
}

// parallel creates objs with up to Workers requests in flight; what the
// server stored goes into stored when it is not nil.
func (l *Loader) parallel(ctx context.Context, objs []*unstructured.Unstructured, stored map[*unstructured.Unstructured]*unstructured.Unstructured) error {
	var storedMu sync.Mutex
	workers := l.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	workers = min(workers, len(objs))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan *unstructured.Unstructured)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range next {
				created, err := l.Create(ctx, o)
				if err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					continue
				}
				if stored != nil {
					storedMu.Lock()
					stored[o] = created
					storedMu.Unlock()
				}
			}
		}()
	}
feed:
	for _, o := range objs {
		select {
		case next <- o:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = context.Cause(ctx)
	}
	return firstErr
}

// Create creates one rendered object (its owners must exist) with owner
// references remapped to live uids, writes its status through the status
// subresource when the create dropped it, and remembers its uid. An object
// that exists already is returned as it is, or replaced with Replace.
func (l *Loader) Create(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	gvr, err := resourceOf(obj)
	if err != nil {
		return nil, err
	}
	ri := l.dyn.Resource(gvr).Namespace(obj.GetNamespace())
	u := obj.DeepCopy()
	u.SetResourceVersion("")
	refs := u.GetOwnerReferences()
	for i := range refs {
		refs[i].UID = l.LiveUID(refs[i].UID)
	}
	if len(refs) > 0 {
		u.SetOwnerReferences(refs)
	}
	created, err := ri.Create(ctx, u, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) && l.Replace {
		created, err = Replace(ctx, ri, u)
	} else if apierrors.IsAlreadyExists(err) {
		created, err = ri.Get(ctx, u.GetName(), metav1.GetOptions{})
		if err == nil {
			l.Remember(obj.GetUID(), created.GetUID())
			return created, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("create %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	l.Remember(obj.GetUID(), created.GetUID())
	status, _ := obj.Object["status"].(map[string]any)
	if len(status) == 0 || reflect.DeepEqual(created.Object["status"], status) {
		return created, nil
	}
	patched, err := ri.Patch(ctx, u.GetName(), types.MergePatchType, statusPatch(status), metav1.PatchOptions{}, "status")
	switch {
	case apierrors.IsNotFound(err) && !errors.Is(ctx.Err(), context.Canceled):
		return created, nil // no status subresource: the create kept what it could
	case err != nil:
		return nil, fmt.Errorf("write status of %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	return patched, nil
}

// Replace updates the live object to u: at the live resourceVersion and
// uid, again on a conflict.
func Replace(ctx context.Context, ri dynamic.ResourceInterface, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var stored *unstructured.Unstructured
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		next := u.DeepCopy()
		next.SetResourceVersion(live.GetResourceVersion())
		next.SetUID(live.GetUID())
		stored, err = ri.Update(ctx, next, metav1.UpdateOptions{})
		return err
	})
	return stored, err
}

// statusPatch is a merge patch setting status.
func statusPatch(status map[string]any) []byte {
	b, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		panic("fleet: encode status: " + err.Error()) // maps of JSON values always encode
	}
	return b
}

// resourceOf is the resource of a rendered object's kind.
func resourceOf(u *unstructured.Unstructured) (schema.GroupVersionResource, error) {
	gvr, ok := projection.GVROf(u.GetAPIVersion(), u.GetKind())
	if !ok {
		return gvr, fmt.Errorf("%s %s is not a registry kind", u.GetAPIVersion(), u.GetKind())
	}
	return gvr, nil
}
