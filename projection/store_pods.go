package projection

import "sort"

// podIndex finds the Pods a Deployment selects when no owner of theirs is
// held (a Pod listed before its ReplicaSet, or a bare Pod), and the
// Deployments selecting such a Pod, without scanning a namespace.
//
// Deployments are indexed by an anchor: the first pair of their matchLabels.
// Orphan Pods are indexed by every label they carry. A Deployment selecting
// by expressions only is kept in a per-namespace list and matched against
// the namespace's orphans; such selectors are rare.
type podIndex struct {
	depByAnchor   map[anchor][]*entry
	depNoAnchor   map[string][]*entry
	orphans       map[ObjectKey]orphan
	orphanByLabel map[anchor]map[ObjectKey]struct{}
	orphansByNS   map[string]map[ObjectKey]struct{}
}

type orphan struct {
	e      *entry
	labels Labels // the labels it was indexed under
}

type anchor struct{ ns, key, value string }

func newPodIndex() podIndex {
	return podIndex{
		depByAnchor:   make(map[anchor][]*entry),
		depNoAnchor:   make(map[string][]*entry),
		orphans:       make(map[ObjectKey]orphan),
		orphanByLabel: make(map[anchor]map[ObjectKey]struct{}),
		orphansByNS:   make(map[string]map[ObjectKey]struct{}),
	}
}

func deploymentSelector(o *Object) Selector {
	if w, ok := o.Spec.(*WorkloadSpec); ok {
		return w.Selector
	}
	return Selector{}
}

func (x *podIndex) addDeployment(e *entry) {
	sel := deploymentSelector(e.info.Obj)
	switch {
	case sel.Invalid || sel.Empty():
	case len(sel.MatchLabels) > 0:
		a := anchor{e.key.Namespace, sel.MatchLabels[0].Key, sel.MatchLabels[0].Value}
		x.depByAnchor[a] = append(x.depByAnchor[a], e)
	default:
		x.depNoAnchor[e.key.Namespace] = append(x.depNoAnchor[e.key.Namespace], e)
	}
}

func (x *podIndex) removeDeployment(e *entry) {
	sel := deploymentSelector(e.info.Obj)
	switch {
	case sel.Invalid || sel.Empty():
	case len(sel.MatchLabels) > 0:
		a := anchor{e.key.Namespace, sel.MatchLabels[0].Key, sel.MatchLabels[0].Value}
		if l := removeEntry(x.depByAnchor[a], e); len(l) == 0 {
			delete(x.depByAnchor, a)
		} else {
			x.depByAnchor[a] = l
		}
	default:
		if l := removeEntry(x.depNoAnchor[e.key.Namespace], e); len(l) == 0 {
			delete(x.depNoAnchor, e.key.Namespace)
		} else {
			x.depNoAnchor[e.key.Namespace] = l
		}
	}
}

// addPod records a pod as an orphan when none of its owners is held.
func (x *podIndex) addPod(s *Store, e *entry) {
	if !s.hasPresentOwner(e.info.Obj) {
		x.addOrphan(e)
	}
}

// refresh re-evaluates whether a held pod is an orphan, after one of its
// owners arrived or left.
func (x *podIndex) refresh(s *Store, e *entry) {
	if s.hasPresentOwner(e.info.Obj) {
		x.removeOrphan(e.key)
	} else if _, ok := x.orphans[e.key]; !ok {
		x.addOrphan(e)
	}
}

func (x *podIndex) addOrphan(e *entry) {
	key, labels := e.key, e.info.Obj.Labels
	x.orphans[key] = orphan{e, labels}
	for _, l := range labels {
		a := anchor{key.Namespace, l.Key, l.Value}
		set := x.orphanByLabel[a]
		if set == nil {
			set = make(map[ObjectKey]struct{}, 1)
			x.orphanByLabel[a] = set
		}
		set[key] = struct{}{}
	}
	set := x.orphansByNS[key.Namespace]
	if set == nil {
		set = make(map[ObjectKey]struct{})
		x.orphansByNS[key.Namespace] = set
	}
	set[key] = struct{}{}
}

func (x *podIndex) removeOrphan(key ObjectKey) {
	o, ok := x.orphans[key]
	if !ok {
		return
	}
	delete(x.orphans, key)
	for _, l := range o.labels {
		a := anchor{key.Namespace, l.Key, l.Value}
		if set := x.orphanByLabel[a]; set != nil {
			delete(set, key)
			if len(set) == 0 {
				delete(x.orphanByLabel, a)
			}
		}
	}
	if set := x.orphansByNS[key.Namespace]; set != nil {
		delete(set, key)
		if len(set) == 0 {
			delete(x.orphansByNS, key.Namespace)
		}
	}
}

// selectingDeployments returns the held Deployments of ns whose selector
// matches the labels, sorted by name.
func (x *podIndex) selectingDeployments(s *Store, ns string, labels Labels) []*entry {
	var out []*entry
	check := func(list []*entry) {
		for _, de := range list {
			if deploymentSelector(de.info.Obj).Matches(labels) {
				out = append(out, de)
			}
		}
	}
	for _, l := range labels {
		check(x.depByAnchor[anchor{ns, l.Key, l.Value}])
	}
	check(x.depNoAnchor[ns])
	sort.Slice(out, func(i, j int) bool { return out[i].key.Name < out[j].key.Name })
	return out
}

// selectedOrphans returns the orphan pods a Deployment's selector matches,
// sorted by name.
func (x *podIndex) selectedOrphans(ns string, sel Selector) []*entry {
	if sel.Invalid || sel.Empty() {
		return nil
	}
	var cands map[ObjectKey]struct{}
	if len(sel.MatchLabels) > 0 {
		cands = x.orphanByLabel[anchor{ns, sel.MatchLabels[0].Key, sel.MatchLabels[0].Value}]
	} else {
		cands = x.orphansByNS[ns]
	}
	if len(cands) == 0 {
		return nil
	}
	var out []*entry
	for k := range cands {
		if o := x.orphans[k]; sel.Matches(o.e.info.Obj.Labels) {
			out = append(out, o.e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key.Name < out[j].key.Name })
	return out
}
