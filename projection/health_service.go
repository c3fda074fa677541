package projection

import "fmt"

// ServiceHealth is Argo CD's Service rule: a LoadBalancer Service is
// Progressing until status.loadBalancer.ingress has an entry; every other
// Service is Healthy.
func ServiceHealth(o *Object) Health {
	s, ok := o.Spec.(*ServiceSpec)
	if !ok || s == nil {
		return Health{Status: HealthUnknown, Message: fmt.Sprintf("cannot assess Service health: summary is %T", o.Spec)}
	}
	if s.Type == "LoadBalancer" && len(s.LoadBalancer) == 0 {
		return Health{Status: HealthProgressing}
	}
	return Health{Status: HealthHealthy}
}
