package projection

import "fmt"

// AppHealth is the health of a hanzo.ai/v1 App as its operator reports it.
// The operator never writes status.replicas, so the desired count is
// spec.replicas (1 when absent). In order:
//
//   - no status yet, or status.observedGeneration < metadata.generation →
//     Progressing "awaiting operator reconcile";
//   - phase Degraded → Degraded with the Ready condition's message (its
//     reason when the message is empty, else "reported by the operator");
//   - desired ≤ 0 → Suspended "scaled to zero";
//   - readyReplicas ≥ desired → Healthy "<ready>/<desired> ready";
//   - readyReplicas > 0 → Progressing "rolling out: <ready>/<desired> ready";
//   - phase Creating or Pending → Progressing "<ready>/<desired> ready";
//   - otherwise Degraded "no replicas ready".
//
// When status.phase is set, every message is prefixed with it and ": ", so
// an App that is half up reads "Running: rolling out: 1/3 ready" and a new
// one "Creating: 0/2 ready". Deletion is the dispatcher's concern
// (ObjectHealth).
func AppHealth(o *Object) Health {
	a, ok := o.Spec.(*AppSpec)
	if !ok || a == nil {
		return Health{Status: HealthUnknown, Message: fmt.Sprintf("cannot assess App health: summary is %T", o.Spec)}
	}
	say := func(code HealthCode, msg string) Health {
		if a.Phase != "" {
			msg = a.Phase + ": " + msg
		}
		return Health{Status: code, Message: msg}
	}
	if !a.HasStatus || a.ObservedGeneration < o.Generation {
		return say(HealthProgressing, "awaiting operator reconcile")
	}
	if a.Phase == "Degraded" {
		msg := "reported by the operator"
		if c := a.Ready; c != nil && c.Message != "" {
			msg = c.Message
		} else if c != nil && c.Reason != "" {
			msg = c.Reason
		}
		return say(HealthDegraded, msg)
	}
	desired, ready := a.Replicas, a.ReadyReplicas
	counts := fmt.Sprintf("%d/%d ready", ready, desired)
	switch {
	case desired <= 0:
		return say(HealthSuspended, "scaled to zero")
	case ready >= desired:
		return say(HealthHealthy, counts)
	case ready > 0:
		return say(HealthProgressing, "rolling out: "+counts)
	case a.Phase == "Creating" || a.Phase == "Pending":
		return say(HealthProgressing, counts)
	}
	return say(HealthDegraded, "no replicas ready")
}
