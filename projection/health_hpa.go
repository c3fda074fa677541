package projection

import "fmt"

// HPAHealth is Argo CD's HorizontalPodAutoscaler rule. The conditions are read
// in the order the controller wrote them and the first that decides wins:
//   - AbleToScale with reason FailedGetScale or FailedUpdateScale, or
//     ScalingActive with reason FailedGetResourceMetric or InvalidSelector →
//     Degraded with the condition's message;
//   - AbleToScale or ScalingLimited with status True → Healthy with the
//     condition's message.
//
// Without a deciding condition it is Progressing "Waiting to Autoscale".
// Because the first deciding condition wins, an AbleToScale True written before
// a failing ScalingActive makes the HPA Healthy, as in Argo CD.
func HPAHealth(o *Object) Health {
	h, ok := o.Spec.(*HPASpec)
	if !ok || h == nil {
		return Health{Status: HealthUnknown, Message: fmt.Sprintf("cannot assess HorizontalPodAutoscaler health: summary is %T", o.Spec)}
	}
	for _, c := range h.Conditions {
		if hpaConditionFailed(c) {
			return Health{Status: HealthDegraded, Message: c.Message}
		}
		if (c.Type == "AbleToScale" || c.Type == "ScalingLimited") && c.Status == "True" {
			return Health{Status: HealthHealthy, Message: c.Message}
		}
	}
	return Health{Status: HealthProgressing, Message: "Waiting to Autoscale"}
}

// hpaConditionFailed reports whether an HPA condition names a failure the
// autoscaler cannot get past by itself.
func hpaConditionFailed(c Condition) bool {
	switch c.Type {
	case "AbleToScale":
		return c.Reason == "FailedGetScale" || c.Reason == "FailedUpdateScale"
	case "ScalingActive":
		return c.Reason == "FailedGetResourceMetric" || c.Reason == "InvalidSelector"
	}
	return false
}
