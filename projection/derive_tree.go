package projection

import (
	"slices"
	"strings"
)

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
		for _, ce := range s.children[uidKey{ns, ao.UID}] {
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
	for _, ce := range s.children[uidKey{owner.key.Namespace, uid}] {
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

// depth1Kinds are the kinds an App renders directly, in tree order.
var depth1Kinds = [...]Kind{KindDeployment, KindStatefulSet, KindService, KindConfigMap, KindIngress, KindHPA, KindPDB}
