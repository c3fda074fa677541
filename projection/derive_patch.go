package projection

import "slices"

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
