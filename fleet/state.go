package fleet

import "time"

// Template is what the pod template of an App's Deployment runs: the
// image tag and the rolling-restart annotation. A change of either makes a
// new ReplicaSet.
type Template struct {
	Tag         string
	RestartedAt string // hanzo.ai/restartedAt, "" when never restarted
}

// The waiting reasons of a container that is not running.
const (
	WaitingCreating    = "ContainerCreating"
	WaitingCrashLoop   = "CrashLoopBackOff"
	WaitingErrPull     = "ErrImagePull"
	WaitingPullBackOff = "ImagePullBackOff"
)

// Pod is the state of one pod: its phase, readiness and the state of its
// main container (a sidecar runs whenever the pod runs).
type Pod struct {
	Name    string
	Created time.Time
	// Age counts the simulator steps since the pod was created.
	Age   int
	Phase string // Pending, Running
	Ready bool
	// Waiting is the main container's waiting reason, "" when it runs.
	Waiting  string
	Restarts int32
	// LastExit is the exit code of the main container's last termination;
	// it is reported when Restarts > 0.
	LastExit int32
	// Started is when the running main container started.
	Started time.Time
	// CrashFor counts the steps of crash loop left; > 0 while crashing.
	CrashFor int
}

// ReplicaSet is one revision of an App's Deployment.
type ReplicaSet struct {
	Revision int64
	Template Template
	Created  time.Time
	Replicas int32
	Pods     []Pod
	// NextPod numbers the next pod this ReplicaSet creates (PodName).
	NextPod int
}

// Upgrade is one entry of the App's status.upgradeHistory.
type Upgrade struct {
	Tag         string
	StartedAt   time.Time
	CompletedAt time.Time // zero while in flight
	Result      string    // Progressing, Succeeded, Failed, Superseded
	Message     string
}

// The results of an Upgrade.
const (
	UpgradeProgressing = "Progressing"
	UpgradeSucceeded   = "Succeeded"
	UpgradeFailed      = "Failed"
	UpgradeSuperseded  = "Superseded"
)

// State is what the operator and the controllers have made of an App at
// one moment. Render turns it into objects.
type State struct {
	// The App's metadata.generation and the generation the operator
	// reconciled last.
	Generation         int64
	ObservedGeneration int64
	// SyncRequest is the value of the sync annotation the operator
	// reconciled last, at SyncedAt.
	SyncRequest string
	SyncedAt    time.Time
	// ReadySince is when the App's Ready condition last changed.
	ReadySince time.Time

	// The Deployment: its generation, what its template runs, its
	// ReplicaSets oldest revision first, and whether the rollout in flight
	// exceeded its progress deadline.
	DeploymentGeneration int64
	Template             Template
	ReplicaSets          []ReplicaSet
	DeadlineExceeded     bool
	// RolloutStarted is when the current ReplicaSet became current.
	RolloutStarted time.Time

	Upgrades []Upgrade
}

// Current returns the ReplicaSet running the Deployment's template, nil when
// there is none yet.
func (s *State) Current() *ReplicaSet {
	for i := len(s.ReplicaSets) - 1; i >= 0; i-- {
		if s.ReplicaSets[i].Template == s.Template {
			return &s.ReplicaSets[i]
		}
	}
	return nil
}

// Revision is the Deployment's revision: the current ReplicaSet's.
func (s *State) Revision() int64 {
	if rs := s.Current(); rs != nil {
		return rs.Revision
	}
	return 0
}

// ReadyPods counts the ready pods over every ReplicaSet.
func (s *State) ReadyPods() int32 {
	var n int32
	for _, rs := range s.ReplicaSets {
		for _, p := range rs.Pods {
			if p.Ready {
				n++
			}
		}
	}
	return n
}

// Clone returns a deep copy.
func (s State) Clone() State {
	c := s
	c.ReplicaSets = make([]ReplicaSet, len(s.ReplicaSets))
	for i, rs := range s.ReplicaSets {
		rs.Pods = append([]Pod(nil), rs.Pods...)
		c.ReplicaSets[i] = rs
	}
	c.Upgrades = append([]Upgrade(nil), s.Upgrades...)
	return c
}

// rolloutTime is how long a rollout took at rest.
const rolloutTime = 2 * time.Minute

// AtRest is the state of an App long after its last rollout: one
// ReplicaSet per release, the newest one scaled to spec.replicas with every
// pod running and ready. The App's fault shows: a crash-looping pod
// (FaultCrashLoop), or a stuck rollout to a tag that cannot be pulled while
// the previous ReplicaSet serves (FaultImagePull).
func AtRest(app App) State {
	st := State{Generation: 1, ObservedGeneration: 1, DeploymentGeneration: 1}
	if app.Kind != KindApp {
		return st
	}
	releases := app.Releases
	if len(releases) == 0 {
		releases = []Release{{Tag: app.Tag, At: app.Created}}
	}
	serving := len(releases) - 1
	if app.Fault == FaultImagePull && serving > 0 {
		serving--
	}
	for i, rel := range releases {
		tpl := Template{Tag: rel.Tag}
		rs := ReplicaSet{Revision: int64(i + 1), Template: tpl, Created: rel.At}
		name := ReplicaSetName(&app, tpl)
		switch {
		case i == serving:
			rs.Replicas = app.Replicas
			for k := range int(app.Replicas) {
				created := rel.At.Add(5 * time.Second)
				rs.Pods = append(rs.Pods, Pod{Name: PodName(name, k), Created: created, Age: 100, Phase: "Running",
					Ready: true, Started: created.Add(5 * time.Second)})
			}
			rs.NextPod = int(app.Replicas)
		case i > serving: // the stuck rollout: one surge pod that cannot pull
			rs.Replicas = 1
			rs.Pods = []Pod{{Name: PodName(name, 0), Created: rel.At.Add(time.Second), Age: 100, Phase: "Pending",
				Waiting: WaitingPullBackOff}}
			rs.NextPod = 1
		}
		st.ReplicaSets = append(st.ReplicaSets, rs)
		up := Upgrade{Tag: rel.Tag, StartedAt: rel.At, CompletedAt: rel.At.Add(rolloutTime), Result: UpgradeSucceeded}
		if i > serving {
			up.CompletedAt, up.Result = time.Time{}, UpgradeFailed
			up.Message = "progress deadline exceeded: " + app.Repository + ":" + rel.Tag + " cannot be pulled"
		}
		st.Upgrades = append(st.Upgrades, up)
	}
	last := releases[len(releases)-1]
	st.Template = Template{Tag: last.Tag}
	st.RolloutStarted = last.At
	st.ReadySince = releases[serving].At.Add(rolloutTime)
	st.DeadlineExceeded = serving < len(releases)-1
	if app.Fault == FaultCrashLoop {
		if rs := st.Current(); rs != nil && len(rs.Pods) > 0 {
			p := &rs.Pods[0]
			p.Ready, p.Waiting, p.Restarts, p.LastExit, p.CrashFor = false, WaitingCrashLoop, 12, 1, CrashSteps
			st.ReadySince = Epoch.Add(-20 * time.Minute)
		}
	}
	return st
}
