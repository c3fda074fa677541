package fleet

import "time"

// Epoch is the moment a generated fleet describes: every time in it is at or
// before Epoch. Shift moves a fleet to another moment.
var Epoch = time.Date(2026, time.November, 20, 12, 0, 0, 0, time.UTC)

// Kind says what an App of the fleet is rendered as.
type Kind uint8

// The kinds of fleet entries.
const (
	// KindApp is a hanzo.ai/v1 App with everything the operator and the
	// controllers render for it.
	KindApp Kind = iota
	// KindSite is a static site: a Middleware serving static files and the
	// IngressRoute that routes a host to it.
	KindSite
	// KindCD is a CD Application (apps.hanzo.ai/v1alpha1).
	KindCD
	// KindProject is an AppProject (argoproj.io/v1alpha1).
	KindProject
)

func (k Kind) String() string {
	switch k {
	case KindApp:
		return "App"
	case KindSite:
		return "Site"
	case KindCD:
		return "Application"
	case KindProject:
		return "AppProject"
	}
	return "Unknown"
}

// Fault is a trouble an App is generated with.
type Fault uint8

// The faults.
const (
	FaultNone Fault = iota
	// FaultCrashLoop: one pod of the current ReplicaSet crash-loops
	// (CrashLoopBackOff, restarts growing) for CrashSteps steps of the
	// simulator, then recovers.
	FaultCrashLoop
	// FaultImagePull: the declared tag cannot be pulled. The rollout to it
	// is stuck (ImagePullBackOff, progress deadline exceeded) while the
	// previous ReplicaSet keeps serving; rolling back to an earlier tag
	// repairs it.
	FaultImagePull
)

func (f Fault) String() string {
	switch f {
	case FaultCrashLoop:
		return "crash-loop"
	case FaultImagePull:
		return "image-pull"
	}
	return "none"
}

// CrashSteps is how many simulator steps a generated crash loop lasts.
const CrashSteps = 6

// Release is one rollout of an App: the tag it declared and when.
type Release struct {
	Tag string
	At  time.Time
}

// Autoscale is an App's HorizontalPodAutoscaler range.
type Autoscale struct {
	Min, Max int32
}

// App is one entry of a generated fleet. Most fields only mean something
// for one Kind; the comment of each says which.
type App struct {
	Kind      Kind
	Namespace string
	Name      string
	// Org is the tenant (label hanzo.ai/org); "" in platform namespaces.
	Org string
	// Project is the app.kubernetes.io/part-of label (App) or the
	// Application's project (CD).
	Project string
	Created time.Time

	// App: what the App declares.
	Role       string // service, web, worker
	Repository string
	Tag        string // spec.image.tag, the declared version
	// Releases are the rollouts the App went through, oldest first; the last
	// one is the rollout to Tag.
	Releases []Release
	Replicas int32
	Port     int32
	// Hosts are the ingress hosts (App), or the routed host (Site).
	Hosts        []string
	TLS          bool
	LoadBalancer bool   // the Service is of type LoadBalancer
	Sidecar      string // image of a second container, "" for none
	Autoscale    *Autoscale
	PDB          bool // a PodDisruptionBudget (minAvailable 1)
	Fault        Fault

	// Site: the folder the static files are served from.
	Root string

	// CD: the Application's source and reported status.
	RepoURL        string
	Path           string
	TargetRevision string
	SyncStatus     string
	HealthStatus   string

	// Project: the AppProject's description.
	Description string
}

// Image is the App's declared image, repository:tag.
func (a *App) Image() string { return a.Repository + ":" + a.Tag }

// Clone returns a deep copy.
func (a App) Clone() App {
	c := a
	c.Releases = append([]Release(nil), a.Releases...)
	c.Hosts = append([]string(nil), a.Hosts...)
	if a.Autoscale != nil {
		as := *a.Autoscale
		c.Autoscale = &as
	}
	return c
}

// Shift returns a copy of the fleet with every time moved by d, e.g.
// Shift(apps, time.Since(Epoch)) to make a generated fleet current.
func Shift(apps []App, d time.Duration) []App {
	out := make([]App, len(apps))
	for i, a := range apps {
		c := a.Clone()
		c.Created = c.Created.Add(d)
		for j := range c.Releases {
			c.Releases[j].At = c.Releases[j].At.Add(d)
		}
		out[i] = c
	}
	return out
}
