package projection

import (
	"slices"
	"sort"
	"strings"
)

// deriveSites recomputes the static-site rows of one namespace: one per
// Middleware serving static files, routed by the first IngressRoute route
// that references it.
func (s *Store) deriveSites(deltas []Delta, ns string) []Delta {
	nu := map[AppKey]*App{}
	var routes []*NodeInfo
	for _, set := range s.siteObjs {
		for k := range set {
			if k.Kind == KindIngressRoute {
				if e := s.objects[k]; e != nil {
					routes = append(routes, e.info)
				}
			}
		}
	}
	sort.Slice(routes, func(i, j int) bool {
		a, b := routes[i].Obj, routes[j].Obj
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	var mws []*NodeInfo
	for k := range s.siteObjs[ns] {
		if k.Kind != KindMiddleware {
			continue
		}
		e := s.objects[k]
		if e == nil {
			continue
		}
		if mw, ok := e.info.Obj.Spec.(*MiddlewareSpec); ok && mw.StaticRoot != "" {
			mws = append(mws, e.info)
		}
	}
	objs := make([]*Object, len(mws))
	for i, mw := range mws {
		objs[i] = mw.Obj
	}
	names := siteNames(objs, func(name string) bool { return s.objects[ObjectKey{KindApp, ns, name}] != nil })
	for i, name := range names {
		row := s.buildSite(mws[i], name, routes)
		nu[row.Key()] = row
	}
	var keys []AppKey
	for k, a := range s.sites {
		if a.Namespace == ns {
			keys = append(keys, k)
		}
	}
	for k := range nu {
		if _, had := s.sites[k]; !had {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].less(keys[j]) })
	for _, k := range keys {
		old, row := s.sites[k], nu[k]
		if row == nil {
			delete(s.sites, k)
		} else {
			s.sites[k] = row
		}
		deltas = s.appendDelta(deltas, RowSite, k, old, row)
	}
	return deltas
}

func (s *Store) buildSite(mw *NodeInfo, name string, routes []*NodeInfo) *App {
	o := mw.Obj
	env, _, _ := s.cfg.Env(o.Namespace)
	a := &App{
		AppMeta: &AppMeta{
			Row:       RowSite,
			Namespace: o.Namespace,
			Name:      name,
			UID:       o.UID,
			Env:       env,
			Org:       o.Labels.Value(LabelOrg),
			Project:   projectOf(o.Labels),
			Created:   o.Created,
			Role:      "site",
			Declared:  "static",
			cfg:       &s.cfg,
		},
		AppRollout: &AppRollout{Running: "static", Sync: SyncSynced},
		Health:     Health{Status: HealthMissing, Message: "no IngressRoute routes to this site"},
		Tree:       []*NodeInfo{mw},
		parents:    rootOnly,
	}
	for _, ir := range routes {
		spec, _ := ir.Obj.Spec.(*IngressRouteSpec)
		if spec == nil {
			continue
		}
		for _, r := range spec.Routes {
			if !routesTo(r, ir.Obj.Namespace, o) {
				continue
			}
			host := firstHost(r.Match)
			a.Health = Health{Status: HealthHealthy}
			if host != "" {
				a.Endpoints = []string{"https://" + host}
			}
			a.Tree, a.parents = append(a.Tree, ir), rootAndOne
			return a
		}
	}
	return a
}

// siteNames names the site row of each static Middleware of one namespace
// (mws, in any order; the names come back in that order); app reports
// whether an App of a name exists in the namespace. A site is named after
// the last path segment of spec.staticFiles.root (s3://cdn/docs → docs),
// else after its Middleware without a trailing "-static". The Middleware's
// own name is kept instead when that name is not free: an App of that name
// exists in the namespace (the two rows would collide), another static
// Middleware would take the same name, or it is another static
// Middleware's own name. The result depends only on the objects, never on
// the order they arrived in, and no two sites (nor a site and an App whose
// name differs from its Middleware's) share a row.
func siteNames(mws []*Object, app func(name string) bool) []string {
	names := make([]string, len(mws))
	if len(mws) == 0 {
		return names
	}
	own := make(map[string]struct{}, len(mws))
	count := make(map[string]int, len(mws))
	for i, mw := range mws {
		names[i] = preferredSiteName(mw)
		own[mw.Name] = struct{}{}
		count[names[i]]++
	}
	for i, mw := range mws {
		n := names[i]
		if n == mw.Name {
			continue
		}
		_, isOwn := own[n]
		if isOwn || count[n] > 1 || app(n) {
			names[i] = mw.Name
		}
	}
	return names
}

// preferredSiteName is the root's last path segment when it is a DNS-1123
// label (a name a path can carry), else the Middleware's name without a
// trailing "-static" (unless nothing would be left).
func preferredSiteName(mw *Object) string {
	if spec, ok := mw.Spec.(*MiddlewareSpec); ok {
		root := strings.TrimRight(spec.StaticRoot, "/")
		if seg := root[strings.LastIndexByte(root, '/')+1:]; isDNSLabel(seg) {
			return seg
		}
	}
	if n, ok := strings.CutSuffix(mw.Name, "-static"); ok && n != "" {
		return n
	}
	return mw.Name
}

// isDNSLabel reports whether v is a DNS-1123 label: at most 63 lower-case
// letters, digits and '-', starting and ending with a letter or digit.
func isDNSLabel(v string) bool {
	if v == "" || len(v) > 63 || v[0] == '-' || v[len(v)-1] == '-' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// appNameChanged is called when an App appears or goes: the site rows of
// its namespace may change name (see siteNames).
func (s *Store) appNameChanged(key ObjectKey) {
	if key.Kind == KindApp && s.siteObjs[key.Namespace] != nil {
		s.dirtySites[key.Namespace] = struct{}{}
	}
}

func routesTo(r Route, routeNS string, mw *Object) bool {
	for _, ref := range r.Middlewares {
		ns := ref.Namespace
		if ns == "" {
			ns = routeNS
		}
		if ref.Name == mw.Name && ns == mw.Namespace {
			return true
		}
	}
	return false
}

// firstHost extracts the first Host(`…`) of a route match expression.
func firstHost(match string) string {
	i := strings.Index(match, "Host(")
	if i < 0 {
		return ""
	}
	rest := match[i+len("Host("):]
	if rest == "" {
		return ""
	}
	q := rest[0]
	if q != '`' && q != '"' && q != '\'' {
		return ""
	}
	end := strings.IndexByte(rest[1:], q)
	if end < 0 {
		return ""
	}
	return rest[1 : 1+end]
}

// deriveCD computes the row of a CD Application: its own status strings.
func (s *Store) deriveCD(k AppKey) *App {
	e := s.objects[ObjectKey{KindCDApplication, k.Namespace, k.Name}]
	if e == nil {
		return nil
	}
	o := e.info.Obj
	spec, _ := o.Spec.(*CDApplicationSpec)
	if spec == nil {
		spec = &CDApplicationSpec{}
	}
	env, _, _ := s.cfg.Env(o.Namespace)
	a := &App{
		AppMeta: &AppMeta{
			Row:       RowCD,
			Namespace: o.Namespace,
			Name:      o.Name,
			UID:       o.UID,
			Env:       env,
			Org:       o.Labels.Value(LabelOrg),
			Project:   spec.Project,
			Created:   o.Created,
			Role:      "cd",
			Declared:  spec.TargetRevision,
			Source:    spec,
			cfg:       &s.cfg,
		},
		AppRollout: &AppRollout{Running: spec.SyncRevision, Sync: SyncCode(spec.SyncStatus)},
		Health:     Health{Status: HealthCode(spec.HealthStatus), Message: spec.HealthMessage},
		Tree:       []*NodeInfo{e.info},
		parents:    rootOnly,
	}
	if a.Project == "" {
		a.Project = DefaultProject
	}
	switch a.Sync {
	case SyncSynced, SyncOutOfSync:
	default:
		a.Sync = SyncUnknown
	}
	switch a.Health.Status {
	case HealthHealthy, HealthProgressing, HealthDegraded, HealthSuspended, HealthMissing:
	default:
		a.Health.Status = HealthUnknown
	}
	return a
}

// sameApplication reports whether two versions of a row encode to the same
// Application (revision aside).
func sameApplication(a, b *App) bool {
	if !sameMeta(a.AppMeta, b.AppMeta) || !sameRollout(a.AppRollout, b.AppRollout) || a.Health != b.Health {
		return false
	}
	// status.resources: the depth-1 nodes, their identity, creation and
	// health.
	ra, rb := a.resourceNodes(), b.resourceNodes()
	if len(ra) != len(rb) {
		return false
	}
	for i := range ra {
		x, y := ra[i], rb[i]
		if x.Obj.Kind != y.Obj.Kind || x.Obj.Name != y.Obj.Name || x.Obj.Namespace != y.Obj.Namespace ||
			x.Obj.Created != y.Obj.Created || x.HasHealth != y.HasHealth || x.Health != y.Health {
			return false
		}
	}
	return true
}

// resourceNodes are the nodes listed in status.resources: the children of
// the root, which come right after it.
func (a *App) resourceNodes() []*NodeInfo {
	return resourceNodes(a.Tree, a.parents)
}

func resourceNodes(tree []*NodeInfo, parents []int32) []*NodeInfo {
	if len(tree) == 0 {
		return nil
	}
	end := 1
	for end < len(tree) && parents[end] == 0 {
		end++
	}
	return tree[1:end]
}

// sameTree reports whether two rows' trees hold the same object versions
// with the same parents.
func sameTree(a, b *App) bool {
	return slices.Equal(a.Tree, b.Tree) && slices.Equal(a.parents, b.parents)
}
