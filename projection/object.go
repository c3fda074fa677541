package projection

// Object is the compact, typed summary of one cluster object: exactly what
// the fold needs, nothing of the rest (no managedFields, no last-applied
// configuration, no Secret data — Secrets are not even a kind). The live
// manifest is fetched on demand by the cluster package, never kept here.
//
// An Object handed to Apply is owned by the Store from then on: the caller
// must not modify it.
type Object struct {
	Kind            Kind
	Namespace       string
	Name            string
	UID             string
	ResourceVersion string
	Generation      int64
	Created         int64 // creationTimestamp, Unix seconds
	Deleting        bool  // deletionTimestamp is set
	Labels          Labels
	Owners          []OwnerRef

	// Spec is the kind-specific part: *AppSpec, *WorkloadSpec, *PodSpec,
	// *ServiceSpec, *IngressSpec, *HPASpec, *PVCSpec, *JobSpec,
	// *MiddlewareSpec, *IngressRouteSpec, *CDApplicationSpec, or nil for
	// kinds that carry nothing beyond metadata (ConfigMap, PDB, AppProject).
	Spec any
}

// ObjectKey identifies an object within the store.
type ObjectKey struct {
	Kind      Kind
	Namespace string
	Name      string
}

// Key returns the object's key.
func (o *Object) Key() ObjectKey { return ObjectKey{o.Kind, o.Namespace, o.Name} }

// Ref returns the object's ref token, group:kind:namespace:name.
func (o *Object) Ref() string { return RefToken(o.Kind, o.Namespace, o.Name) }

// RefToken builds the ref token of a tree node: group:kind:namespace:name,
// with an empty group for the core group (":Service:hanzo:iam").
func RefToken(k Kind, namespace, name string) string {
	ki := k.Info()
	return ki.Group + ":" + ki.Name + ":" + namespace + ":" + name
}

// OwnerRef is one metadata.ownerReferences entry.
type OwnerRef struct {
	Kind       string // Kubernetes kind name, e.g. "ReplicaSet"
	Name       string
	UID        string
	Controller bool
}

// Condition is one status condition.
type Condition struct {
	Type    string
	Status  string
	Reason  string
	Message string
}

func findCondition(conds []Condition, typ string) *Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// Container is one container of a pod template or pod spec.
type Container struct {
	Name  string
	Image string
}

// AppSpec is the summary of a hanzo.ai/v1 App.
type AppSpec struct {
	Repository string
	Tag        string // the declared version; may be digest-pinned v1.2.3@sha256:…
	PullPolicy string
	Replicas   int32 // spec.replicas, 1 when absent
	Role       string
	Ingress    AppIngress
	// SyncRequestedAt and SyncRequestedBy are the
	// gitops.hanzo.ai/sync-requested-at and -by annotations (-by-name, the
	// display name beside the subject, when present).
	SyncRequestedAt string
	SyncRequestedBy string
	// Engine is what the engine wrote on the App when it applied it; nil
	// for an App the engine does not manage.
	Engine *EngineMark

	HasStatus          bool
	Phase              string
	ReadyReplicas      int32
	AvailableReplicas  int32
	ObservedGeneration int64
	Ready              *Condition
	Endpoints          []string
	LastGoodImage      string
	UpgradeHistory     []Upgrade
}

// AppIngress is spec.ingress of an App.
type AppIngress struct {
	Enabled bool
	Hosts   []string
	TLS     bool
}

// Upgrade is one status.upgradeHistory entry written by the operator.
type Upgrade struct {
	Tag         string
	Image       string
	StartedAt   int64 // Unix seconds, 0 when absent
	CompletedAt int64
	Result      string
	Message     string
}

// WorkloadSpec summarizes a Deployment, StatefulSet, ReplicaSet or DaemonSet.
type WorkloadSpec struct {
	Replicas    *int32 // spec.replicas as written (nil when absent)
	Paused      bool
	Selector    Selector
	Containers  []Container // of the pod template
	Revision    string      // deployment.kubernetes.io/revision
	RevisionID  int64       // Revision as a number, 0 when absent or not one
	RestartedAt string      // hanzo.ai/restartedAt of the pod template

	// StatefulSet and DaemonSet update strategy.
	UpdateStrategy string // RollingUpdate, OnDelete
	RollingUpdate  bool   // spec.updateStrategy.rollingUpdate is present
	Partition      *int32

	ObservedGeneration int64
	StatusReplicas     int32
	UpdatedReplicas    int32
	ReadyReplicas      int32
	AvailableReplicas  int32
	CurrentReplicas    int32
	CurrentRevision    string
	UpdateRevision     string
	Conditions         []Condition

	// DaemonSet status.
	DesiredNumberScheduled int32
	UpdatedNumberScheduled int32
	NumberAvailable        int32
}

// PodSpec summarizes a Pod.
type PodSpec struct {
	RestartPolicy string // Always when absent
	NodeName      string
	Containers    []Container
	Phase         string
	Message       string
	Ready         bool  // the Ready condition is True
	StartTime     int64 // Unix seconds
	InitStatuses  []ContainerStatus
	Statuses      []ContainerStatus
	PodIP         string
}

// ContainerStatus is the part of a container status health rules read.
type ContainerStatus struct {
	Name         string
	Image        string
	Ready        bool
	RestartCount int32
	// State: exactly one of waiting, running, terminated (or none).
	WaitingReason  string
	WaitingMessage string
	Waiting        bool
	Running        bool
	Terminated     *Terminated
	// LastTerminated is lastState.terminated.
	LastTerminated *Terminated
}

// Terminated is a container's terminated state.
type Terminated struct {
	Reason   string
	Message  string
	ExitCode int32
}

// ServiceSpec summarizes a Service.
type ServiceSpec struct {
	Type     string
	Selector Labels // spec.selector: the pods it sends traffic to
	// LoadBalancer is status.loadBalancer.ingress: each entry's hostname,
	// else its IP.
	LoadBalancer []string
}

// IngressSpec summarizes an Ingress.
type IngressSpec struct {
	Hosts        []string
	TLS          bool
	Services     []string // the backend Services its rules and default backend name, once each
	LoadBalancer []string // as ServiceSpec's
}

// HPASpec summarizes a HorizontalPodAutoscaler.
type HPASpec struct {
	Conditions []Condition
}

// PVCSpec summarizes a PersistentVolumeClaim.
type PVCSpec struct {
	Phase string
}

// JobSpec summarizes a Job.
type JobSpec struct {
	Conditions []Condition
}

// MiddlewareSpec summarizes a hanzo.ai Middleware.
type MiddlewareSpec struct {
	StaticRoot string // spec.staticFiles.root; empty when not a static site
}

// IngressRouteSpec summarizes a hanzo.ai IngressRoute.
type IngressRouteSpec struct {
	Routes []Route
}

// Route is one spec.routes entry of an IngressRoute.
type Route struct {
	Match       string
	Middlewares []MiddlewareRef
}

// MiddlewareRef references a Middleware from a route.
type MiddlewareRef struct {
	Name      string
	Namespace string // empty: the route's namespace
}

// CDApplicationSpec summarizes an apps.hanzo.ai CD Application.
type CDApplicationSpec struct {
	Project        string
	RepoURL        string
	Path           string
	TargetRevision string
	DestServer     string
	DestNamespace  string
	SyncStatus     string
	SyncRevision   string
	HealthStatus   string
	HealthMessage  string
}
