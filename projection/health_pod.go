package projection

import (
	"fmt"
	"strings"
)

// PodHealth is Argo CD's Pod rule:
//   - restartPolicy Always and any container waiting with a reason that starts
//     with "Err" or ends with "Error" or "BackOff" (CrashLoopBackOff,
//     ImagePullBackOff, ErrImagePull, CreateContainerConfigError) → Degraded,
//     the waiting messages joined with ", ". Pods with another restart policy
//     are run-to-completion hooks and are not judged on these reasons;
//   - phase Pending → Progressing; Succeeded → Healthy;
//   - phase Failed → Degraded with the pod's message, else the first
//     container (init containers first) that terminated with a message, as
//     OOMKilled, or with a non-zero exit code;
//   - phase Running: restartPolicy Always is Healthy when the Ready condition is
//     True, Degraded when some container has a last terminated state, else
//     Progressing; OnFailure and Never are Progressing;
//   - anything else → Unknown.
//
// Except where stated, the message is the pod's status.message.
func PodHealth(o *Object) Health {
	p, ok := o.Spec.(*PodSpec)
	if !ok || p == nil {
		return Health{Status: HealthUnknown, Message: fmt.Sprintf("cannot assess Pod health: summary is %T", o.Spec)}
	}
	if p.RestartPolicy == "Always" {
		var messages []string
		degraded := false
		for _, cs := range p.Statuses {
			if cs.Waiting && waitingIsFailure(cs.WaitingReason) {
				degraded = true
				messages = append(messages, cs.WaitingMessage)
			}
		}
		if degraded {
			return Health{Status: HealthDegraded, Message: strings.Join(messages, ", ")}
		}
	}

	switch p.Phase {
	case "Pending":
		return Health{Status: HealthProgressing, Message: p.Message}
	case "Succeeded":
		return Health{Status: HealthHealthy, Message: p.Message}
	case "Failed":
		if p.Message != "" {
			return Health{Status: HealthDegraded, Message: p.Message}
		}
		for _, list := range [][]ContainerStatus{p.InitStatuses, p.Statuses} {
			for i := range list {
				if msg := terminatedMessage(&list[i]); msg != "" {
					return Health{Status: HealthDegraded, Message: msg}
				}
			}
		}
		return Health{Status: HealthDegraded}
	case "Running":
		switch p.RestartPolicy {
		case "Always":
			if p.Ready {
				return Health{Status: HealthHealthy, Message: p.Message}
			}
			for _, cs := range p.Statuses {
				if cs.LastTerminated != nil {
					return Health{Status: HealthDegraded, Message: p.Message}
				}
			}
			return Health{Status: HealthProgressing, Message: p.Message}
		case "OnFailure", "Never":
			return Health{Status: HealthProgressing, Message: p.Message}
		}
	}
	return Health{Status: HealthUnknown, Message: p.Message}
}

// waitingIsFailure reports whether a container waiting reason means the
// container cannot start on its own.
func waitingIsFailure(reason string) bool {
	return strings.HasPrefix(reason, "Err") || strings.HasSuffix(reason, "Error") || strings.HasSuffix(reason, "BackOff")
}

// terminatedMessage explains why a container of a failed pod terminated, or
// returns "" when its current state says nothing useful.
func terminatedMessage(cs *ContainerStatus) string {
	t := cs.Terminated
	switch {
	case t == nil:
		return ""
	case t.Message != "":
		return t.Message
	case t.Reason == "OOMKilled":
		return t.Reason
	case t.ExitCode != 0:
		return fmt.Sprintf("container %q failed with exit code %d", cs.Name, t.ExitCode)
	}
	return ""
}
