package projection

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNetworkingInfo: what the stock UI's network view reads of a Service
// (its selector and load balancer), an Ingress (its backend Services, its
// load balancer and URLs) and a Pod (its labels); other kinds tell none.
func TestNetworkingInfo(t *testing.T) {
	decode := func(js string) *Object {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal([]byte(js), &m); err != nil {
			t.Fatal(err)
		}
		o, err := Decode(m)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	for _, c := range []struct {
		name, obj string
		want      *NetworkingInfo
	}{
		{"service", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"hanzo","uid":"s1"},
			"spec":{"type":"LoadBalancer","selector":{"app":"web","tier":"fe"}},
			"status":{"loadBalancer":{"ingress":[{"ip":"10.1.2.3"},{"hostname":"lb.example.com"}]}}}`,
			&NetworkingInfo{TargetLabels: map[string]string{"app": "web", "tier": "fe"},
				Ingress: []LoadBalancerIngress{{IP: "10.1.2.3"}, {Hostname: "lb.example.com"}}}},
		{"ingress", `{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"web","namespace":"hanzo","uid":"i1"},
			"spec":{"tls":[{"hosts":["web.example.com"]}],"defaultBackend":{"service":{"name":"fallback","port":{"number":80}}},
				"rules":[{"host":"web.example.com","http":{"paths":[{"path":"/","backend":{"service":{"name":"web","port":{"number":80}}}},
					{"path":"/api","backend":{"service":{"name":"web","port":{"number":80}}}}]}}]},
			"status":{"loadBalancer":{"ingress":[{"ip":"10.9.9.9"}]}}}`,
			&NetworkingInfo{TargetRefs: []ResourceRef{{Version: "v1", Kind: "Service", Namespace: "hanzo", Name: "fallback"}, {Version: "v1", Kind: "Service", Namespace: "hanzo", Name: "web"}},
				Ingress: []LoadBalancerIngress{{IP: "10.9.9.9"}}, ExternalURLs: []string{"https://web.example.com"}}},
		{"pod", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-1","namespace":"hanzo","uid":"p1","labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"x:v1"}]}}`,
			&NetworkingInfo{Labels: map[string]string{"app": "web"}}},
		{"deployment", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"hanzo","uid":"d1"},"spec":{"replicas":1}}`, nil},
	} {
		if diff := cmp.Diff(c.want, networkingInfo(decode(c.obj))); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
}
