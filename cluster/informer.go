package cluster

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// newInformer runs lw into a store and hands each object to h as it is
// popped: client-go's plain informer (cache.NewInformerWithOptions), put
// together here because its options take no watch error handler. Without
// one the reflector reports each failed list or watch through klog, once
// per retry, outside deployd's log.
//
// Not a shared informer: deployd has one handler per informer, and a
// shared one would put a processor between the two, with two goroutines
// and a ring of 1,024 slots (16 KiB) for each handler. At 500 clusters of
// 14 kinds that was 7,000 rings (115 MiB, scanned by every collection) and
// 14,000 goroutines doing nothing but hand objects on.
func newInformer(lw cache.ListerWatcher, example runtime.Object, transform cache.TransformFunc, h cache.ResourceEventHandler, onError cache.WatchErrorHandlerWithContext) (cache.Store, cache.Controller) {
	store := cache.NewStore(cache.DeletionHandlingMetaNamespaceKeyFunc)
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
					if old, exists, err := store.Get(d.Object); err == nil && exists {
						if err := store.Update(d.Object); err != nil {
							return err
						}
						h.OnUpdate(old, d.Object)
					} else {
						if err := store.Add(d.Object); err != nil {
							return err
						}
						h.OnAdd(d.Object, initial)
					}
				case cache.Deleted:
					if err := store.Delete(d.Object); err != nil {
						return err
					}
					h.OnDelete(d.Object)
				}
			}
			return nil
		},
	})
}
