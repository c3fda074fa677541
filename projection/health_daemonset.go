package projection

import "fmt"

// DaemonSetHealth is Argo CD's DaemonSet rule, in order:
//   - generation > observedGeneration → Progressing;
//   - OnDelete → Healthy with the updated/desired counts;
//   - fewer updated, then fewer available, pods than desiredNumberScheduled →
//     Progressing;
//   - otherwise Healthy.
func DaemonSetHealth(o *Object) Health {
	w, ok := o.Spec.(*WorkloadSpec)
	if !ok || w == nil {
		return Health{Status: HealthUnknown, Message: fmt.Sprintf("cannot assess DaemonSet health: summary is %T", o.Spec)}
	}
	if o.Generation > w.ObservedGeneration {
		return Health{Status: HealthProgressing, Message: "Waiting for rollout to finish: observed daemon set generation less than desired generation"}
	}
	if w.UpdateStrategy == "OnDelete" {
		return Health{Status: HealthHealthy, Message: fmt.Sprintf("daemon set %d out of %d new pods have been updated", w.UpdatedNumberScheduled, w.DesiredNumberScheduled)}
	}
	if w.UpdatedNumberScheduled < w.DesiredNumberScheduled {
		return Health{Status: HealthProgressing, Message: fmt.Sprintf("Waiting for daemon set %q rollout to finish: %d out of %d new pods have been updated...", o.Name, w.UpdatedNumberScheduled, w.DesiredNumberScheduled)}
	}
	if w.NumberAvailable < w.DesiredNumberScheduled {
		return Health{Status: HealthProgressing, Message: fmt.Sprintf("Waiting for daemon set %q rollout to finish: %d of %d updated pods are available...", o.Name, w.NumberAvailable, w.DesiredNumberScheduled)}
	}
	return Health{Status: HealthHealthy}
}
