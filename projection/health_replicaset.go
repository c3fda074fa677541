package projection

import "fmt"

// ReplicaSetHealth is Argo CD's ReplicaSet rule, in order:
//   - generation > observedGeneration → Progressing;
//   - a ReplicaFailure condition with status True → Degraded with its message;
//   - fewer available replicas than spec.replicas (when set) → Progressing;
//   - otherwise Healthy.
func ReplicaSetHealth(o *Object) Health {
	w, ok := o.Spec.(*WorkloadSpec)
	if !ok || w == nil {
		return Health{Status: HealthUnknown, Message: fmt.Sprintf("cannot assess ReplicaSet health: summary is %T", o.Spec)}
	}
	if o.Generation > w.ObservedGeneration {
		return Health{Status: HealthProgressing, Message: "Waiting for rollout to finish: observed replica set generation less than desired generation"}
	}
	if c := findCondition(w.Conditions, "ReplicaFailure"); c != nil && c.Status == "True" {
		return Health{Status: HealthDegraded, Message: c.Message}
	}
	if w.Replicas != nil && w.AvailableReplicas < *w.Replicas {
		return Health{Status: HealthProgressing, Message: fmt.Sprintf("Waiting for rollout to finish: %d out of %d new replicas are available...", w.AvailableReplicas, *w.Replicas)}
	}
	return Health{Status: HealthHealthy}
}
