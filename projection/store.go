package projection

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
)

// Op is what happened to an object.
type Op uint8

// The operations of a Change.
const (
	// Upsert adds an object or replaces the version held.
	Upsert Op = iota + 1
	// Delete removes an object. Only the Object's key (kind, namespace,
	// name) is read.
	Delete
)

func (o Op) String() string {
	switch o {
	case Upsert:
		return "upsert"
	case Delete:
		return "delete"
	}
	return "invalid"
}

// Change is one add, update or delete of one object.
type Change struct {
	Op     Op
	Object *Object
}

// EventType is the Argo CD watch event type of a Delta.
type EventType string

// The event types.
const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
)

// Delta says how one application row changed in one Apply. Each Delta has
// its own revision; revisions increase by one per Delta.
type Delta struct {
	Revision uint64
	// Position is the snapshot's Position after the Apply that made the
	// Delta: every Delta of one Apply shares it.
	Position uint64
	Key      AppKey
	Old      *App // nil for Added
	New      *App // nil for Deleted
	Row      RowKind
	// AppChanged: the Application (list/detail/stream form) changed.
	// TreeChanged: the resource tree changed. A Delta has at least one.
	AppChanged  bool
	TreeChanged bool
}

// Type is the Delta's watch event type: Added without an old version,
// Deleted without a new one, else Modified.
func (d *Delta) Type() EventType {
	switch {
	case d.Old == nil:
		return Added
	case d.New == nil:
		return Deleted
	}
	return Modified
}

// ErrRejected wraps every change Apply refused.
var ErrRejected = errors.New("change rejected")

// Store is the fold. Apply must be called from one goroutine only; Snapshot
// may be called from any goroutine at any time.
type Store struct {
	cfg  Config
	snap atomic.Pointer[Snapshot]
	rev  uint64
	pos  uint64 // the newest resourceVersion folded (Snapshot.Position)
	gen  uint64 // derivation generation, for entry.mark

	objects map[ObjectKey]*entry
	// nsNames holds one copy of each watched namespace's name: keys built
	// from it compare their namespaces by pointer.
	nsNames  map[string]string
	byUID    map[string]*entry
	children map[string][]*entry // owner uid → objects naming it as owner
	names    map[nsName][]*entry // depth-1 kinds by namespace and name
	pods     podIndex

	rows  map[AppKey]*appRow // operator App rows, held or pending
	sites map[AppKey]*App
	cds   map[AppKey]*App
	// sitePos is, per namespace, each published site row's position in its
	// NamespaceRows.Rows (an App row's is in its handle).
	sitePos map[string]map[string]int

	// Per-namespace objects of the site kinds, and the AppProjects (few).
	siteObjs    map[string]map[ObjectKey]struct{}
	projectObjs map[ObjectKey]struct{}

	scratch scratch // reusable buffers of the writer

	// queue are the App rows to derive again in this Apply.
	queue      []*appRow
	dirtySites map[string]struct{} // namespaces
	dirtyCDs   map[AppKey]struct{}
	projects   bool // an AppProject changed
}

type nsName struct{ namespace, name string }

// appRow is the writer's handle on one App row: looked up by key once, then
// reached from the entries of its tree without hashing. It lives while the
// row is published or queued.
type appRow struct {
	key AppKey
	app *App // the published version; nil while none
	// Unless full, patches are the objects that changed without changing
	// shape (see shapeOf): the tree keeps its structure and is patched
	// instead. They start in one, held in the handle: a row rarely has
	// more than one in a batch.
	patches []patch
	one     [1]patch
	// changes is publish's list of its namespace's changed rows.
	changes *[]rowChange
	// pos is the published row's position in its namespace's rows; -1
	// before it is first published.
	pos int32
	// queued: listed in Store.queue. full: derive from scratch.
	queued, full bool
}

// scratch holds buffers the writer reuses across derivations; nothing in
// them is ever published.
type scratch struct {
	byNS map[string]*[]rowChange
	// deltaRows[i] is the handle of the App row of the derived deltas[i]
	// (the App rows' deltas come first).
	deltaRows []*appRow
	depth1    []*entry
	owned     []*entry
	tree      []*NodeInfo
	parents   []int32
	images    []string
	history   []HistoryEntry
}

// entry is the writer's record of one object, stable across its versions.
// Only the writer goroutine reads or writes it.
type entry struct {
	key  ObjectKey
	info *NodeInfo // the current version
	// rows are the App rows whose tree held this object at their last
	// derivation.
	rows rowSet
	// mark is the derivation generation that last placed it in a tree.
	mark uint64
	// shape is the current version's shapeOf.
	shape uint64
}

// NewStore returns an empty store whose snapshot is at cfg.BaseRevision.
func NewStore(cfg Config) *Store {
	s := &Store{
		cfg:         cfg,
		rev:         cfg.BaseRevision,
		objects:     make(map[ObjectKey]*entry),
		nsNames:     make(map[string]string),
		byUID:       make(map[string]*entry),
		children:    make(map[string][]*entry),
		names:       make(map[nsName][]*entry),
		pods:        newPodIndex(),
		rows:        make(map[AppKey]*appRow),
		sites:       make(map[AppKey]*App),
		cds:         make(map[AppKey]*App),
		sitePos:     make(map[string]map[string]int),
		scratch:     scratch{byNS: make(map[string]*[]rowChange)},
		siteObjs:    make(map[string]map[ObjectKey]struct{}),
		projectObjs: make(map[ObjectKey]struct{}),
		dirtySites:  make(map[string]struct{}),
		dirtyCDs:    make(map[AppKey]struct{}),
	}
	s.snap.Store(emptySnapshot(cfg))
	return s
}

// Snapshot returns the current immutable snapshot. Safe for any goroutine.
func (s *Store) Snapshot() *Snapshot { return s.snap.Load() }

// Config returns the store's configuration.
func (s *Store) Config() Config { return s.cfg }

// Apply folds a batch of changes in order, publishes the new snapshot and
// returns the deltas, sorted by revision. Changes of a kind outside the
// registry, or in a namespace outside the namespace map, are refused and
// reported in the error (wrapping ErrRejected); the rest still apply.
func (s *Store) Apply(changes ...Change) ([]Delta, error) {
	var rejected []error
	for i := range changes {
		if err := s.fold(changes[i]); err != nil {
			rejected = append(rejected, err)
		}
	}
	deltas := s.derive()
	for i := range deltas {
		deltas[i].Position = s.pos
	}
	if len(deltas) > 0 || s.projects || s.pos != s.snap.Load().Position {
		s.publish(deltas)
	}
	if len(rejected) > 0 {
		return deltas, fmt.Errorf("%w: %w", ErrRejected, errors.Join(rejected...))
	}
	return deltas, nil
}

// fold records one change in the object store and marks what it affects.
func (s *Store) fold(c Change) error {
	o := c.Object
	if o == nil {
		return errors.New("change without object")
	}
	if !o.Kind.InRegistry() {
		return fmt.Errorf("%s %s/%s: %w", o.Kind, o.Namespace, o.Name, ErrUnknownKind)
	}
	if rv := ParseResourceVersion(o.ResourceVersion); rv > s.pos {
		s.pos = rv
	}
	key := ObjectKey{o.Kind, o.Namespace, o.Name}
	e := s.objects[key]
	if e != nil {
		key = e.key // its namespace is the store's copy
	} else {
		ns, ok := s.nsNames[o.Namespace]
		if !ok {
			if !s.cfg.Namespaces.Watched(o.Namespace) {
				return fmt.Errorf("%s %s/%s: namespace %q is not in the namespace map", o.Kind, o.Namespace, o.Name, o.Namespace)
			}
			ns = strings.Clone(o.Namespace)
			s.nsNames[ns] = ns
		}
		key.Namespace = ns
	}
	switch c.Op {
	case Upsert:
		if o.Name == "" {
			return errors.New("object without name")
		}
		shape := shapeOf(o)
		if e != nil && shape != 0 && shape == e.shape {
			// Only the object's own state changed (same shapeOf): its trees
			// keep their structure, and no index moves.
			was := e.info
			e.info = newNodeInfo(o)
			e.info.e = e
			for r := range e.rows.all() {
				s.markPatched(r, e, was)
			}
			return nil
		}
		if e == nil {
			e = &entry{key: key}
			s.objects[key] = e
			s.appNameChanged(key)
		} else {
			s.markAffected(e)
			s.unlink(e, o)
		}
		old := e.info
		e.info = newNodeInfo(o)
		e.info.e, e.shape = e, shape
		s.link(e, old)
		s.markAffected(e)
	case Delete:
		if e == nil {
			return nil
		}
		s.markAffected(e)
		delete(s.objects, key)
		s.unlink(e, nil)
		s.appNameChanged(key)
	default:
		return fmt.Errorf("change with invalid op %d", c.Op)
	}
	return nil
}

// markAffected marks every row whose derivation may read this object: the
// rows it belonged to at their last derivation, the rows it would belong to
// now, and, through its uid, the rows of the objects it owns.
func (s *Store) markAffected(e *entry) {
	s.markRows(e)
	o, key := e.info.Obj, e.key
	switch key.Kind {
	case KindMiddleware, KindIngressRoute:
		s.dirtySites[key.Namespace] = struct{}{}
		if ir, ok := o.Spec.(*IngressRouteSpec); ok {
			for _, r := range ir.Routes {
				for _, mw := range r.Middlewares {
					if mw.Namespace != "" {
						s.dirtySites[mw.Namespace] = struct{}{}
					}
				}
			}
		}
		return
	case KindCDApplication:
		s.dirtyCDs[AppKey{key.Namespace, key.Name}] = struct{}{}
		return
	case KindAppProject:
		s.projects = true
		return
	}
	s.walkUp(e, 0)
	if o.UID != "" {
		for _, ce := range s.children[o.UID] {
			s.markRows(ce)
		}
	}
}

// walkUp marks the rows an object would belong to given the objects held
// now: an App is its own row; a depth-1 kind belongs to the App that owns it
// or shares its name; a ReplicaSet to its Deployment's rows; a Pod to its
// controller's rows, or to the rows of the Deployments selecting it.
func (s *Store) walkUp(e *entry, depth int) {
	if depth > 3 {
		return
	}
	key, o := e.key, e.info.Obj
	switch key.Kind {
	case KindApp:
		s.markFull(s.rowAt(AppKey{key.Namespace, key.Name}))
	case KindDeployment, KindStatefulSet, KindService, KindIngress, KindHPA, KindPDB, KindConfigMap:
		if _, ok := s.objects[ObjectKey{KindApp, key.Namespace, key.Name}]; ok {
			s.markFull(s.rowAt(AppKey{key.Namespace, key.Name}))
		}
		for _, ow := range o.Owners {
			if oe := s.owner(o, ow); oe != nil && oe.key.Kind == KindApp {
				s.markFull(s.rowAt(AppKey{oe.key.Namespace, oe.key.Name}))
			}
		}
	case KindReplicaSet, KindPod:
		owned := false
		for _, ow := range o.Owners {
			if oe := s.owner(o, ow); oe != nil {
				owned = true
				s.markRows(oe)
				s.walkUp(oe, depth+1)
			}
		}
		if key.Kind == KindPod && !owned {
			for _, de := range s.pods.selectingDeployments(s, key.Namespace, o.Labels) {
				s.markRows(de)
				s.walkUp(de, depth+1)
			}
		}
	}
}

// owner returns the held object an owner reference names, in the object's
// namespace.
func (s *Store) owner(o *Object, ow OwnerRef) *entry {
	if ow.UID == "" {
		return nil
	}
	if oe := s.byUID[ow.UID]; oe != nil && oe.key.Namespace == o.Namespace {
		return oe
	}
	return nil
}

func (s *Store) markRows(e *entry) {
	for r := range e.rows.all() {
		s.markFull(r)
	}
}

// rowAt returns the handle of the App row at k, making one if needed.
func (s *Store) rowAt(k AppKey) *appRow {
	r := s.rows[k]
	if r == nil {
		r = &appRow{key: k, pos: -1, changes: s.changesIn(k.Namespace)}
		r.patches = r.one[:0]
		s.rows[k] = r
	}
	return r
}

// dropPatches empties the row's patches, back into the handle's own room.
func (r *appRow) dropPatches() {
	clear(r.one[:])
	r.patches = r.one[:0]
}

// changesIn is publish's list of the changed rows of namespace ns.
func (s *Store) changesIn(ns string) *[]rowChange {
	l := s.scratch.byNS[ns]
	if l == nil {
		l = new([]rowChange)
		s.scratch.byNS[ns] = l
	}
	return l
}

// app returns the published App row at k, or nil.
func (s *Store) app(k AppKey) *App {
	if r := s.rows[k]; r != nil {
		return r.app
	}
	return nil
}

// markFull queues the row for a derivation from scratch.
func (s *Store) markFull(r *appRow) {
	s.enqueue(r)
	r.full = true
	r.dropPatches()
}

// markPatched queues the row for a patch of e, whose tree version is was
// (unless it is already to be derived from scratch).
func (s *Store) markPatched(r *appRow, e *entry, was *NodeInfo) {
	s.enqueue(r)
	if !r.full {
		r.patches = addPatch(r.patches, e, was)
	}
}

func (s *Store) enqueue(r *appRow) {
	if !r.queued {
		r.queued = true
		s.queue = append(s.queue, r)
	}
}

// link adds the entry's current version to the indexes; old is the version
// unlink removed just before (nil for a new object).
func (s *Store) link(e *entry, old *NodeInfo) {
	o, key := e.info.Obj, e.key
	var prev *Object
	if old != nil {
		prev = old.Obj
	}
	sameUID := prev != nil && prev.UID == o.UID
	if !sameUID && o.UID != "" {
		s.byUID[o.UID] = e
	}
	if prev == nil || !sameOwners(prev.Owners, o.Owners) {
		for _, ow := range o.Owners {
			if ow.UID != "" {
				s.children[ow.UID] = append(s.children[ow.UID], e)
			}
		}
	}
	if prev == nil {
		switch {
		case isDepth1(key.Kind):
			nn := nsName{key.Namespace, key.Name}
			s.names[nn] = append(s.names[nn], e)
		case key.Kind == KindMiddleware || key.Kind == KindIngressRoute:
			set := s.siteObjs[key.Namespace]
			if set == nil {
				set = make(map[ObjectKey]struct{})
				s.siteObjs[key.Namespace] = set
			}
			set[key] = struct{}{}
		case key.Kind == KindAppProject:
			s.projectObjs[key] = struct{}{}
		}
	}
	switch key.Kind {
	case KindDeployment:
		s.pods.addDeployment(e)
	case KindPod:
		s.pods.addPod(s, e)
	}
	// An owner arriving adopts the pods that were waiting for it.
	if !sameUID && o.UID != "" && (key.Kind == KindReplicaSet || key.Kind == KindStatefulSet) {
		for _, ce := range s.children[o.UID] {
			if ce.key.Kind == KindPod {
				s.pods.refresh(s, ce)
			}
		}
	}
}

// unlink removes the entry's current version from the indexes. next is the
// version about to replace it (nil when the object is deleted).
func (s *Store) unlink(e *entry, next *Object) {
	o, key := e.info.Obj, e.key
	sameUID := next != nil && next.UID == o.UID
	if !sameUID && o.UID != "" && s.byUID[o.UID] == e {
		delete(s.byUID, o.UID)
	}
	if next == nil || !sameOwners(o.Owners, next.Owners) {
		for _, ow := range o.Owners {
			if ow.UID == "" {
				continue
			}
			if list := removeEntry(s.children[ow.UID], e); len(list) == 0 {
				delete(s.children, ow.UID)
			} else {
				s.children[ow.UID] = list
			}
		}
	}
	if next == nil {
		switch {
		case isDepth1(key.Kind):
			nn := nsName{key.Namespace, key.Name}
			if list := removeEntry(s.names[nn], e); len(list) == 0 {
				delete(s.names, nn)
			} else {
				s.names[nn] = list
			}
		case key.Kind == KindMiddleware || key.Kind == KindIngressRoute:
			if set := s.siteObjs[key.Namespace]; set != nil {
				delete(set, key)
				if len(set) == 0 {
					delete(s.siteObjs, key.Namespace)
				}
			}
		case key.Kind == KindAppProject:
			delete(s.projectObjs, key)
		}
	}
	switch key.Kind {
	case KindDeployment:
		s.pods.removeDeployment(e)
	case KindPod:
		s.pods.removeOrphan(key)
	}
	// An owner leaving orphans its pods.
	if !sameUID && o.UID != "" && (key.Kind == KindReplicaSet || key.Kind == KindStatefulSet) {
		for _, ce := range s.children[o.UID] {
			if ce.key.Kind == KindPod {
				s.pods.refresh(s, ce)
			}
		}
	}
}

// patch is one object of a patched row: its entry, and the version the
// row's tree holds.
type patch struct {
	e   *entry
	was *NodeInfo
}

// addPatch records a change of e; a second change of it in the same batch
// keeps the version the tree holds.
func addPatch(list []patch, e *entry, was *NodeInfo) []patch {
	for _, p := range list {
		if p.e == e {
			return list
		}
	}
	return append(list, patch{e, was})
}

func sameOwners(a, b []OwnerRef) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].UID != b[i].UID {
			return false
		}
	}
	return true
}

func removeEntry(list []*entry, e *entry) []*entry {
	for i, x := range list {
		if x == e {
			list[i] = list[len(list)-1]
			list[len(list)-1] = nil
			return list[:len(list)-1]
		}
	}
	return list
}

// hasPresentOwner reports whether one of the object's owners is held, in its
// namespace.
func (s *Store) hasPresentOwner(o *Object) bool {
	for _, ow := range o.Owners {
		if s.owner(o, ow) != nil {
			return true
		}
	}
	return false
}

// derive recomputes every dirty row and returns the deltas: App rows in the
// order they were marked, then sites and CD Applications in key order.
func (s *Store) derive() []Delta {
	var deltas []Delta
	if len(s.queue) > 0 {
		// In the order the rows were first marked: deterministic for a
		// given sequence of changes, and no sort.
		queue := s.queue
		deltas = make([]Delta, 0, len(queue))
		handles := s.scratch.deltaRows[:0]
		for i, r := range queue {
			n := len(deltas)
			old := r.app
			if !r.full && old != nil {
				nu, appChanged := s.patchApp(old, r.patches)
				r.app = nu
				deltas = s.appendKnownDelta(deltas, RowApp, r.key, old, nu, appChanged, true)
			} else {
				r.app = s.deriveApp(r)
				deltas = s.appendDelta(deltas, RowApp, r.key, old, r.app)
			}
			if len(deltas) > n {
				handles = append(handles, r)
			}
			r.queued, r.full = false, false
			r.dropPatches()
			if r.app == nil {
				// No entry records a row without a tree: the handle goes.
				delete(s.rows, r.key)
			}
			queue[i] = nil
		}
		s.queue = queue[:0]
		s.scratch.deltaRows = handles
	}
	if len(s.dirtySites) > 0 {
		nss := make([]string, 0, len(s.dirtySites))
		for ns := range s.dirtySites {
			nss = append(nss, ns)
		}
		clear(s.dirtySites)
		slices.Sort(nss)
		for _, ns := range nss {
			deltas = s.deriveSites(deltas, ns)
		}
	}
	if len(s.dirtyCDs) > 0 {
		keys := sortedKeys(s.dirtyCDs)
		clear(s.dirtyCDs)
		for _, k := range keys {
			old := s.cds[k]
			nu := s.deriveCD(k)
			if nu == nil {
				delete(s.cds, k)
			} else {
				s.cds[k] = nu
			}
			deltas = s.appendDelta(deltas, RowCD, k, old, nu)
		}
	}
	return deltas
}

// appendDelta compares a row's old and new version and, when they differ,
// assigns the next revision and appends a Delta. An unchanged Application
// keeps its revision and encoded form; so does an unchanged tree.
func (s *Store) appendDelta(deltas []Delta, row RowKind, k AppKey, old, nu *App) []Delta {
	if old == nil || nu == nil {
		return s.appendKnownDelta(deltas, row, k, old, nu, true, true)
	}
	return s.appendKnownDelta(deltas, row, k, old, nu, !sameApplication(old, nu), !sameTree(old, nu))
}

// appendKnownDelta is appendDelta when the caller knows what changed. A
// new version of the row's own object changes its Application (its
// metadata.resourceVersion) whatever else did.
func (s *Store) appendKnownDelta(deltas []Delta, row RowKind, k AppKey, old, nu *App, appChanged, treeChanged bool) []Delta {
	if nu != nil {
		if old != nil && len(old.Tree) > 0 && len(nu.Tree) > 0 && old.Tree[0] == nu.Tree[0] {
			nu.ResourceVersion = old.ResourceVersion // the same root node
		} else {
			nu.stampVersion()
		}
		if old != nil && old.ResourceVersion != nu.ResourceVersion {
			appChanged = true
		}
		if old != nil {
			// An App row's losses are seen as it is derived (deriveApp);
			// the other rows are rebuilt whole, and few.
			nu.Removed = max(nu.Removed, old.Removed)
			if row != RowApp && treeChanged && lostNode(old.Tree, nu.Tree) {
				nu.Removed = s.pos
			}
		}
	}
	switch {
	case old == nil && nu == nil:
		return deltas
	case old == nil:
		s.rev++
		nu.Revision, nu.TreeRevision = s.rev, s.rev
		return append(deltas, Delta{Revision: s.rev, Key: k, Row: row, New: nu, AppChanged: true, TreeChanged: true})
	case nu == nil:
		s.rev++
		return append(deltas, Delta{Revision: s.rev, Key: k, Row: row, Old: old, AppChanged: true, TreeChanged: true})
	}
	if !appChanged && !treeChanged {
		// Keep the published version: nothing a reader sees changed.
		s.keep(row, k, old)
		return deltas
	}
	s.rev++
	nu.Revision, nu.TreeRevision = old.Revision, old.TreeRevision
	if appChanged {
		nu.Revision = s.rev
	} else {
		nu.argo.share(&old.argo)
	}
	if treeChanged {
		nu.TreeRevision = s.rev
	} else {
		nu.tree.share(&old.tree)
	}
	return append(deltas, Delta{Revision: s.rev, Key: k, Row: row, Old: old, New: nu, AppChanged: appChanged, TreeChanged: treeChanged})
}

func (s *Store) keep(row RowKind, k AppKey, old *App) {
	switch row {
	case RowApp:
		s.rows[k].app = old
	case RowSite:
		s.sites[k] = old
	case RowCD:
		s.cds[k] = old
	}
}

func sortedKeys(dirty map[AppKey]struct{}) []AppKey {
	keys := make([]AppKey, 0, len(dirty))
	for k := range dirty {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	return keys
}
