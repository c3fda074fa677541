package projection

import "fmt"

// PVCHealth is Argo CD's PersistentVolumeClaim rule, by status.phase: Bound is
// Healthy, Pending is Progressing, Lost is Degraded, anything else Unknown.
// It carries no message.
func PVCHealth(o *Object) Health {
	p, ok := o.Spec.(*PVCSpec)
	if !ok || p == nil {
		return Health{Status: HealthUnknown, Message: fmt.Sprintf("cannot assess PersistentVolumeClaim health: summary is %T", o.Spec)}
	}
	switch p.Phase {
	case "Bound":
		return Health{Status: HealthHealthy}
	case "Pending":
		return Health{Status: HealthProgressing}
	case "Lost":
		return Health{Status: HealthDegraded}
	}
	return Health{Status: HealthUnknown}
}
