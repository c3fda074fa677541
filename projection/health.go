package projection

// HealthCode is the Argo CD health vocabulary.
type HealthCode string

// The health codes.
const (
	HealthHealthy     HealthCode = "Healthy"
	HealthProgressing HealthCode = "Progressing"
	HealthDegraded    HealthCode = "Degraded"
	HealthSuspended   HealthCode = "Suspended"
	HealthMissing     HealthCode = "Missing"
	HealthUnknown     HealthCode = "Unknown"
)

// Health is a health code with an optional human message.
type Health struct {
	Status  HealthCode `json:"status"`
	Message string     `json:"message,omitempty"`
}

// rank orders codes from best to worst:
// Healthy < Suspended < Progressing < Missing < Degraded < Unknown.
func (c HealthCode) rank() int {
	switch c {
	case HealthHealthy:
		return 0
	case HealthSuspended:
		return 1
	case HealthProgressing:
		return 2
	case HealthMissing:
		return 3
	case HealthDegraded:
		return 4
	default: // Unknown and anything unrecognised
		return 5
	}
}

// Worse reports whether c is a worse condition than other.
func (c HealthCode) Worse(other HealthCode) bool { return c.rank() > other.rank() }

// ObjectHealth is the health of one object by its kind's rule, or ok=false
// for kinds that carry no health (ConfigMap, PodDisruptionBudget, the static
// site and project kinds). An object being deleted is Progressing "Pending
// deletion" whatever its kind's rule says.
func ObjectHealth(o *Object) (h Health, ok bool) {
	var rule func(*Object) Health
	switch o.Kind {
	case KindApp:
		rule = AppHealth
	case KindDeployment:
		rule = DeploymentHealth
	case KindStatefulSet:
		rule = StatefulSetHealth
	case KindReplicaSet:
		rule = ReplicaSetHealth
	case KindDaemonSet:
		rule = DaemonSetHealth
	case KindPod:
		rule = PodHealth
	case KindService:
		rule = ServiceHealth
	case KindIngress:
		rule = IngressHealth
	case KindPVC:
		rule = PVCHealth
	case KindHPA:
		rule = HPAHealth
	case KindJob:
		rule = JobHealth
	default:
		return Health{}, false
	}
	if o.Deleting {
		return Health{Status: HealthProgressing, Message: "Pending deletion"}, true
	}
	return rule(o), true
}
