package projection

import "fmt"

// JobHealth is Argo CD's Job rule. A Failed, Complete or Suspended condition
// ends the run, whatever its status; the last of each type seen wins:
//   - no such condition → Progressing, without a message;
//   - a Failed condition → Degraded with its message;
//   - a Suspended condition with status True → Suspended, without a message;
//   - otherwise Healthy with the message of the last Complete or Suspended
//     condition.
//
// As in Argo CD, a resumed Job (Suspended with status False) reads as Healthy.
func JobHealth(o *Object) Health {
	j, ok := o.Spec.(*JobSpec)
	if !ok || j == nil {
		return Health{Status: HealthUnknown, Message: fmt.Sprintf("cannot assess Job health: summary is %T", o.Spec)}
	}
	var (
		ended, failed, suspended bool
		message, failMessage     string
	)
	for _, c := range j.Conditions {
		switch c.Type {
		case "Failed":
			ended, failed, failMessage = true, true, c.Message
		case "Complete":
			ended, message = true, c.Message
		case "Suspended":
			ended, message = true, c.Message
			if c.Status == "True" {
				suspended = true
			}
		}
	}
	switch {
	case !ended:
		return Health{Status: HealthProgressing}
	case failed:
		return Health{Status: HealthDegraded, Message: failMessage}
	case suspended:
		return Health{Status: HealthSuspended}
	}
	return Health{Status: HealthHealthy, Message: message}
}
