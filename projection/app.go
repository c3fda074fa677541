package projection

import (
	"hash/crc64"
	"hash/maphash"
	"slices"
	"strings"
	"sync/atomic"
)

// RowKind says where an application row comes from.
type RowKind uint8

// The row kinds.
const (
	// RowApp is an operator hanzo.ai/v1 App and its rendered children.
	RowApp RowKind = iota
	// RowSite is a static site: a Middleware serving static files joined to
	// the IngressRoute that routes to it.
	RowSite
	// RowCD is a CD Application (apps.hanzo.ai), shown to SuperAdmins only.
	RowCD
)

func (k RowKind) String() string {
	switch k {
	case RowApp:
		return "app"
	case RowSite:
		return "site"
	case RowCD:
		return "cd"
	}
	return "unknown"
}

// AppKey identifies an application row.
type AppKey struct {
	Namespace string
	Name      string
}

func (k AppKey) String() string { return k.Namespace + "/" + k.Name }

func (k AppKey) less(o AppKey) bool {
	if k.Namespace != o.Namespace {
		return k.Namespace < o.Namespace
	}
	return k.Name < o.Name
}

// App is one application row of a snapshot: immutable once published.
// What the row's root object says on its own is in AppMeta, what it reads
// off its workloads in AppRollout (each shared by the versions of a row
// that do not change it); the rest is read off the tree.
type App struct {
	*AppMeta
	*AppRollout

	Health Health

	// Tree is the resource tree, root first. Shared read-only.
	Tree []*NodeInfo
	// parents[i] is the position in Tree of node i's parent, -1 for the
	// root. Shared by the versions of a row whose tree kept its shape.
	parents []int32

	// Revision is the projection revision at which this row's Application
	// last changed; TreeRevision, the one at which its tree last changed.
	// Both are this process's own count (Snapshot.Revision).
	Revision     uint64
	TreeRevision uint64
	// ResourceVersion is the resourceVersion of the row's own object (the
	// App, the site's Middleware, the CD Application): its
	// metadata.resourceVersion, as Argo CD's is its Application's, the same
	// on every replica. Set when a version is published.
	ResourceVersion uint64
	// Removed is the position at which an object last left the row's
	// tree (0: none since this process started): a change no object left
	// in the tree carries.
	Removed uint64

	argo encoded // the encoded Application
	tree encoded // the encoded ApplicationTree
}

// AppRollout is what a row reads off its workloads and its spec's status.
type AppRollout struct {
	Running   string // the version the workload's pod template runs
	Sync      SyncCode
	Endpoints []string
	Images    []string // every image of the tree, sorted, unique
	History   []HistoryEntry
	Operation *SyncOp
}

func sameRollout(a, b *AppRollout) bool {
	return a == b || a.Running == b.Running && a.Sync == b.Sync && slices.Equal(a.Endpoints, b.Endpoints) &&
		slices.Equal(a.Images, b.Images) && slices.Equal(a.History, b.History) && sameOperation(a.Operation, b.Operation)
}

func sameOperation(a, b *SyncOp) bool {
	return a == b || a != nil && b != nil && *a == *b
}

// AppMeta is what a row's root object (App, Middleware, CD Application)
// says on its own.
type AppMeta struct {
	Row RowKind
	// Unreachable is since when the row's cluster has not answered, in
	// seconds after unreachableEpoch (0 while it answers): 32 bits, so the
	// struct keeps its size.
	Unreachable uint32
	Namespace   string
	Name        string
	UID         string
	Env         string // main, test, dev (from the namespace map)
	Org         string // the hanzo.ai/org label; the tenant
	Project     string // app.kubernetes.io/part-of, or "default"
	Created     int64  // Unix seconds

	Role       string
	Repository string
	Declared   string // spec.image.tag
	Phase      string
	Replicas   int32 // desired
	Ready      int32
	// Source is the CD Application's own source and destination (RowCD only).
	Source *CDApplicationSpec
	// Engine is what the engine wrote on the App (RowApp only); nil when
	// the engine does not manage it.
	Engine *EngineMark

	cfg *Config // the store's configuration (display values)
}

// sameMeta reports whether two AppMeta say the same.
func sameMeta(a, b *AppMeta) bool {
	if a == b {
		return true
	}
	x, y := *a, *b
	x.Source, y.Source = nil, nil
	x.Engine, y.Engine = nil, nil
	if x != y || (a.Source == nil) != (b.Source == nil) || !sameEngineMark(a.Engine, b.Engine) {
		return false
	}
	return a.Source == nil || *a.Source == *b.Source
}

// Key returns the row's key.
func (a *App) Key() AppKey { return AppKey{a.Namespace, a.Name} }

// HistoryEntry is one release of an app, oldest first in App.History.
type HistoryEntry struct {
	// ID is the Deployment revision of the ReplicaSet that ran the release
	// (stable: Kubernetes never reuses one); 0 for a release known only
	// from the operator's upgradeHistory.
	ID              int64
	Revision        string // the image version
	DeployedAt      int64  // Unix seconds
	DeployStartedAt int64
}

// SyncOp is a sync in flight or finished, from the sync annotation.
type SyncOp struct {
	Phase       string // Running, Succeeded
	Message     string
	StartedAt   string // RFC 3339, the annotation's value
	Revision    string // the declared version being synced
	InitiatedBy string
}

// NodeInfo is the immutable part of a tree node: one version of one object
// and what is derived from it alone.
type NodeInfo struct {
	Obj       *Object
	Health    Health
	HasHealth bool
	// Reason is why an unhealthy node is so, in short: a pod's waiting or
	// termination reason, else its health message cut short, else its
	// status ("CrashLoopBackOff"). Empty when healthy.
	Reason string

	imgSum uint64 // a hash of its containers' images, to see a change cheaply
	e      *entry // the writer's record of the object; never read by readers
}

// containers are the containers of a workload's template or a pod.
func (n *NodeInfo) containers() []Container {
	switch sp := n.Obj.Spec.(type) {
	case *WorkloadSpec:
		return sp.Containers
	case *PodSpec:
		return sp.Containers
	}
	return nil
}

// Images are the images of the node's containers (of its pod template for
// a workload); for an App, the image it declares.
func (n *NodeInfo) Images() []string {
	if sp, ok := n.Obj.Spec.(*AppSpec); ok {
		if sp.Repository == "" {
			return nil
		}
		if sp.Tag == "" {
			return []string{sp.Repository}
		}
		return []string{sp.Repository + ":" + sp.Tag}
	}
	cs := n.containers()
	if len(cs) == 0 {
		return nil
	}
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		if c.Image != "" {
			out = append(out, c.Image)
		}
	}
	return out
}

// Tag is the version of the node's primary image ("" when none): the App's
// declared tag, or the first container's.
func (n *NodeInfo) Tag() string {
	if sp, ok := n.Obj.Spec.(*AppSpec); ok {
		if sp.Repository == "" {
			return ""
		}
		return sp.Tag
	}
	for _, c := range n.containers() {
		if c.Image != "" {
			return ImageTag(c.Image)
		}
	}
	return ""
}

// sameImages reports whether two versions of an object run the same images
// (by hash: the old version's spec is not read).
func sameImages(a, b *NodeInfo) bool { return a.imgSum == b.imgSum }

// imagesSum fingerprints the images of a node's containers, in order, the
// way shapeOf fingerprints a shape (seeded, so no image name can be chosen
// to collide with another).
func imagesSum(n *NodeInfo) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, c := range n.containers() {
		h = mix64(h ^ maphash.String(fingerprintSeed, c.Image))
	}
	return h
}

// writeCause names an unhealthy node in an application's health message,
// with its reason: "Pod:tenant-acme/web-7d9-x2 (CrashLoopBackOff)".
func writeCause(b *strings.Builder, n *NodeInfo) {
	o := n.Obj
	b.WriteString(o.Kind.String())
	b.WriteByte(':')
	b.WriteString(o.Namespace)
	b.WriteByte('/')
	b.WriteString(o.Name)
	b.WriteString(" (")
	b.WriteString(n.Reason)
	b.WriteByte(')')
}

func causeLen(n *NodeInfo) int {
	return len(n.Obj.Kind.String()) + len(n.Obj.Namespace) + len(n.Obj.Name) + len(n.Reason) + 5
}

// Parent returns the parent of the tree's node i, nil for the root.
func (a *App) Parent(i int) *NodeInfo {
	if p := a.parents[i]; p >= 0 {
		return a.Tree[p]
	}
	return nil
}

// Ref returns the node's ref token, group:kind:namespace:name.
func (n *NodeInfo) Ref() string { return n.Obj.Ref() }

// The parents of the trees of one node and of a root with one child.
var (
	rootOnly   = []int32{-1}
	rootAndOne = []int32{-1, 0}
)

// Each encoded form of a row version is computed on first use and shared by
// every reader — and by the next version of the row when that part of it did
// not change (Store.appendKnownDelta hands it on).

// encoded is one encoded form of a row version. Two readers asking for it
// at the same moment may both encode it; they get the same bytes, and one
// copy is kept.
type encoded struct {
	p atomic.Pointer[[]byte]
	h atomic.Uint64 // the encoding's digest, 0 until asked for
}

// share makes c hold what from holds (a version unchanged in this form).
func (c *encoded) share(from *encoded) {
	c.p.Store(from.p.Load())
	c.h.Store(from.h.Load())
}

// digest is a digest of the encoded form (encoding it if need be), the
// same in every process for the same bytes.
func (c *encoded) digest(f func() []byte) uint64 {
	if h := c.h.Load(); h != 0 {
		return h
	}
	h := crc64.Checksum(c.get(f), crcTable) | 1
	c.h.Store(h)
	return h
}

var crcTable = crc64.MakeTable(crc64.ECMA)

func (c *encoded) get(f func() []byte) []byte {
	if p := c.p.Load(); p != nil {
		return *p
	}
	b := f()
	if c.p.CompareAndSwap(nil, &b) {
		return b
	}
	return *c.p.Load()
}

// next is a new version of the row: every field but the encoded forms,
// which a reader of a may be filling in meanwhile. Its tree is a copy of
// a's, to be patched.
func (a *App) next() *App {
	n := newApp(a.Tree)
	n.AppMeta, n.AppRollout, n.Health, n.parents = a.AppMeta, a.AppRollout, a.Health, a.parents
	n.Revision, n.TreeRevision = a.Revision, a.TreeRevision
	n.ResourceVersion, n.Removed = a.ResourceVersion, a.Removed
	return n
}

// newApp allocates a row version and a copy of tree as its Tree, in one
// piece for trees of up to 64 nodes: the two are read together, and live
// and die together (no other version shares a tree that it patches).
func newApp(tree []*NodeInfo) *App {
	var a *App
	var t []*NodeInfo
	// The sizes fill Go's allocation size classes (an App is 128 bytes).
	switch n := len(tree); {
	case n <= 8:
		a, t = withTree(n, func(t *[8]*NodeInfo) []*NodeInfo { return t[:] })
	case n <= 16:
		a, t = withTree(n, func(t *[16]*NodeInfo) []*NodeInfo { return t[:] })
	case n <= 20:
		a, t = withTree(n, func(t *[20]*NodeInfo) []*NodeInfo { return t[:] })
	case n <= 24:
		a, t = withTree(n, func(t *[24]*NodeInfo) []*NodeInfo { return t[:] })
	case n <= 32:
		a, t = withTree(n, func(t *[32]*NodeInfo) []*NodeInfo { return t[:] })
	case n <= 48:
		a, t = withTree(n, func(t *[48]*NodeInfo) []*NodeInfo { return t[:] })
	case n <= 64:
		a, t = withTree(n, func(t *[64]*NodeInfo) []*NodeInfo { return t[:] })
	default:
		a, t = new(App), make([]*NodeInfo, n)
	}
	copy(t, tree)
	a.Tree = t
	return a
}

// withTree allocates an App and an array of nodes A together, and returns
// the App and the array's first n slots.
func withTree[A any](n int, nodes func(*A) []*NodeInfo) (*App, []*NodeInfo) {
	p := new(struct {
		a App
		t A
	})
	return &p.a, nodes(&p.t)[:n:n]
}
