package projection

import (
	"errors"
	"fmt"
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
	// Unreachable says since when a cluster's API server has not answered
	// (Change.Since, Unix seconds; 0: it answers again): the Apps of
	// Change.Cluster carry a condition naming it. It has no Object.
	Unreachable
)

func (o Op) String() string {
	switch o {
	case Upsert:
		return "upsert"
	case Delete:
		return "delete"
	case Unreachable:
		return "unreachable"
	}
	return "invalid"
}

// Change is one add, update or delete of one object.
type Change struct {
	Op     Op
	Object *Object
	// Cluster and Since are an Unreachable change's.
	Cluster int
	Since   int64
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
	Position Position
	Key      AppKey
	Old      *App // nil for Added
	New      *App // nil for Deleted
	Row      RowKind
	// AppChanged: the Application (list/detail/stream form) changed.
	// TreeChanged: the resource tree changed. A Delta has at least one.
	AppChanged  bool
	TreeChanged bool
	// Cluster is the index of the row's cluster (0: the first): its part
	// of Position is the row's own position.
	Cluster uint16
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
	pos  Position // the newest resourceVersion folded of each cluster (Snapshot.Position)
	// book keeps the compact ids of the positions (nil with one cluster).
	book *Book
	// rvs are pos's parts as the fold moves them; pos is made of them
	// once per Apply.
	rvs []uint64
	gen uint64 // derivation generation, for entry.mark

	objects map[ObjectKey]*entry
	// nsNames holds one copy of each watched namespace's name: keys built
	// from it compare their namespaces by pointer.
	nsNames map[string]string
	// byUID finds an object by its UID within its namespace: an owner is
	// always in its child's namespace, and two clusters may hold the
	// same UIDs (one restored from the other's etcd), which their
	// qualified namespaces tell apart.
	byUID    map[uidKey]*entry
	children map[uidKey][]*entry // (namespace, owner uid) → objects of that namespace naming it as owner
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
	// unreachable is, by cluster index, since when (Unix seconds) its API
	// server has not answered; absent while it answers.
	unreachable map[int]int64
	projects    bool // an AppProject changed
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
	// touched are the namespaces of byNS whose lists the batch filled.
	touched []string
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
	cfg.names = nil
	cfg.names = cfg.ClusterNames()
	s := &Store{
		cfg:         cfg,
		rev:         cfg.BaseRevision,
		pos:         ZeroPosition(cfg.ClusterNames()),
		rvs:         make([]uint64, 1+len(cfg.Clusters)),
		objects:     make(map[ObjectKey]*entry),
		nsNames:     make(map[string]string),
		byUID:       make(map[uidKey]*entry),
		children:    make(map[uidKey][]*entry),
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
	if len(cfg.names) > 1 {
		s.book = NewBook(cfg.names, bookSize)
	}
	s.snap.Store(emptySnapshot(cfg))
	return s
}

// bookSize is how many positions of compact ids a Store's Book keeps: a
// fold makes at most one per Apply, and the resume ring covers minutes.
const bookSize = 8192

// Positions is the Book of the compact ids of the store's positions, nil
// with one cluster.
func (s *Store) Positions() *Book { return s.book }

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
	for i, rv := range s.rvs {
		if rv != s.pos.Of(i) || (s.cfg.names != nil && s.unreachable[i] != s.pos.Down(i)) {
			s.pos = positionOf(s.cfg.names, s.rvs, s.unreachable)
			s.pos.v.book = s.book
			break
		}
	}
	deltas := s.derive()
	for i := range deltas {
		deltas[i].Position = s.pos
		if len(s.cfg.Clusters) > 0 {
			deltas[i].Cluster = uint16(s.clusterIndex(deltas[i].Key.Namespace))
		}
	}
	if len(deltas) > 0 || s.projects || !s.pos.Equal(s.snap.Load().Position) {
		s.publish(deltas)
	}
	if len(rejected) > 0 {
		return deltas, fmt.Errorf("%w: %w", ErrRejected, errors.Join(rejected...))
	}
	return deltas, nil
}

// fold records one change in the object store and marks what it affects.
func (s *Store) fold(c Change) error {
	if c.Op == Unreachable {
		return s.foldUnreachable(c.Cluster, c.Since)
	}
	o := c.Object
	if o == nil {
		return errors.New("change without object")
	}
	if !o.Kind.InRegistry() {
		return fmt.Errorf("%s %s/%s: %w", o.Kind, o.Namespace, o.Name, ErrUnknownKind)
	}
	if c, _, ok := s.cfg.ClusterOf(o.Namespace); ok {
		if rv := ParseResourceVersion(o.ResourceVersion); rv > s.rvs[c] {
			s.rvs[c] = rv
		}
	}
	key := ObjectKey{o.Kind, o.Namespace, o.Name}
	e := s.objects[key]
	if e != nil {
		key = e.key // its namespace is the store's copy
	} else {
		ns, ok := s.nsNames[o.Namespace]
		if !ok {
			if _, _, ok := s.cfg.Env(o.Namespace); !ok {
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

// app returns the published App row at k, or nil.
func (s *Store) app(k AppKey) *App {
	if r := s.rows[k]; r != nil {
		return r.app
	}
	return nil
}
