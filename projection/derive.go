package projection

import (
	"slices"
	"sort"
)

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
			nu.Removed = s.pos.Of(s.clusterIndex(nu.Namespace)) // an object left the tree
		}
	}
	return nu
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
	env, _, _ := s.cfg.Env(ao.Namespace)
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
	meta.Unreachable = s.unreachableSince(ao.Namespace)
	if prev != nil && sameMeta(meta, prev) {
		return prev
	}
	return meta
}

func sameIngress(a, b AppIngress) bool {
	return a.Enabled == b.Enabled && a.TLS == b.TLS && slices.Equal(a.Hosts, b.Hosts)
}

func projectOf(l Labels) string {
	if p := l.Value(LabelPartOf); p != "" {
		return p
	}
	return DefaultProject
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
