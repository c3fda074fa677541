package projection

import "fmt"

// IngressHealth is Argo CD's Ingress rule: Healthy once
// status.loadBalancer.ingress has an address, Progressing until then.
func IngressHealth(o *Object) Health {
	in, ok := o.Spec.(*IngressSpec)
	if !ok || in == nil {
		return Health{Status: HealthUnknown, Message: fmt.Sprintf("cannot assess Ingress health: summary is %T", o.Spec)}
	}
	if len(in.LoadBalancer) > 0 {
		return Health{Status: HealthHealthy}
	}
	return Health{Status: HealthProgressing}
}
