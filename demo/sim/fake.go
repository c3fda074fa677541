package sim

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	discoveryfake "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/hanzoai/deploy/fleet"
	"github.com/hanzoai/deploy/projection"
)

// historySize is how many watch events the fake cluster keeps to resume a
// watch from an older resourceVersion (the API server's watch cache).
const historySize = 8192

// watchBuffer is how many events a watch holds for a slow reader before
// the fake cluster ends it (the reader then resumes from where it was).
const watchBuffer = 1024

// FakeCluster is an in-process stand-in for a Kubernetes API server serving
// every registry kind (and namespaces), built on client-go's fake dynamic
// and discovery clients. Beyond client-go's fakes it does what deployd and
// the simulator rely on an API server for:
//   - resourceVersions: every write gets the next number of one global
//     sequence, lists carry the current one, and a watch from a
//     resourceVersion replays the events after it (from a bounded history;
//     an older one is 410 Expired, as a compacted server answers);
//   - metadata: a create gets a uid (unless the object has one), a creation
//     time and generation 1; an update or patch keeps uid and creation time,
//     bumps generation when spec changed, and is refused with a conflict
//     when it names a resourceVersion that is not the current one;
//   - watches never panic or block a writer: a watch whose reader fell
//     watchBuffer events behind is ended, and the reader resumes.
//
// Merge and JSON patches work as on a server (client-go's object tracker
// applies them). The client-go fakes record every request; the simulator
// clears that record each step (ClearActions), so a long demo does not grow.
type FakeCluster struct {
	dyn     *dynamicfake.FakeDynamicClient
	disco   *fakeDiscovery
	tracker *serverTracker
}

// NewFakeCluster returns an empty fake cluster whose creation times come
// from now (time.Now when nil).
func NewFakeCluster(now func() time.Time) *FakeCluster {
	if now == nil {
		now = time.Now
	}
	scheme := runtime.NewScheme()
	listKinds := map[schema.GroupVersionResource]string{}
	kinds := map[schema.GroupVersionResource]schema.GroupVersionKind{}
	register := func(gvr schema.GroupVersionResource, kind string) {
		gvk := gvr.GroupVersion().WithKind(kind)
		scheme.AddKnownTypeWithName(gvk, &unstructured.Unstructured{})
		scheme.AddKnownTypeWithName(gvr.GroupVersion().WithKind(kind+"List"), &unstructured.UnstructuredList{})
		listKinds[gvr] = kind + "List"
		kinds[gvr] = gvk
	}
	register(fleet.NamespaceGVR, "Namespace")
	for _, ki := range append(projection.Registry(), projection.LiveOnly()...) {
		register(schema.GroupVersionResource{Group: ki.Group, Version: ki.Version, Resource: ki.Resource}, ki.Name)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, listKinds)
	t := &serverTracker{
		inner:    clienttesting.NewObjectTracker(scheme, serializer.NewCodecFactory(scheme).UniversalDecoder()),
		now:      now,
		kinds:    kinds,
		watchers: map[*fakeWatch]struct{}{},
	}
	dyn.ReactionChain = nil
	dyn.WatchReactionChain = nil
	dyn.AddReactor("*", "*", clienttesting.ObjectReaction(t))
	dyn.AddWatchReactor("*", func(action clienttesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := action.(clienttesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := t.Watch(action.GetResource(), action.GetNamespace(), opts)
		return true, w, err
	})

	disco := &fakeDiscovery{FakeDiscovery: &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}}}
	c := &FakeCluster{dyn: dyn, disco: disco, tracker: t}
	for _, ki := range projection.Registry() {
		c.SetServed(ki.Kind, true)
	}
	return c
}

// Dynamic is the cluster's dynamic client.
func (c *FakeCluster) Dynamic() dynamic.Interface { return c.dyn }

// Discovery is the cluster's discovery client: it lists every registry
// kind that is served.
func (c *FakeCluster) Discovery() discovery.DiscoveryInterface { return c.disco }

// ResourceVersion is the resourceVersion of the last write.
func (c *FakeCluster) ResourceVersion() uint64 {
	c.tracker.mu.Lock()
	defer c.tracker.mu.Unlock()
	return c.tracker.rv
}

// ClearActions forgets the requests client-go's fake recorded so far.
func (c *FakeCluster) ClearActions() {
	c.dyn.ClearActions()
	c.disco.ClearActions()
}

// SetServed makes discovery list kind's resource, or not (an optional kind
// whose CRD is not installed). Objects of the kind stay in the store.
func (c *FakeCluster) SetServed(kind projection.Kind, served bool) {
	c.disco.mu.Lock()
	defer c.disco.mu.Unlock()
	if c.disco.served == nil {
		c.disco.served = map[projection.Kind]bool{}
	}
	c.disco.served[kind] = served
	byGV := map[string]*metav1.APIResourceList{}
	var lists []*metav1.APIResourceList
	for _, ki := range projection.Registry() {
		if !c.disco.served[ki.Kind] {
			continue
		}
		gv := schema.GroupVersion{Group: ki.Group, Version: ki.Version}.String()
		l := byGV[gv]
		if l == nil {
			l = &metav1.APIResourceList{GroupVersion: gv}
			byGV[gv] = l
			lists = append(lists, l)
		}
		l.APIResources = append(l.APIResources,
			metav1.APIResource{Name: ki.Resource, Kind: ki.Name, Namespaced: true,
				Verbs: metav1.Verbs{"get", "list", "watch", "create", "update", "patch", "delete"}},
			metav1.APIResource{Name: ki.Resource + "/status", Kind: ki.Name, Namespaced: true, Verbs: metav1.Verbs{"get", "update", "patch"}})
	}
	c.disco.Resources = lists
}

// fakeDiscovery is client-go's fake discovery that forgets its requests
// (they would otherwise pile up over a long demo) and whose resource lists
// can change while informers read them.
type fakeDiscovery struct {
	*discoveryfake.FakeDiscovery
	mu     sync.Mutex
	served map[projection.Kind]bool
}

func (d *fakeDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	defer d.ClearActions()
	return d.FakeDiscovery.ServerResourcesForGroupVersion(gv)
}
