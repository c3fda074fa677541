package projection

import "slices"

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
				nu.Removed = s.pos.Of(s.clusterIndex(nu.Namespace))
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
