package sim

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"

	"github.com/hanzoai/deploy/fleet"
)

// serverTracker is a client-go ObjectTracker with the API server's
// resourceVersion, metadata and watch semantics (see FakeCluster).
type serverTracker struct {
	inner clienttesting.ObjectTracker
	now   func() time.Time
	kinds map[schema.GroupVersionResource]schema.GroupVersionKind

	mu       sync.Mutex
	rv       uint64
	history  []event // a ring of at most historySize events, oldest at head
	head     int
	evicted  uint64 // the resourceVersion of the newest event dropped from history
	watchers map[*fakeWatch]struct{}
}

var _ clienttesting.ObjectTracker = (*serverTracker)(nil)

type event struct {
	gvr schema.GroupVersionResource
	ns  string
	typ watch.EventType
	obj *unstructured.Unstructured
	rv  uint64
}

func (t *serverTracker) next() string {
	t.rv++
	return strconv.FormatUint(t.rv, 10)
}

func asUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("fake cluster: %T is not unstructured", obj)
	}
	return u.DeepCopy(), nil
}

func (t *serverTracker) Add(obj runtime.Object) error {
	u, err := asUnstructured(obj)
	if err != nil {
		return err
	}
	for gvr, gvk := range t.kinds {
		if gvk == u.GroupVersionKind() {
			return t.Create(gvr, u, u.GetNamespace())
		}
	}
	return fmt.Errorf("fake cluster: kind %s is not served", u.GroupVersionKind())
}

func (t *serverTracker) Get(gvr schema.GroupVersionResource, ns, name string, opts ...metav1.GetOptions) (runtime.Object, error) {
	return t.inner.Get(gvr, ns, name, opts...)
}

func (t *serverTracker) List(gvr schema.GroupVersionResource, gvk schema.GroupVersionKind, ns string, opts ...metav1.ListOptions) (runtime.Object, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	list, err := t.inner.List(gvr, gvk, ns, opts...)
	if err != nil {
		return nil, err
	}
	if lm, err := meta.ListAccessor(list); err == nil {
		lm.SetResourceVersion(strconv.FormatUint(t.rv, 10))
	}
	return list, nil
}

func (t *serverTracker) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.CreateOptions) error {
	u, err := asUnstructured(obj)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.create(gvr, u, ns, opts...)
}

// create stores a new object with the metadata a server gives it. Called
// with t.mu held.
func (t *serverTracker) create(gvr schema.GroupVersionResource, u *unstructured.Unstructured, ns string, opts ...metav1.CreateOptions) error {
	if u.GetNamespace() == "" && gvr != fleet.NamespaceGVR {
		u.SetNamespace(ns)
	}
	if u.GetName() == "" && u.GetGenerateName() != "" {
		u.SetName(u.GetGenerateName() + strconv.FormatUint(t.rv+1, 36))
	}
	if u.GetUID() == "" {
		u.SetUID(types.UID(fleet.UID(u.GetNamespace(), u.GetKind(), u.GetName()+"@"+strconv.FormatUint(t.rv+1, 10))))
	}
	if ct := u.GetCreationTimestamp(); ct.IsZero() {
		u.SetCreationTimestamp(metav1.NewTime(t.now().UTC().Truncate(time.Second)))
	}
	if u.GetGeneration() == 0 {
		u.SetGeneration(1)
	}
	u.SetResourceVersion(t.next())
	if err := t.inner.Create(gvr, u, ns, opts...); err != nil {
		return err
	}
	t.emit(gvr, u.GetNamespace(), watch.Added, u)
	return nil
}

// prepareUpdate gives an updated object the server-kept metadata of the
// stored one and the next resourceVersion.
func (t *serverTracker) prepareUpdate(gvr schema.GroupVersionResource, u *unstructured.Unstructured, ns string) error {
	old, err := t.inner.Get(gvr, ns, u.GetName())
	if err != nil {
		return err
	}
	ou := old.(*unstructured.Unstructured)
	if rv := u.GetResourceVersion(); rv != "" && rv != ou.GetResourceVersion() {
		return apierrors.NewConflict(gvr.GroupResource(), u.GetName(),
			fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	u.SetUID(ou.GetUID())
	u.SetCreationTimestamp(ou.GetCreationTimestamp())
	u.SetDeletionTimestamp(ou.GetDeletionTimestamp())
	gen := ou.GetGeneration()
	if !equality.Semantic.DeepEqual(u.Object["spec"], ou.Object["spec"]) {
		gen++
	}
	u.SetGeneration(gen)
	u.SetResourceVersion(t.next())
	return nil
}

func (t *serverTracker) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.UpdateOptions) error {
	u, err := asUnstructured(obj)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.prepareUpdate(gvr, u, ns); err != nil {
		return err
	}
	if err := t.inner.Update(gvr, u, ns, opts...); err != nil {
		return err
	}
	t.emit(gvr, u.GetNamespace(), watch.Modified, u)
	return nil
}

func (t *serverTracker) Patch(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	u, err := asUnstructured(obj)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.prepareUpdate(gvr, u, ns); err != nil {
		return err
	}
	if err := t.inner.Patch(gvr, u, ns, opts...); err != nil {
		return err
	}
	// The reactor answers the patch with the object it handed over: give it
	// the stored metadata (it is the reactor's own copy, not the caller's).
	if orig, ok := obj.(*unstructured.Unstructured); ok {
		orig.Object = u.DeepCopy().Object
	}
	t.emit(gvr, u.GetNamespace(), watch.Modified, u)
	return nil
}

// Apply is server-side apply as far as the demo's engine needs it: an
// object that does not exist is created; otherwise the applied
// configuration is merged into the stored object (maps merged key by key,
// lists and values replaced) and its status kept. Unlike a server, it
// does not track field owners, so a field an applier stops declaring stays.
func (t *serverTracker) Apply(gvr schema.GroupVersionResource, applyConfiguration runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	u, err := asUnstructured(applyConfiguration)
	if err != nil {
		return err
	}
	// client-go's fake decodes the configuration's numbers as float64; a
	// server keeps whole numbers whole.
	b, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	u = &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old, err := t.inner.Get(gvr, ns, u.GetName())
	if apierrors.IsNotFound(err) {
		return t.create(gvr, u, ns)
	}
	if err != nil {
		return err
	}
	merged := old.(*unstructured.Unstructured).DeepCopy()
	status, hasStatus := merged.Object["status"]
	mergeInto(merged.Object, u.Object)
	if hasStatus {
		merged.Object["status"] = status
	} else {
		delete(merged.Object, "status")
	}
	merged.SetResourceVersion("")
	if err := t.prepareUpdate(gvr, merged, ns); err != nil {
		return err
	}
	if err := t.inner.Update(gvr, merged, ns); err != nil {
		return err
	}
	t.emit(gvr, merged.GetNamespace(), watch.Modified, merged)
	return nil
}

// mergeInto merges src into dst: maps key by key, anything else replaced.
func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		sm, ok := v.(map[string]any)
		dm, ok2 := dst[k].(map[string]any)
		if ok && ok2 {
			mergeInto(dm, sm)
			continue
		}
		dst[k] = runtime.DeepCopyJSONValue(v)
	}
}

func (t *serverTracker) Delete(gvr schema.GroupVersionResource, ns, name string, opts ...metav1.DeleteOptions) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	old, err := t.inner.Get(gvr, ns, name)
	if err != nil {
		return err
	}
	if err := t.inner.Delete(gvr, ns, name, opts...); err != nil {
		return err
	}
	u := old.(*unstructured.Unstructured)
	u.SetResourceVersion(t.next())
	t.emit(gvr, ns, watch.Deleted, u)
	return nil
}

// emit records an event and hands it to every watch of its resource and
// namespace. Called with t.mu held.
func (t *serverTracker) emit(gvr schema.GroupVersionResource, ns string, typ watch.EventType, u *unstructured.Unstructured) {
	ev := event{gvr: gvr, ns: ns, typ: typ, obj: u.DeepCopy(), rv: t.rv}
	if len(t.history) < historySize {
		t.history = append(t.history, ev)
	} else { // a ring: head is the oldest
		t.evicted = t.history[t.head].rv
		t.history[t.head] = ev
		t.head = (t.head + 1) % historySize
	}
	for w := range t.watchers {
		if w.matches(ev) && !w.send(ev) {
			t.stop(w) // too far behind: end the watch; its reader resumes
		}
	}
}

// Watch starts a watch of gvr in ns ("" for every namespace). Without a
// resourceVersion (or "0") it first sends every object as ADDED; from a
// resourceVersion it replays the events after it, or answers 410 Expired
// when the history no longer reaches back that far.
func (t *serverTracker) Watch(gvr schema.GroupVersionResource, ns string, opts ...metav1.ListOptions) (watch.Interface, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var replay []event
	rv := ""
	if len(opts) > 0 {
		rv = opts[0].ResourceVersion
	}
	if rv == "" || rv == "0" {
		gvk, ok := t.kinds[gvr]
		if !ok {
			return nil, apierrors.NewNotFound(gvr.GroupResource(), "")
		}
		list, err := t.inner.List(gvr, gvk, ns)
		if err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			if u, ok := item.(*unstructured.Unstructured); ok {
				replay = append(replay, event{gvr: gvr, ns: u.GetNamespace(), typ: watch.Added, obj: u})
			}
		}
	} else {
		from, err := strconv.ParseUint(rv, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q", rv))
		}
		if from < t.evicted {
			return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, t.evicted+1))
		}
		for i := range t.history {
			ev := t.history[(t.head+i)%len(t.history)]
			if ev.rv > from && ev.gvr == gvr && (ns == "" || ev.ns == ns) {
				replay = append(replay, ev)
			}
		}
	}
	w := &fakeWatch{t: t, gvr: gvr, ns: ns, ch: make(chan watch.Event, watchBuffer+len(replay))}
	for _, ev := range replay {
		w.send(ev)
	}
	t.watchers[w] = struct{}{}
	return w, nil
}

// stop ends a watch. Called with t.mu held.
func (t *serverTracker) stop(w *fakeWatch) {
	if _, ok := t.watchers[w]; ok {
		delete(t.watchers, w)
		close(w.ch)
	}
}

// fakeWatch is one watch of the fake cluster. Its channel is written and
// closed only with the tracker's lock held.
type fakeWatch struct {
	t   *serverTracker
	gvr schema.GroupVersionResource
	ns  string
	ch  chan watch.Event
}

func (w *fakeWatch) matches(ev event) bool {
	return ev.gvr == w.gvr && (w.ns == "" || w.ns == ev.ns)
}

// send hands over a copy of ev without blocking; false when the buffer is
// full.
func (w *fakeWatch) send(ev event) bool {
	select {
	case w.ch <- watch.Event{Type: ev.typ, Object: ev.obj.DeepCopy()}:
		return true
	default:
		return false
	}
}

func (w *fakeWatch) ResultChan() <-chan watch.Event { return w.ch }

func (w *fakeWatch) Stop() {
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	w.t.stop(w)
}
