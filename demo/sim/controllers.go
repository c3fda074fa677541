package sim

import (
	"sort"
	"time"

	"github.com/hanzoai/deploy/fleet"
)

// advance lets the kubelet, the operator, the Deployment controller and
// the ReplicaSet controller act on one App, in that order.
func (s *Simulator) advance(a *appSim, now time.Time) {
	wasReady := a.st.ReadyPods() >= a.app.Replicas
	s.kubelet(a, now)
	s.operator(a, now)
	s.deploymentController(a, now)
	s.replicaSetController(a, now)

	if fleet.RolloutComplete(&a.app, &a.st) {
		a.st.DeadlineExceeded = false
		if n := len(a.st.Upgrades); n > 0 && a.st.Upgrades[n-1].Result == fleet.UpgradeProgressing {
			u := &a.st.Upgrades[n-1]
			u.Result, u.CompletedAt = fleet.UpgradeSucceeded, now
			s.log.Info("rollout complete", "namespace", a.app.Namespace, "app", a.app.Name, "tag", u.Tag, "step", s.step)
		}
	} else if !a.st.DeadlineExceeded && s.step-a.rolloutStep >= s.opts.DeadlineSteps {
		a.st.DeadlineExceeded = true
		if n := len(a.st.Upgrades); n > 0 && a.st.Upgrades[n-1].Result == fleet.UpgradeProgressing {
			u := &a.st.Upgrades[n-1]
			u.Result, u.Message = fleet.UpgradeFailed, "progress deadline exceeded"
		}
		s.log.Info("rollout exceeded its progress deadline", "namespace", a.app.Namespace, "app", a.app.Name)
	}
	if ready := a.st.ReadyPods() >= a.app.Replicas; ready != wasReady {
		a.st.ReadySince = now
	}
}

// kubelet moves each pod one step along: Pending (ContainerCreating), then
// Running, then Ready; an image that cannot be pulled stays Pending
// (ErrImagePull, then ImagePullBackOff); a crash-looping pod restarts every
// step until its crash loop is over.
func (s *Simulator) kubelet(a *appSim, now time.Time) {
	crashing := false
	for i := range a.st.ReplicaSets {
		rs := &a.st.ReplicaSets[i]
		badImage := s.bad[a.app.Repository+":"+rs.Template.Tag]
		for j := range rs.Pods {
			p := &rs.Pods[j]
			p.Age++
			switch {
			case badImage:
				p.Phase, p.Ready = "Pending", false
				if p.Age >= 2 {
					p.Waiting = fleet.WaitingPullBackOff
				} else {
					p.Waiting = fleet.WaitingErrPull
				}
			case p.CrashFor > 0:
				p.CrashFor--
				if p.CrashFor > 0 {
					p.Phase, p.Ready, p.Waiting, p.LastExit = "Running", false, fleet.WaitingCrashLoop, 1
					p.Restarts++
					crashing = true
				} else {
					p.Phase, p.Ready, p.Waiting, p.Started = "Running", true, "", now
					s.log.Info("crash loop over", "namespace", a.app.Namespace, "pod", p.Name, "restarts", p.Restarts)
				}
			case p.Phase != "Running":
				p.Phase, p.Waiting, p.Started = "Running", "", now
			case !p.Ready && p.Waiting == "":
				p.Ready = true
			}
		}
	}
	if a.app.Fault != fleet.FaultCrashLoop || s.opts.CrashEvery <= 0 {
		return
	}
	if crashing {
		a.quiet = 0
		return
	}
	if a.quiet++; a.quiet < s.opts.CrashEvery {
		return
	}
	if rs := a.st.Current(); rs != nil {
		for j := range rs.Pods {
			if p := &rs.Pods[j]; p.Ready {
				p.Ready, p.Waiting, p.LastExit, p.CrashFor = false, fleet.WaitingCrashLoop, 1, fleet.CrashSteps
				p.Restarts++
				a.quiet = 0
				s.log.Info("crash loop started", "namespace", a.app.Namespace, "pod", p.Name)
				return
			}
		}
	}
}

// operator reconciles the App: a new generation (spec changed) is
// observed and its tag written to the Deployment's pod template; a new
// sync request is recorded as reconciled.
func (s *Simulator) operator(a *appSim, now time.Time) {
	l := a.live
	if l.generation != a.st.ObservedGeneration || a.st.Template.Tag == "" {
		a.st.Generation = l.generation
		a.app.Tag, a.app.Replicas = l.tag, l.replicas
		if a.st.Template.Tag != a.app.Tag {
			if n := len(a.st.Upgrades); n > 0 && a.st.Upgrades[n-1].Result == fleet.UpgradeProgressing {
				a.st.Upgrades[n-1].Result, a.st.Upgrades[n-1].CompletedAt = fleet.UpgradeSuperseded, now
			}
			a.st.Upgrades = append(a.st.Upgrades, fleet.Upgrade{Tag: a.app.Tag, StartedAt: now, Result: fleet.UpgradeProgressing})
			if n := len(a.st.Upgrades); n > upgradeHistoryLimit {
				a.st.Upgrades = append([]fleet.Upgrade(nil), a.st.Upgrades[n-upgradeHistoryLimit:]...)
			}
			s.log.Info("rolling out", "namespace", a.app.Namespace, "app", a.app.Name, "from", a.st.Template.Tag, "to", a.app.Tag, "step", s.step)
			a.st.Template.Tag = a.app.Tag
		}
		a.st.ObservedGeneration = l.generation
	}
	if l.sync != "" && l.sync != a.st.SyncRequest {
		a.st.SyncRequest, a.st.SyncedAt = l.sync, now
		a.st.ObservedGeneration = l.generation
		s.log.Info("sync request reconciled", "namespace", a.app.Namespace, "app", a.app.Name, "requestedAt", l.sync)
	}
}

// deploymentController makes the ReplicaSet of the current pod template
// the newest revision (a new one, or an old one with the same template, as
// after a rollback) and scales the ReplicaSets as a rolling update with
// Kubernetes' default surge (25% up) and unavailability (25% down).
func (s *Simulator) deploymentController(a *appSim, now time.Time) {
	st := &a.st
	if l := a.live.restartedAt; l != st.Template.RestartedAt {
		st.Template.RestartedAt = l
		s.log.Info("rolling restart", "namespace", a.app.Namespace, "app", a.app.Name, "restartedAt", l)
	}
	var maxRev int64
	cur := -1
	for i, rs := range st.ReplicaSets {
		maxRev = max(maxRev, rs.Revision)
		if rs.Template == st.Template {
			cur = i
		}
	}
	switch {
	case cur < 0:
		st.ReplicaSets = append(st.ReplicaSets, fleet.ReplicaSet{Revision: maxRev + 1, Template: st.Template, Created: now})
		cur = len(st.ReplicaSets) - 1
		s.startRollout(a, now)
	case st.ReplicaSets[cur].Revision != maxRev:
		st.ReplicaSets[cur].Revision = maxRev + 1
		s.startRollout(a, now)
	}
	newRS := &st.ReplicaSets[cur]
	desired := a.app.Replicas
	var newReady int32
	for _, p := range newRS.Pods {
		if p.Ready {
			newReady++
		}
	}
	oldTarget := max(0, desired-fleet.MaxUnavailable(desired)-newReady)
	var oldTotal int32
	for i := range st.ReplicaSets {
		if i != cur {
			oldTotal += st.ReplicaSets[i].Replicas
		}
	}
	excess := oldTotal - oldTarget
	for i := range st.ReplicaSets { // the oldest revisions go first
		if rs := &st.ReplicaSets[i]; i != cur && excess > 0 && rs.Replicas > 0 {
			cut := min(rs.Replicas, excess)
			rs.Replicas -= cut
			excess -= cut
			oldTotal -= cut
		}
	}
	newRS.Replicas = max(0, min(desired, desired+fleet.MaxSurge(desired)-oldTotal))
	sort.SliceStable(st.ReplicaSets, func(i, j int) bool { return st.ReplicaSets[i].Revision < st.ReplicaSets[j].Revision })

	// revisionHistoryLimit: old ReplicaSets scaled to zero beyond the limit
	// go, oldest first.
	idle := 0
	for _, rs := range st.ReplicaSets {
		if rs.Template != st.Template && rs.Replicas == 0 && len(rs.Pods) == 0 {
			idle++
		}
	}
	for i := 0; idle > revisionHistoryLimit && i < len(st.ReplicaSets); {
		if rs := st.ReplicaSets[i]; rs.Template != st.Template && rs.Replicas == 0 && len(rs.Pods) == 0 {
			st.ReplicaSets = append(st.ReplicaSets[:i], st.ReplicaSets[i+1:]...)
			idle--
			continue
		}
		i++
	}
}

// revisionHistoryLimit is how many old ReplicaSets a Deployment keeps, as
// Kubernetes' default; upgradeHistoryLimit how many upgrades the operator
// keeps in an App's status.
const (
	revisionHistoryLimit = 10
	upgradeHistoryLimit  = 10
)

func (s *Simulator) startRollout(a *appSim, now time.Time) {
	a.st.RolloutStarted, a.st.DeadlineExceeded, a.rolloutStep = now, false, s.step
	a.st.DeploymentGeneration++
}

// replicaSetController creates and deletes pods until each ReplicaSet has
// as many as it wants; it deletes pods that are not ready first, then the
// youngest.
func (s *Simulator) replicaSetController(a *appSim, now time.Time) {
	for i := range a.st.ReplicaSets {
		rs := &a.st.ReplicaSets[i]
		name := fleet.ReplicaSetName(&a.app, rs.Template)
		for int32(len(rs.Pods)) < rs.Replicas {
			rs.Pods = append(rs.Pods, fleet.Pod{Name: fleet.PodName(name, rs.NextPod), Created: now, Phase: "Pending",
				Waiting: fleet.WaitingCreating})
			rs.NextPod++
		}
		for int32(len(rs.Pods)) > rs.Replicas {
			victim := 0
			for j, p := range rs.Pods {
				v := rs.Pods[victim]
				if (!p.Ready && v.Ready) || (p.Ready == v.Ready && p.Age <= v.Age) {
					victim = j
				}
			}
			rs.Pods = append(rs.Pods[:victim], rs.Pods[victim+1:]...)
		}
	}
}
