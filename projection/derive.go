package projection

import (
	"iter"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// depth1Kinds are the kinds an App renders directly, in tree order.
var depth1Kinds = [...]Kind{KindDeployment, KindStatefulSet, KindService, KindConfigMap, KindIngress, KindHPA, KindPDB}

func isDepth1(k Kind) bool {
	for _, d := range depth1Kinds {
		if d == k {
			return true
		}
	}
	return false
}

// newNodeInfo derives what one object version says on its own.
func newNodeInfo(o *Object) *NodeInfo {
	n := &NodeInfo{Obj: o}
	n.Health, n.HasHealth = ObjectHealth(o)
	n.imgSum = imagesSum(n)
	if n.HasHealth && n.Health.Status != HealthHealthy {
		n.Reason = shortReason(o, n.Health)
	}
	return n
}

// shortReason is the parenthesised cause of an unhealthy node in an
// application's health message: a pod's waiting or termination reason, else
// the node's health message cut short, else its status.
func shortReason(o *Object, h Health) string {
	if p, ok := o.Spec.(*PodSpec); ok && !o.Deleting {
		for _, cs := range p.Statuses {
			if cs.Waiting && cs.WaitingReason != "" && cs.WaitingReason != "ContainerCreating" {
				return cs.WaitingReason
			}
			if cs.Terminated != nil && cs.Terminated.Reason != "" {
				return cs.Terminated.Reason
			}
		}
	}
	if w, ok := o.Spec.(*WorkloadSpec); ok && !o.Deleting {
		if c := findCondition(w.Conditions, "Progressing"); c != nil && c.Reason == "ProgressDeadlineExceeded" {
			return c.Reason
		}
	}
	msg := h.Message
	if msg == "" {
		return string(h.Status)
	}
	if len(msg) > 80 {
		msg = msg[:77] + "..."
	}
	return msg
}

// deriveApp computes the App row r from the objects held, and updates the
// membership of every object it reads. nil when no App is held.
func (s *Store) deriveApp(r *appRow) *App {
	s.gen++
	old, k := r.app, r.key
	var nu *App
	if ae := s.objects[ObjectKey{KindApp, k.Namespace, k.Name}]; ae != nil {
		tree, parents := s.buildTree(ae)
		if old != nil && slices.Equal(parents, old.parents) {
			parents = old.parents
		} else {
			parents = slices.Clone(parents)
		}
		nu = s.summarize(tree, parents, old)
	}
	// Every entry of the new tree carries the current generation: record
	// the row on those, and drop it from the old tree's entries that lost it.
	if nu != nil {
		for _, n := range nu.Tree {
			n.e.rows.add(r)
		}
	}
	if old != nil {
		lost := false
		for _, n := range old.Tree {
			if n.e.mark != s.gen {
				n.e.rows.remove(r)
				lost = true
			}
		}
		if lost && nu != nil {
			nu.Removed = s.pos // an object left the tree
		}
	}
	return nu
}

// patchApp is deriveApp for a row none of whose objects changed shape (see
// shapeOf): the tree keeps its structure and parents, the changed nodes
// take their entries' current versions, and only what those nodes feed is
// read off again. Membership is unchanged. It also reports whether the
// Application changed.
func (s *Store) patchApp(old *App, changed []patch) (*App, bool) {
	a := old.next()
	tree := a.Tree
	var health, images, workload, endpoints, resources bool
	var self *NodeInfo // the App's version in old, when the App changed
	var hc healthChange
	for i, n := range tree {
		for _, p := range changed {
			// Pointer comparisons only: the tree's other nodes are not
			// read (they may be cold in memory).
			if n != p.was {
				continue
			}
			e, prev := p.e, n
			tree[i] = e.info
			if i == 0 {
				self = prev
				continue
			}
			depth1 := old.parents[i] == 0
			if prev.HasHealth != e.info.HasHealth || prev.Health != e.info.Health || prev.Reason != e.info.Reason {
				health = true
				resources = resources || depth1
				hc.add(old.Health.Status, prev, e.info)
			}
			// status.resources also carries a child's creation time.
			resources = resources || (depth1 && prev.Obj.Created != e.info.Obj.Created)
			sameImg := sameImages(prev, e.info)
			images = images || !sameImg
			switch e.key.Kind {
			case KindDeployment, KindStatefulSet:
				// The running version is read off the template.
				workload = workload || !sameImg
			case KindReplicaSet:
				// The history reads a ReplicaSet's revision, images and
				// creation; its status does not matter.
				workload = workload || !sameImg || revisionOf(prev.Obj) != revisionOf(e.info.Obj) || prev.Obj.Created != e.info.Obj.Created
			case KindIngress:
				endpoints = true
			}
		}
	}
	changedApp := resources
	root := tree[0]
	if self != nil {
		// The App's own fields, and what its spec feeds.
		spec, was := appSpec(root.Obj), appSpec(self.Obj)
		a.AppMeta = s.appMeta(root.Obj, spec, old.AppMeta)
		changedApp = changedApp || a.AppMeta != old.AppMeta
		if self.HasHealth != root.HasHealth || self.Health != root.Health || self.Reason != root.Reason {
			health = true
			hc.add(old.Health.Status, self, root)
		}
		workload = workload || spec.Tag != was.Tag || spec.Repository != was.Repository || !slices.Equal(spec.UpgradeHistory, was.UpgradeHistory)
		endpoints = endpoints || !slices.Equal(spec.Endpoints, was.Endpoints) || !sameIngress(spec.Ingress, was.Ingress)
	}
	if health {
		a.Health = hc.health(tree, old.Health)
		changedApp = changedApp || a.Health != old.Health
	}
	if !images && !workload && !endpoints && !health && self == nil {
		return a, changedApp
	}
	// The rollout part is rebuilt on the stack and kept only if it changed.
	ro, rollout := *old.AppRollout, false
	if images {
		ro.Images = s.treeImages(tree, old.Images)
		rollout = rollout || !slices.Equal(ro.Images, old.Images)
	}
	if workload || endpoints || health || self != nil {
		spec := appSpec(root.Obj)
		if workload {
			w := workloadOf(tree, a.parents)
			ro.Running = ""
			if w != nil {
				ro.Running = runningVersion(w.Obj, spec.Repository)
			}
			ro.Sync = SyncOf(a.Declared, ro.Running)
			ro.History = s.history(tree, a.parents, w, spec, old.History)
			rollout = rollout || ro.Running != old.Running || ro.Sync != old.Sync || !slices.Equal(ro.History, old.History)
		}
		if endpoints {
			ro.Endpoints = appEndpoints(spec, tree)
			rollout = rollout || !slices.Equal(ro.Endpoints, old.Endpoints)
		}
		if op := operationOf(root.Obj, spec, ro.Sync, a.Health); !sameOperation(op, old.Operation) {
			ro.Operation, rollout = op, true
		}
	}
	if rollout {
		p := new(AppRollout)
		*p = ro
		a.AppRollout = p
	}
	return a, changedApp || rollout
}

// rowSet is a set of App rows held inline for the common case of one: an
// object in more than one tree (a Deployment rendered for one App and named
// after another) is rare.
type rowSet struct {
	one  *appRow
	more *[]*appRow
}

func (rs *rowSet) all() iter.Seq[*appRow] {
	return func(yield func(*appRow) bool) {
		if rs.one != nil && !yield(rs.one) {
			return
		}
		if rs.more != nil {
			for _, r := range *rs.more {
				if !yield(r) {
					return
				}
			}
		}
	}
}

func (rs *rowSet) has(r *appRow) bool {
	return rs.one == r || (rs.more != nil && slices.Contains(*rs.more, r))
}

func (rs *rowSet) add(r *appRow) {
	switch {
	case rs.has(r):
	case rs.one == nil:
		rs.one = r
	case rs.more == nil:
		rs.more = &[]*appRow{r}
	default:
		*rs.more = append(*rs.more, r)
	}
}

func (rs *rowSet) remove(r *appRow) {
	if rs.more == nil {
		if rs.one == r {
			rs.one = nil
		}
		return
	}
	l := *rs.more
	if rs.one == r {
		rs.one = l[len(l)-1] // the last spilled row moves inline
	} else if i := slices.Index(l, r); i >= 0 {
		l[i] = l[len(l)-1]
	} else {
		return
	}
	l[len(l)-1] = nil
	if l = l[:len(l)-1]; len(l) == 0 {
		rs.more = nil
	} else {
		*rs.more = l
	}
}

// summarize assembles an App row from its tree (root first): everything a
// row says is read off the tree, which the row copies. Parts equal to the
// previous version's are shared with it.
func (s *Store) summarize(tree []*NodeInfo, parents []int32, old *App) *App {
	ao := tree[0].Obj
	spec := appSpec(ao)
	prev := old
	if prev == nil {
		prev = &App{AppRollout: &AppRollout{}}
	}
	ro := &AppRollout{}
	a := newApp(tree)
	tree = a.Tree
	a.AppMeta, a.AppRollout, a.parents = s.appMeta(ao, spec, prev.AppMeta), ro, parents
	workload := workloadOf(tree, parents)
	if workload != nil {
		ro.Running = runningVersion(workload.Obj, spec.Repository)
	}
	ro.Sync = SyncOf(a.Declared, ro.Running)
	a.Health = appHealth(tree, prev.Health)
	ro.Images = s.treeImages(tree, prev.Images)
	ro.Endpoints = appEndpoints(spec, tree)
	ro.History = s.history(tree, parents, workload, spec, prev.History)
	ro.Operation = operationOf(ao, spec, ro.Sync, a.Health)
	if sameOperation(ro.Operation, prev.Operation) {
		ro.Operation = prev.Operation
	}
	if sameRollout(ro, prev.AppRollout) {
		a.AppRollout = prev.AppRollout
	}
	return a
}

// appSpec is an App's spec; the defaults when it has none.
func appSpec(o *Object) *AppSpec {
	if spec, _ := o.Spec.(*AppSpec); spec != nil {
		return spec
	}
	return &AppSpec{Replicas: 1}
}

// appMeta is what an App says on its own; prev when equal.
func (s *Store) appMeta(ao *Object, spec *AppSpec, prev *AppMeta) *AppMeta {
	env, _, _ := s.cfg.Namespaces.Env(ao.Namespace)
	meta := &AppMeta{
		Row:        RowApp,
		Namespace:  ao.Namespace,
		Name:       ao.Name,
		UID:        ao.UID,
		Env:        env,
		Org:        ao.Labels.Value(LabelOrg),
		Project:    projectOf(ao.Labels),
		Created:    ao.Created,
		Role:       spec.Role,
		Repository: spec.Repository,
		Declared:   spec.Tag,
		Phase:      spec.Phase,
		Replicas:   spec.Replicas,
		Ready:      spec.ReadyReplicas,
		Engine:     spec.Engine,
		cfg:        &s.cfg,
	}
	if prev != nil && sameMeta(meta, prev) {
		return prev
	}
	return meta
}

func sameIngress(a, b AppIngress) bool {
	return a.Enabled == b.Enabled && a.TLS == b.TLS && slices.Equal(a.Hosts, b.Hosts)
}

// workloadOf is the Deployment (else StatefulSet) rendered for the App: a
// child of the root named after it.
func workloadOf(tree []*NodeInfo, parents []int32) *NodeInfo {
	root := tree[0]
	var w *NodeInfo
	for _, n := range resourceNodes(tree, parents) {
		if n.Obj.Name != root.Obj.Name {
			continue
		}
		switch n.Obj.Kind {
		case KindDeployment:
			return n
		case KindStatefulSet:
			if w == nil {
				w = n
			}
		}
	}
	return w
}

func projectOf(l Labels) string {
	if p := l.Value(LabelPartOf); p != "" {
		return p
	}
	return DefaultProject
}

// buildTree collects the App's tree: depth 1 by ownerReference to the App or
// by the App's name; ReplicaSets of kept Deployments; Pods of kept
// ReplicaSets and StatefulSets, or selected by a kept Deployment when no
// owner of theirs is held. Order: root, then by kind, then by name. Every
// entry placed is marked with the current generation. The tree and parents
// returned are the writer's buffers, valid until the next build.
func (s *Store) buildTree(ae *entry) ([]*NodeInfo, []int32) {
	root := ae.info
	ao := root.Obj
	ns := ao.Namespace
	ae.mark = s.gen
	tree, parents := s.scratch.tree[:0], s.scratch.parents[:0]
	add := func(n *NodeInfo, parent int) {
		tree = append(tree, n)
		parents = append(parents, int32(parent))
	}
	depth1 := s.scratch.depth1[:0]
	add1 := func(ce *entry) {
		if ce.mark == s.gen || !isDepth1(ce.key.Kind) || ce.key.Namespace != ns {
			return
		}
		ce.mark = s.gen
		depth1 = append(depth1, ce)
	}
	if ao.UID != "" {
		for _, ce := range s.children[ao.UID] {
			add1(ce)
		}
	}
	for _, ce := range s.names[nsName{ns, ao.Name}] {
		add1(ce)
	}
	sortEntries(depth1)
	s.scratch.depth1 = depth1
	add(root, -1)
	for _, d := range depth1 {
		add(d.info, 0)
	}

	// Depth 2 and below, appended per parent in the order of depth 1.
	for i, d := range depth1 {
		at := 1 + i
		switch d.key.Kind {
		case KindDeployment:
			first := len(tree)
			for _, rs := range s.ownedBy(d, KindReplicaSet) {
				add(rs.info, at)
			}
			last := len(tree)
			for j := first; j < last; j++ {
				for _, p := range s.ownedBy(tree[j].e, KindPod) {
					add(p.info, j)
				}
			}
			if w, ok := d.info.Obj.Spec.(*WorkloadSpec); ok {
				for _, pe := range s.pods.selectedOrphans(ns, w.Selector) {
					if pe.mark != s.gen {
						pe.mark = s.gen
						add(pe.info, at)
					}
				}
			}
		case KindStatefulSet:
			for _, p := range s.ownedBy(d, KindPod) {
				add(p.info, at)
			}
		}
	}
	s.scratch.tree, s.scratch.parents = tree, parents
	return tree, parents
}

// ownedBy returns the held objects of kind in the owner's namespace that
// name it as owner and are not yet in the tree, sorted by name, and marks
// them.
func (s *Store) ownedBy(owner *entry, kind Kind) []*entry {
	uid := owner.info.Obj.UID
	if uid == "" {
		return nil
	}
	out := s.scratch.owned[:0]
	for _, ce := range s.children[uid] {
		if ce.key.Kind != kind || ce.key.Namespace != owner.key.Namespace || ce.mark == s.gen {
			continue
		}
		ce.mark = s.gen
		out = append(out, ce)
	}
	sortEntries(out)
	s.scratch.owned = out
	return out
}

func sortEntries(list []*entry) {
	slices.SortFunc(list, func(x, y *entry) int {
		a, b := x.key, y.key
		if a.Kind != b.Kind {
			return kindOrder(a.Kind) - kindOrder(b.Kind)
		}
		return strings.Compare(a.Name, b.Name)
	})
}

func kindOrder(k Kind) int {
	for i, d := range depth1Kinds {
		if d == k {
			return i
		}
	}
	return len(depth1Kinds) + int(k)
}

// runningVersion is the version of the container whose image repository is
// the App's repository, else of the first container, in the workload's pod
// template.
func runningVersion(w *Object, repository string) string {
	ws, ok := w.Spec.(*WorkloadSpec)
	if !ok || len(ws.Containers) == 0 {
		return ""
	}
	for _, c := range ws.Containers {
		if ref := ParseImage(c.Image); repository != "" && ref.Repository == repository {
			return ref.Version()
		}
	}
	return ImageTag(ws.Containers[0].Image)
}

// appHealth is the worst health over the App node and its live children,
// with a message naming up to three causes. prev is the previous version's,
// reused when equal.
func appHealth(tree []*NodeInfo, prev Health) Health {
	worst := HealthHealthy
	for _, n := range tree {
		if n.HasHealth && n.Health.Status.Worse(worst) {
			worst = n.Health.Status
		}
	}
	if worst == HealthHealthy {
		return Health{Status: HealthHealthy}
	}
	total, size := 0, len("Caused by ")+len(" and 999999 more")
	for _, n := range tree {
		if n.HasHealth && n.Health.Status == worst {
			if total < 3 {
				size += causeLen(n) + 2
			}
			total++
		}
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteString("Caused by ")
	i := 0
	for _, n := range tree {
		if !n.HasHealth || n.Health.Status != worst || i == 3 {
			continue
		}
		switch {
		case i == 0:
		case i == total-1:
			b.WriteString(" and ")
		default:
			b.WriteString(", ")
		}
		writeCause(&b, n)
		i++
	}
	if total > 3 {
		b.WriteString(" and ")
		b.WriteString(strconv.Itoa(total - 3))
		b.WriteString(" more")
	}
	h := Health{Status: worst, Message: b.String()}
	if h == prev {
		return prev
	}
	return h
}

// healthChange gathers the health changes of a patched tree's nodes, to
// tell the App's new health without reading the other nodes where it can:
// a node that stays better than the App's worst changes nothing, and on a
// healthy App, one node turning worse is alone the cause.
type healthChange struct {
	sole *NodeInfo // the one node that turned a healthy App worse
	scan bool      // every node must be read
}

// add records a node's change from prev to next on an App whose health was
// worst.
func (hc *healthChange) add(worst HealthCode, prev, next *NodeInfo) {
	// below: the node takes no part in the App's health or its message.
	below := func(n *NodeInfo) bool {
		return !n.HasHealth || n.Health.Status.rank() < worst.rank() || worst == HealthHealthy && n.Health.Status == HealthHealthy
	}
	switch {
	case below(prev) && below(next):
	case worst == HealthHealthy && below(prev) && hc.sole == nil:
		hc.sole = next
	default:
		hc.scan = true
	}
}

// health is the App's health after the changes added; prev is its health
// before them.
func (hc *healthChange) health(tree []*NodeInfo, prev Health) Health {
	switch {
	case hc.scan:
		return appHealth(tree, prev)
	case hc.sole != nil:
		// The one unhealthy node reads as the whole tree would.
		return appHealth([]*NodeInfo{hc.sole}, prev)
	}
	return prev
}

// treeImages are the images of the tree's workloads and pods, sorted and
// unique; prev when equal.
func (s *Store) treeImages(tree []*NodeInfo, prev []string) []string {
	out := s.scratch.images[:0]
	for _, n := range tree {
		if n.Obj.Kind == KindApp {
			continue
		}
		for _, c := range n.containers() {
			if c.Image != "" && !slices.Contains(out, c.Image) {
				out = append(out, c.Image)
			}
		}
	}
	slices.Sort(out)
	s.scratch.images = out
	if slices.Equal(out, prev) {
		return prev
	}
	if len(out) == 0 {
		return nil
	}
	return slices.Clone(out)
}

// appEndpoints are the operator's status.endpoints, else https:// plus each
// host of the App's ingress spec and of its Ingress objects.
func appEndpoints(spec *AppSpec, tree []*NodeInfo) []string {
	if len(spec.Endpoints) > 0 {
		return spec.Endpoints
	}
	var hosts []string
	if spec.Ingress.Enabled {
		hosts = append(hosts, spec.Ingress.Hosts...)
	}
	for _, n := range tree {
		if in, ok := n.Obj.Spec.(*IngressSpec); ok && n.Obj.Kind == KindIngress {
			hosts = append(hosts, in.Hosts...)
		}
	}
	if len(hosts) == 0 {
		return nil
	}
	sort.Strings(hosts)
	out := make([]string, 0, len(hosts))
	for i, h := range hosts {
		if i > 0 && h == hosts[i-1] {
			continue
		}
		out = append(out, "https://"+h)
	}
	return out
}

// history lists the app's releases in the order they were deployed: one
// entry per ReplicaSet of its Deployment (id = the Deployment revision),
// after the operator's upgradeHistory entries for versions no ReplicaSet
// remembers.
func (s *Store) history(tree []*NodeInfo, parents []int32, workload *NodeInfo, spec *AppSpec, prev []HistoryEntry) []HistoryEntry {
	out := s.scratch.history[:0]
	if workload != nil && workload.Obj.Kind == KindDeployment {
		for i, n := range tree {
			if p := parents[i]; p < 0 || tree[p] != workload || n.Obj.Kind != KindReplicaSet {
				continue
			}
			rs := n.Obj
			ws, _ := rs.Spec.(*WorkloadSpec)
			if ws == nil {
				continue
			}
			id := ws.RevisionID
			if id <= 0 {
				continue
			}
			out = append(out, HistoryEntry{ID: id, Revision: runningVersion(rs, spec.Repository), DeployedAt: rs.Created, DeployStartedAt: rs.Created})
		}
	}
	for _, u := range spec.UpgradeHistory {
		tag := u.Tag
		if tag == "" && u.Image != "" {
			tag = ImageTag(u.Image)
		}
		if tag == "" || hasRevision(out, tag) {
			continue
		}
		done := u.CompletedAt
		if done == 0 {
			done = u.StartedAt
		}
		out = append(out, HistoryEntry{Revision: tag, DeployedAt: done, DeployStartedAt: u.StartedAt})
	}
	// Deployment order: the releases only the operator remembers (their
	// ReplicaSets are gone) by time, then the ReplicaSets by revision —
	// a rollback reuses an old ReplicaSet under a new revision, so its
	// creation time does not say when it ran last.
	slices.SortFunc(out, func(a, b HistoryEntry) int {
		if (a.ID == 0) != (b.ID == 0) {
			if a.ID == 0 {
				return -1
			}
			return 1
		}
		if a.ID != b.ID {
			return cmpInt(a.ID, b.ID)
		}
		if a.DeployedAt != b.DeployedAt {
			return cmpInt(a.DeployedAt, b.DeployedAt)
		}
		return strings.Compare(a.Revision, b.Revision)
	})
	s.scratch.history = out
	if slices.Equal(out, prev) {
		return prev
	}
	if len(out) == 0 {
		return nil
	}
	return slices.Clone(out)
}

func hasRevision(list []HistoryEntry, rev string) bool {
	for _, h := range list {
		if h.Revision == rev {
			return true
		}
	}
	return false
}

// operationOf is the sync operation the App's sync annotation asked for:
// Running until the app is Synced on its declared version and no longer
// rolling out, then Succeeded.
func operationOf(o *Object, spec *AppSpec, sync SyncCode, health Health) *SyncOp {
	if spec.SyncRequestedAt == "" {
		return nil
	}
	op := &SyncOp{StartedAt: spec.SyncRequestedAt, Revision: spec.Tag, InitiatedBy: spec.SyncRequestedBy}
	if _, err := time.Parse(time.RFC3339, spec.SyncRequestedAt); err != nil {
		op.StartedAt = ""
	}
	pending := o.Generation > spec.ObservedGeneration || !spec.HasStatus
	if sync != SyncSynced || health.Status == HealthProgressing || pending {
		op.Phase = "Running"
		op.Message = "waiting for the rollout of " + orUnknown(spec.Tag)
	} else {
		op.Phase = "Succeeded"
		op.Message = "synced to " + spec.Tag
	}
	return op
}

func orUnknown(s string) string {
	if s == "" {
		return "the declared version"
	}
	return s
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func revisionOf(o *Object) int64 {
	if w, ok := o.Spec.(*WorkloadSpec); ok {
		return w.RevisionID
	}
	return 0
}
