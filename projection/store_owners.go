package projection

// uidKey is an object's UID in its namespace (Store.byUID).
type uidKey struct{ namespace, uid string }

// owner returns the held object an owner reference names, in the object's
// namespace.
func (s *Store) owner(o *Object, ow OwnerRef) *entry {
	if ow.UID == "" {
		return nil
	}
	return s.byUID[uidKey{o.Namespace, ow.UID}]
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
		s.byUID[uidKey{key.Namespace, o.UID}] = e
	}
	if prev == nil || !sameOwners(prev.Owners, o.Owners) {
		for _, ow := range o.Owners {
			if ow.UID != "" {
				ck := uidKey{key.Namespace, ow.UID}
				s.children[ck] = append(s.children[ck], e)
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
		for _, ce := range s.children[uidKey{key.Namespace, o.UID}] {
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
	if k := (uidKey{key.Namespace, o.UID}); !sameUID && o.UID != "" && s.byUID[k] == e {
		delete(s.byUID, k)
	}
	if next == nil || !sameOwners(o.Owners, next.Owners) {
		for _, ow := range o.Owners {
			if ow.UID == "" {
				continue
			}
			ck := uidKey{key.Namespace, ow.UID}
			if list := removeEntry(s.children[ck], e); len(list) == 0 {
				delete(s.children, ck)
			} else {
				s.children[ck] = list
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
		for _, ce := range s.children[uidKey{key.Namespace, o.UID}] {
			if ce.key.Kind == KindPod {
				s.pods.refresh(s, ce)
			}
		}
	}
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
