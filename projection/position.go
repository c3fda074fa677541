package projection

import (
	"strconv"
)

// ParseResourceVersion reads an object's resourceVersion as the API server
// writes it: a decimal count that orders every write of one cluster
// (apimachinery's CompareResourceVersion reads it the same way). Anything
// else, "" included, is 0: no position.
func ParseResourceVersion(rv string) uint64 {
	if rv == "" || len(rv) > 20 || rv[0] == '0' {
		return 0
	}
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// stampVersion sets the row's ResourceVersion: its own object's, the root
// of its tree.
func (a *App) stampVersion() {
	a.ResourceVersion = 0
	if len(a.Tree) > 0 {
		a.ResourceVersion = ParseResourceVersion(a.Tree[0].Obj.ResourceVersion)
	}
}

// ApplicationDigest is a digest of the encoded Application: equal on every
// replica for equal bytes, computed once per version.
func (a *App) ApplicationDigest() uint64 {
	return a.argo.digest(func() []byte { return mustJSON(a.Application()) })
}

// TreeDigest is the same for the encoded ApplicationTree.
func (a *App) TreeDigest() uint64 {
	return a.tree.digest(func() []byte { return mustJSON(a.ApplicationTree()) })
}

// ETag is the entity tag of the row's Application: its resourceVersion
// (as a position of its own cluster) and its digest, the same on every
// replica for the same answer.
func (a *App) ETag() string { return a.versionTag(a.ApplicationDigest()) }

// TreeETag is the entity tag of the row's ApplicationTree.
func (a *App) TreeETag() string { return a.versionTag(a.TreeDigest()) }

// versionTag is the row's resourceVersion, written as a position of its
// own cluster, and digest.
func (a *App) versionTag(digest uint64) string {
	b := make([]byte, 0, 40)
	if a.cfg == nil || len(a.cfg.Clusters) == 0 {
		b = strconv.AppendUint(b, a.ResourceVersion, 10)
	} else {
		// Its own cluster's part alone: the others are 0.
		b = append(b, a.cfg.ClusterNames()[a.ClusterIndex()]...)
		b = append(b, '=')
		b = strconv.AppendUint(b, a.ResourceVersion, 10)
	}
	return appendDigest(b, digest)
}

func appendDigest(b []byte, digest uint64) string {
	b = append(b, '-')
	b = strconv.AppendUint(b, digest, 36)
	return string(b)
}

// ListTag is the entity tag of a list at position pos whose rows' digests
// fold into digest (FoldDigest): the same on every replica for the same
// answer. Its position is what precedes the last '-'.
func ListTag(pos Position, digest uint64) string {
	return appendDigest(pos.AppendID(make([]byte, 0, 40)), digest)
}

// FoldDigest folds a row's Application digest into a list's: equal lists
// of rows, in the same order, have equal digests.
func FoldDigest(h uint64, a *App) uint64 {
	return (h ^ a.ApplicationDigest()) * 1099511628211
}

// GoneApplicationJSON is the Application a DELETED event carries for a row
// known only from the cluster's history (its name, namespace, labels and
// project as they were): the rest of it is not kept.
func GoneApplicationJSON(k AppKey, org, project, env string, rv uint64) []byte {
	labels := map[string]string{LabelInstance: k.Name}
	if env != "" {
		labels[LabelEnv] = env
	}
	if org != "" {
		labels[LabelOrg] = org
	}
	var meta ObjectMeta
	meta.Name, meta.Namespace, meta.Labels = k.Name, k.Namespace, labels
	if rv != 0 {
		meta.ResourceVersion = strconv.FormatUint(rv, 10)
	}
	return mustJSON(struct {
		APIVersion string     `json:"apiVersion"`
		Kind       string     `json:"kind"`
		Metadata   ObjectMeta `json:"metadata"`
		Spec       struct {
			Project string `json:"project"`
		} `json:"spec"`
	}{APIVersion: "argoproj.io/v1alpha1", Kind: "Application", Metadata: meta, Spec: struct {
		Project string `json:"project"`
	}{project}})
}

// Changed reports whether the row may have changed since position p: an
// object of its tree is newer than p's part of the row's cluster, or an
// object left the tree after it.
func (a *App) Changed(p Position) bool {
	pos := p.Of(a.ClusterIndex())
	if a.Removed > pos {
		return true
	}
	for _, n := range a.Tree {
		if ParseResourceVersion(n.Obj.ResourceVersion) > pos {
			return true
		}
	}
	return false
}

// PastRow is what a row's own object says of the row: its kind, key and
// what scope and filters read. For a row known only from the cluster's
// history.
type PastRow struct {
	Row               RowKind
	Key               AppKey
	Org, Project, Env string
	ResourceVersion   uint64
}

// PastRows are the rows the row objects of a past moment made (Apps, CD
// Applications, Middlewares — every object of those kinds the cluster held
// then, as RootsAt lists them), as the fold derives them: an App or a CD
// Application is a row of its own; a Middleware serving static files is a
// site, named as the fold names it among that moment's Middlewares and
// Apps. Objects of other kinds are ignored. Safe for concurrent use: it
// reads only the store's configuration.
func (s *Store) PastRows(objs []*Object) []PastRow {
	var out []PastRow
	apps := map[AppKey]bool{}
	mws := map[string][]*Object{} // static Middlewares by namespace
	for _, o := range objs {
		env, _, _ := s.cfg.Env(o.Namespace)
		row := PastRow{Key: AppKey{o.Namespace, o.Name}, Env: env, Org: o.Labels.Value(LabelOrg), ResourceVersion: ParseResourceVersion(o.ResourceVersion)}
		switch o.Kind {
		case KindApp:
			row.Row, row.Project = RowApp, projectOf(o.Labels)
			apps[row.Key] = true
		case KindCDApplication:
			row.Row = RowCD
			if spec, _ := o.Spec.(*CDApplicationSpec); spec != nil {
				row.Project = spec.Project
			}
			if row.Project == "" {
				row.Project = DefaultProject
			}
		case KindMiddleware:
			if mw, _ := o.Spec.(*MiddlewareSpec); mw != nil && mw.StaticRoot != "" {
				mws[o.Namespace] = append(mws[o.Namespace], o)
			}
			continue
		default:
			continue
		}
		out = append(out, row)
	}
	for ns, set := range mws {
		env, _, _ := s.cfg.Env(ns)
		names := siteNames(set, func(name string) bool { return apps[AppKey{ns, name}] })
		for i, o := range set {
			out = append(out, PastRow{Row: RowSite, Key: AppKey{ns, names[i]}, Env: env, Org: o.Labels.Value(LabelOrg),
				Project: projectOf(o.Labels), ResourceVersion: ParseResourceVersion(o.ResourceVersion)})
		}
	}
	return out
}

// lostNode reports whether an object of tree old is not in tree nu. The
// versions of a tree keep their order, so the search for each node starts
// after the last one found: linear when the order held, and it allocates
// nothing (the fold calls it for every tree that changed).
func lostNode(old, nu []*NodeInfo) bool {
	j := 0
	for _, o := range old {
		found := false
		for k := range nu {
			i := (j + k) % len(nu)
			if sameNode(o, nu[i]) {
				found, j = true, i+1
				break
			}
		}
		if !found {
			return true
		}
	}
	return false
}

// sameNode reports whether two nodes are versions of one object: the
// writer's record of it, else (a node built without one) its key.
func sameNode(a, b *NodeInfo) bool {
	if a.e != nil || b.e != nil {
		return a.e == b.e
	}
	return nodeKey(a) == nodeKey(b)
}

func nodeKey(n *NodeInfo) ObjectKey { return ObjectKey{n.Obj.Kind, n.Obj.Namespace, n.Obj.Name} }
