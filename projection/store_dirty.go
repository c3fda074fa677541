package projection

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
		for _, ce := range s.children[uidKey{e.key.Namespace, o.UID}] {
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
