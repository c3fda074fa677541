package projection

import (
	"iter"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Snapshot is an immutable view of the projection at one revision. Every
// method is safe for concurrent use; nothing returned may be modified.
type Snapshot struct {
	// Revision is the revision of the last Delta folded in: this process's
	// own count, for ordering and caching within it.
	Revision uint64
	// Position is the clusters' order: per cluster, the newest
	// resourceVersion of every change folded in (0 before the first).
	// Every replica watching the clusters reaches the same positions, so
	// they are what clients see (event ids, a list's
	// metadata.resourceVersion).
	Position Position
	// Base is the store's base revision: revisions at or below it are from
	// before this process started.
	Base uint64

	// namespaces are sorted by namespace. Each is shared, unchanged, by
	// every snapshot from the one that made it until it changes, so a
	// publish copies a pointer for each namespace it did not touch.
	namespaces []*NamespaceRows
	envs       map[string][]int
	cd         []*App // CD Application rows, sorted by key
	cdVersion  uint64 // the revision at which cd last changed
	projects   []Project
	count      int
}

// NamespaceRows are the application rows (operator Apps and static sites)
// of one namespace, sorted by name.
type NamespaceRows struct {
	Namespace string
	Env       string
	// Org is the tenant org of a tenant namespace, "" for a platform one.
	Org  string
	Rows []*App
	// Tenant are the rows the org's members see: those of Rows carrying
	// the org's label. Empty for a platform namespace.
	Tenant []*App
	// Version is the revision at which Rows (and so Tenant) last changed:
	// what was read off them before is still true while it stands.
	Version uint64
}

// Project is an AppProject.
type Project struct {
	Namespace   string
	Name        string
	UID         string
	Created     int64
	Description string
}

func emptySnapshot(cfg Config) *Snapshot {
	return &Snapshot{Revision: cfg.BaseRevision, Base: cfg.BaseRevision, Position: ZeroPosition(cfg.ClusterNames()), envs: map[string][]int{}}
}

// Len is the number of application rows, CD Applications excluded.
func (s *Snapshot) Len() int { return s.count }

// Namespaces returns the namespaces that hold rows, sorted.
func (s *Snapshot) Namespaces() []*NamespaceRows { return s.namespaces }

// Apps iterates every application row, CD Applications excluded, in
// (namespace, name) order.
func (s *Snapshot) Apps() iter.Seq[*App] {
	return func(yield func(*App) bool) {
		for i := range s.namespaces {
			for _, a := range s.namespaces[i].Rows {
				if !yield(a) {
					return
				}
			}
		}
	}
}

// Env iterates the rows of one environment in (namespace, name) order.
func (s *Snapshot) Env(env string) iter.Seq[*App] {
	return func(yield func(*App) bool) {
		for _, i := range s.envs[env] {
			for _, a := range s.namespaces[i].Rows {
				if !yield(a) {
					return
				}
			}
		}
	}
}

// Tenant returns the rows a member of org sees: the rows of namespace
// prefix+org, in every cluster, carrying the label hanzo.ai/org=org,
// sorted. O(log namespaces) with one cluster.
func (s *Snapshot) Tenant(prefix, org string) []*App {
	var own []*App
	if nr := s.TenantNamespace(prefix, org); nr != nil {
		own = nr.Tenant
	}
	others := s.TenantElsewhere(prefix, org)
	if len(others) == 0 {
		return own
	}
	out := slices.Clone(own)
	for i := range others {
		out = append(out, others[i].Tenant...)
	}
	return out
}

// CDApplications returns the CD Application rows, sorted.
func (s *Snapshot) CDApplications() []*App { return s.cd }

// CDVersion is the revision at which the CD Application rows last changed.
func (s *Snapshot) CDVersion() uint64 { return s.cdVersion }

// TenantNamespace returns the namespace rows in the first cluster whose
// Tenant part a member of org sees (see Tenant), or nil.
func (s *Snapshot) TenantNamespace(prefix, org string) *NamespaceRows {
	if org == "" {
		return nil
	}
	if nr := s.namespace(prefix + org); nr != nil && nr.Org == org {
		return nr
	}
	return nil
}

// TenantElsewhere returns the namespace rows of org's namespace in the
// other clusters ("<prefix><org>.<cluster>", clusters.go), in namespace
// order: a part of the snapshot's own, not to be modified. Empty with one
// cluster.
func (s *Snapshot) TenantElsewhere(prefix, org string) []*NamespaceRows {
	if org == "" {
		return nil
	}
	ns := prefix + org + "."
	lo := sort.Search(len(s.namespaces), func(i int) bool { return s.namespaces[i].Namespace >= ns })
	hi := lo
	for hi < len(s.namespaces) && strings.HasPrefix(s.namespaces[hi].Namespace, ns) {
		hi++
	}
	return s.namespaces[lo:hi:hi]
}

// Projects returns the AppProjects, sorted by (namespace, name).
func (s *Snapshot) Projects() []Project { return s.projects }

// Get returns the application row (operator App or site) at namespace/name.
func (s *Snapshot) Get(namespace, name string) *App {
	nr := s.namespace(namespace)
	if nr == nil {
		return nil
	}
	return FindRow(nr.Rows, AppKey{namespace, name})
}

// GetCD returns the CD Application row at namespace/name.
func (s *Snapshot) GetCD(namespace, name string) *App {
	return FindRow(s.cd, AppKey{namespace, name})
}

// Find returns the application rows named name, in namespace order.
func (s *Snapshot) Find(name string) []*App {
	var out []*App
	for i := range s.namespaces {
		if a := FindRow(s.namespaces[i].Rows, AppKey{s.namespaces[i].Namespace, name}); a != nil {
			out = append(out, a)
		}
	}
	return out
}

func (s *Snapshot) namespace(ns string) *NamespaceRows {
	i := sort.Search(len(s.namespaces), func(i int) bool { return s.namespaces[i].Namespace >= ns })
	if i < len(s.namespaces) && s.namespaces[i].Namespace == ns {
		return s.namespaces[i]
	}
	return nil
}

// FindRow returns the row at k in rows sorted by (namespace, name), or nil.
func FindRow(rows []*App, k AppKey) *App {
	i := sort.Search(len(rows), func(i int) bool { return !rows[i].Key().less(k) })
	if i < len(rows) && rows[i].Key() == k {
		return rows[i]
	}
	return nil
}

// publish builds the next snapshot from the current one and the deltas:
// only the namespaces the deltas touch are rebuilt.
func (s *Store) publish(deltas []Delta) {
	prev := s.snap.Load()
	next := &Snapshot{Revision: s.rev, Position: s.pos, Base: prev.Base, cd: prev.cd, cdVersion: prev.cdVersion, projects: prev.projects, envs: prev.envs}

	// The changed keys, grouped by namespace in buffers reused across
	// batches (a namespace without changes keeps an empty one, and none
	// keeps a row past this call).
	changed, handles := s.scratch.byNS, s.scratch.deltaRows
	defer func() {
		for _, ns := range s.scratch.touched {
			l := changed[ns]
			clear(*l)
			*l = (*l)[:0]
		}
		clear(s.scratch.touched)
		s.scratch.touched = s.scratch.touched[:0]
		clear(handles)
		s.scratch.deltaRows = handles[:0]
	}()
	var cdChanged []AppKey
	rowsChanged := false
	for i, d := range deltas {
		if d.Row == RowCD {
			cdChanged = append(cdChanged, d.Key)
			continue
		}
		// The row now shown at the key: an App's new version, else (an App
		// gone, or a site) whichever row the store holds there.
		cur, pos := d.New, int32(-1)
		var l *[]rowChange
		if d.Row == RowApp && cur != nil && i < len(handles) {
			pos, l = handles[i].pos, handles[i].changes
		} else {
			if d.Row != RowApp || cur == nil {
				cur = s.row(d.Key)
			}
			l = s.changesIn(d.Key.Namespace)
		}
		if len(*l) == 0 {
			s.scratch.touched = append(s.scratch.touched, d.Key.Namespace)
		}
		*l = append(*l, rowChange{d.Key, cur, pos})
		rowsChanged = true
	}
	if rowsChanged {
		var same bool
		next.namespaces, same = s.mergeNamespaces(prev.namespaces, changed, s.scratch.touched)
		if next.envs = prev.envs; !same || next.envs == nil {
			// Each namespace's environment is its own: with the same
			// namespaces in the same places, the index stands.
			next.envs = envIndex(next.namespaces)
		}
	} else {
		next.namespaces = prev.namespaces
	}
	for i := range next.namespaces {
		next.count += len(next.namespaces[i].Rows)
	}
	if len(cdChanged) > 0 {
		next.cd = mergeRows(prev.cd, cdChanged, func(k AppKey) *App { return s.cds[k] })
		next.cdVersion = s.rev
	}
	if s.projects {
		next.projects = s.projectList()
		s.projects = false
	}
	s.snap.Store(next)
}

// row is the published row at k: the operator App, else the site.
func (s *Store) row(k AppKey) *App {
	if a := s.app(k); a != nil {
		return a
	}
	return s.sites[k]
}

// rowChange is a key whose row changed, the row now shown there (nil for
// none), and, for an App's new version, the position its handle records
// (-1: none, or unknown).
type rowChange struct {
	key AppKey
	row *App
	pos int32
}

// mergeNamespaces is prev with the namespaces touched (their changes in
// changed) rebuilt; it sorts touched.
func (s *Store) mergeNamespaces(prev []*NamespaceRows, changed map[string]*[]rowChange, touched []string) (out []*NamespaceRows, same bool) {
	out = make([]*NamespaceRows, 0, len(prev)+len(touched))
	same = true // no namespace came or went
	names := touched
	slices.Sort(names)
	i, j := 0, 0
	for i < len(prev) || j < len(names) {
		switch {
		case j == len(names) || (i < len(prev) && prev[i].Namespace < names[j]):
			out = append(out, prev[i])
			i++
		default:
			ns := names[j]
			var old *NamespaceRows
			if i < len(prev) && prev[i].Namespace == ns {
				old = prev[i]
				i++
			}
			j++
			if nr := s.replaceRows(old, *changed[ns]); nr != nil {
				out = append(out, nr)
				continue
			}
			var oldRows []*App
			if old != nil {
				oldRows = old.Rows
			}
			keys := make([]AppKey, len(*changed[ns]))
			for i, c := range *changed[ns] {
				keys[i] = c.key
			}
			rows := mergeRows(oldRows, keys, s.row)
			s.indexRows(ns, rows)
			if len(rows) == 0 {
				same = false // gone
				continue
			}
			same = same && old != nil
			env, org, _ := s.cfg.Env(ns)
			out = append(out, &NamespaceRows{Namespace: ns, Env: env, Org: org, Rows: rows, Tenant: tenantRows(rows, org), Version: s.rev})
		}
	}
	return out, same
}

// replaceRows is the common case of a namespace's changes: rows replaced
// by new versions of themselves, none added or removed. The rows are copied
// and the changed ones put in place by their known positions, without
// searching or reading the others; the tenant index is redone only if an
// org label moved. It returns nil when the changes are not all of that case.
func (s *Store) replaceRows(old *NamespaceRows, changed []rowChange) *NamespaceRows {
	if old == nil {
		return nil
	}
	sites := s.sitePos[old.Namespace]
	allOrg := old.Org != "" && len(old.Tenant) == len(old.Rows)
	rows := slices.Clone(old.Rows)
	for _, c := range changed {
		p, had := int(c.pos), c.pos >= 0
		if !had {
			p, had = sites[c.key.Name]
		}
		a := c.row
		if !had || a == nil {
			return nil
		}
		rows[p] = a
		allOrg = allOrg && a.Org == old.Org
	}
	nr := *old
	nr.Rows, nr.Version = rows, s.rev
	switch {
	case old.Org == "":
		nr.Tenant = nil
	case allOrg:
		nr.Tenant = rows
	default:
		nr.Tenant = tenantRows(rows, old.Org)
	}
	return &nr
}

// indexRows records where each row of a namespace sits: an App row's
// position in its handle, a site's in sitePos.
func (s *Store) indexRows(ns string, rows []*App) {
	var sites map[string]int
	for i, a := range rows {
		if a.Row == RowApp {
			if r := s.rows[a.Key()]; r != nil {
				r.pos = int32(i)
			}
			continue
		}
		if sites == nil {
			sites = make(map[string]int)
		}
		sites[a.Name] = i
	}
	if sites == nil {
		delete(s.sitePos, ns)
	} else {
		s.sitePos[ns] = sites
	}
}

// mergeRows returns a new sorted slice: old with the rows at the changed keys
// replaced by current(k), removed where current(k) is nil. Unchanged runs
// are block-copied; only the changed keys are searched.
func mergeRows(old []*App, changed []AppKey, current func(AppKey) *App) []*App {
	slices.SortFunc(changed, compareKeys)
	out := make([]*App, 0, len(old)+len(changed))
	i := 0
	for j, k := range changed {
		if j > 0 && changed[j-1] == k {
			continue
		}
		at := i + sort.Search(len(old)-i, func(x int) bool { return !old[i+x].Key().less(k) })
		out = append(out, old[i:at]...)
		i = at
		if i < len(old) && old[i].Key() == k {
			i++
		}
		if a := current(k); a != nil {
			out = append(out, a)
		}
	}
	return append(out, old[i:]...)
}

func tenantRows(rows []*App, org string) []*App {
	if org == "" {
		return nil
	}
	all := true
	for _, a := range rows {
		if a.Org != org {
			all = false
			break
		}
	}
	if all {
		return rows
	}
	var out []*App
	for _, a := range rows {
		if a.Org == org {
			out = append(out, a)
		}
	}
	return out
}

func envIndex(nss []*NamespaceRows) map[string][]int {
	m := map[string][]int{}
	for i := range nss {
		m[nss[i].Env] = append(m[nss[i].Env], i)
	}
	return m
}

func (s *Store) projectList() []Project {
	out := make([]Project, 0, len(s.projectObjs))
	for k := range s.projectObjs {
		e := s.objects[k]
		if e == nil {
			continue
		}
		o := e.info.Obj
		out = append(out, Project{Namespace: o.Namespace, Name: o.Name, UID: o.UID, Created: o.Created})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func compareKeys(a, b AppKey) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// Encode encodes the Application of every row not yet encoded (what
// ApplicationJSON returns, kept with the row version), over workers
// goroutines, and returns how many it encoded. Run once, when the fleet is
// first ready, it takes the cost of the first full list out of a request:
// every row encoded, at 50,000 rows about a CPU-second and 500 MB of
// garbage, which the collection that settles the start then takes back.
func (s *Snapshot) Encode(workers int) int {
	var todo []*App
	for a := range s.Apps() {
		if a.argo.p.Load() == nil {
			todo = append(todo, a)
		}
	}
	for _, a := range s.cd {
		if a.argo.p.Load() == nil {
			todo = append(todo, a)
		}
	}
	workers = max(1, min(workers, len(todo)))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(todo); i += workers {
				todo[i].ApplicationJSON()
			}
		})
	}
	wg.Wait()
	return len(todo)
}
