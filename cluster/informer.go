package cluster

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// newInformer runs lw into a store and hands each object to h as it is
// popped: client-go's plain informer (cache.NewInformerWithOptions), put
// together here because its options take no watch error handler and no
// store of the caller's. Without the handler the reflector reports each
// failed list or watch through klog, once per retry, outside deployd's log.
//
// Not a shared informer: deployd has one handler per informer, and a
// shared one would put a processor between the two, with two goroutines
// and a ring of 1,024 slots (16 KiB) for each handler. At 500 clusters of
// 14 kinds that was 7,000 rings (115 MiB, scanned by every collection) and
// 14,000 goroutines doing nothing but hand objects on.
func newInformer(lw cache.ListerWatcher, example runtime.Object, transform cache.TransformFunc, h cache.ResourceEventHandler, onError cache.WatchErrorHandlerWithContext) (*objectStore, cache.Controller) {
	store := &objectStore{m: map[objectKey]*stored{}}
	// In order, as client-go's own informers queue since InOrderInformers:
	// without atomic events it emits Sync, Replaced, Added, Updated and
	// Deleted only.
	fifo := cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{KnownObjects: store, Transformer: transform})
	return store, cache.New(&cache.Config{
		Queue:                        fifo,
		ListerWatcher:                lw,
		ObjectType:                   example,
		WatchErrorHandlerWithContext: onError,
		Process: func(obj any, initial bool) error {
			deltas, ok := obj.(cache.Deltas)
			if !ok {
				return fmt.Errorf("informer: %T popped, not Deltas", obj)
			}
			for _, d := range deltas {
				switch d.Type {
				case cache.Sync, cache.Replaced, cache.Added, cache.Updated:
					st, ok := d.Object.(*stored)
					if !ok {
						return fmt.Errorf("informer: %T queued, not a transformed object", d.Object)
					}
					if old := store.put(st); old != nil {
						h.OnUpdate(old, st)
					} else {
						h.OnAdd(st, initial)
					}
				case cache.Deleted:
					if err := store.remove(d.Object); err != nil {
						return err
					}
					h.OnDelete(d.Object)
				}
			}
			return nil
		},
	})
}

// objectStore is an informer's cache: its objects by namespace and name.
// Its key is the two strings the object's summary already holds, so it
// keeps no "namespace/name" string per object, as cache.NewStore does
// (about 800,000 strings at 500 clusters, each marked by every
// collection). The queue asks for those strings only when a list replaces
// what the watch had, to find what went missing (cache.KeyListerGetter).
type objectStore struct {
	mu sync.RWMutex
	m  map[objectKey]*stored
}

type objectKey struct{ namespace, name string }

func (k objectKey) String() string {
	if k.namespace == "" {
		return k.name
	}
	return k.namespace + "/" + k.name
}

func keyOf(st *stored) objectKey { return objectKey{st.obj.Namespace, st.obj.Name} }

// put stores st and returns the object it replaced, nil when it is new.
func (s *objectStore) put(st *stored) *stored {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := keyOf(st)
	old := s.m[k]
	s.m[k] = st
	return old
}

// remove deletes the object of a deletion: the object itself, or the
// tombstone of one whose deletion the watch missed.
func (s *objectStore) remove(obj any) error {
	var k objectKey
	switch t := obj.(type) {
	case *stored:
		k = keyOf(t)
	case cache.DeletedFinalStateUnknown:
		ns, name, err := cache.SplitMetaNamespaceKey(t.Key)
		if err != nil {
			return err
		}
		k = objectKey{ns, name}
	default:
		return fmt.Errorf("informer: %T deleted, not a transformed object", obj)
	}
	s.mu.Lock()
	delete(s.m, k)
	s.mu.Unlock()
	return nil
}

// Len is how many objects the store holds.
func (s *objectStore) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.m)
}

// List returns the objects held, in no order.
func (s *objectStore) List() []*stored {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*stored, 0, len(s.m))
	for _, st := range s.m {
		out = append(out, st)
	}
	return out
}

// ListKeys is the key of every object held, as cache.MetaNamespaceKeyFunc
// writes it.
func (s *objectStore) ListKeys() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.m))
	for k := range s.m {
		out = append(out, k.String())
	}
	return out
}

// GetByKey returns the object of a key ListKeys gave.
func (s *objectStore) GetByKey(key string) (any, bool, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if st, ok := s.m[objectKey{ns, name}]; ok {
		return st, true, nil
	}
	return nil, false, nil
}
