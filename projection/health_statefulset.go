package projection

import "fmt"

// StatefulSetHealth is Argo CD's StatefulSet rule, in order:
//   - observedGeneration 0 or behind generation → Progressing;
//   - fewer ready replicas than spec.replicas (when set) → Progressing;
//   - RollingUpdate with a rollingUpdate block: Progressing while fewer pods
//     than replicas−partition are updated (when both are set), else Healthy
//     "partitioned roll out complete";
//   - OnDelete → Healthy with the ready count;
//   - updateRevision ≠ currentRevision → Progressing;
//   - otherwise Healthy "statefulset rolling update complete".
func StatefulSetHealth(o *Object) Health {
	w, ok := o.Spec.(*WorkloadSpec)
	if !ok || w == nil {
		return Health{Status: HealthUnknown, Message: fmt.Sprintf("cannot assess StatefulSet health: summary is %T", o.Spec)}
	}
	if w.ObservedGeneration == 0 || o.Generation > w.ObservedGeneration {
		return Health{Status: HealthProgressing, Message: "Waiting for statefulset spec update to be observed..."}
	}
	if w.Replicas != nil && w.ReadyReplicas < *w.Replicas {
		return Health{Status: HealthProgressing, Message: fmt.Sprintf("Waiting for %d pods to be ready...", *w.Replicas-w.ReadyReplicas)}
	}
	if w.UpdateStrategy == "RollingUpdate" && w.RollingUpdate {
		if w.Replicas != nil && w.Partition != nil {
			if want := *w.Replicas - *w.Partition; w.UpdatedReplicas < want {
				return Health{Status: HealthProgressing, Message: fmt.Sprintf("Waiting for partitioned roll out to finish: %d out of %d new pods have been updated...", w.UpdatedReplicas, want)}
			}
		}
		return Health{Status: HealthHealthy, Message: fmt.Sprintf("partitioned roll out complete: %d new pods have been updated...", w.UpdatedReplicas)}
	}
	if w.UpdateStrategy == "OnDelete" {
		return Health{Status: HealthHealthy, Message: fmt.Sprintf("statefulset has %d ready pods", w.ReadyReplicas)}
	}
	if w.UpdateRevision != w.CurrentRevision {
		return Health{Status: HealthProgressing, Message: fmt.Sprintf("waiting for statefulset rolling update to complete %d pods at revision %s...", w.UpdatedReplicas, w.UpdateRevision)}
	}
	return Health{Status: HealthHealthy, Message: fmt.Sprintf("statefulset rolling update complete %d pods at revision %s...", w.CurrentReplicas, w.CurrentRevision)}
}
