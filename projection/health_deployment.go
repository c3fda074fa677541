package projection

import "fmt"

// DeploymentHealth is Argo CD's Deployment rule, in order:
//   - spec.paused → Suspended "Deployment is paused";
//   - generation > observedGeneration → Progressing;
//   - the Progressing condition's reason is ProgressDeadlineExceeded → Degraded;
//   - fewer updated replicas than spec.replicas (when set), old replicas still
//     present, or fewer available than updated replicas → Progressing with
//     kubectl's rollout message;
//   - otherwise Healthy.
func DeploymentHealth(o *Object) Health {
	w, ok := o.Spec.(*WorkloadSpec)
	if !ok || w == nil {
		return Health{Status: HealthUnknown, Message: fmt.Sprintf("cannot assess Deployment health: summary is %T", o.Spec)}
	}
	if w.Paused {
		return Health{Status: HealthSuspended, Message: "Deployment is paused"}
	}
	if o.Generation > w.ObservedGeneration {
		return Health{Status: HealthProgressing, Message: "Waiting for rollout to finish: observed deployment generation less than desired generation"}
	}
	if c := findCondition(w.Conditions, "Progressing"); c != nil && c.Reason == "ProgressDeadlineExceeded" {
		return Health{Status: HealthDegraded, Message: fmt.Sprintf("Deployment %q exceeded its progress deadline", o.Name)}
	}
	switch {
	case w.Replicas != nil && w.UpdatedReplicas < *w.Replicas:
		return Health{Status: HealthProgressing, Message: fmt.Sprintf("Waiting for rollout to finish: %d out of %d new replicas have been updated...", w.UpdatedReplicas, *w.Replicas)}
	case w.StatusReplicas > w.UpdatedReplicas:
		return Health{Status: HealthProgressing, Message: fmt.Sprintf("Waiting for rollout to finish: %d old replicas are pending termination...", w.StatusReplicas-w.UpdatedReplicas)}
	case w.AvailableReplicas < w.UpdatedReplicas:
		return Health{Status: HealthProgressing, Message: fmt.Sprintf("Waiting for rollout to finish: %d of %d updated replicas are available...", w.AvailableReplicas, w.UpdatedReplicas)}
	}
	return Health{Status: HealthHealthy}
}
