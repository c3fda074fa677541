package cluster

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/hanzoai/deploy/projection"
)

type rbacRule struct {
	APIGroups []string `json:"apiGroups"`
	Resources []string `json:"resources"`
	Verbs     []string `json:"verbs"`
}

// extraGrants are what the writes need (the engine applies and prunes its
// allow-listed kinds; a rolling restart patches a Deployment), and the logs
// subresource.
var extraGrants = map[string][]string{
	"hanzo.ai/apps":          {"create", "patch", "delete"},
	"hanzo.ai/middlewares":   {"create", "patch", "delete"},
	"hanzo.ai/ingressroutes": {"create", "patch", "delete"},
	"apps/deployments":       {"patch"},
	"/pods/log":              {"get"},
}

// clusterRoleRules reads the ClusterRole of deploy/rbac.yaml.
func clusterRoleRules(t *testing.T) ([]rbacRule, []byte) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "deploy", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var obj struct {
			Kind  string     `json:"kind"`
			Rules []rbacRule `json:"rules"`
		}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatal(err)
		}
		if obj.Kind == "ClusterRole" {
			return obj.Rules, raw
		}
	}
	t.Fatal("deploy/rbac.yaml has no ClusterRole")
	return nil, nil
}

// TestClusterRoleMatchesRegistry: the ClusterRole grants get, list and watch
// on exactly the registry's resources, list on the live-only kinds (Events),
// plus the write and logs grants, and
// neither it nor the registry mentions secrets.
func TestClusterRoleMatchesRegistry(t *testing.T) {
	rules, raw := clusterRoleRules(t)
	if bytes.Contains(bytes.ToLower(raw), []byte("secret")) {
		t.Error("deploy/rbac.yaml mentions secrets")
	}
	got := map[string][]string{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				if g == "*" || res == "*" || slices.Contains(r.Verbs, "*") {
					t.Errorf("wildcard grant %v", r)
				}
				got[g+"/"+res] = append(got[g+"/"+res], r.Verbs...)
			}
		}
	}
	want := map[string][]string{}
	for _, ki := range projection.Registry() {
		if strings.Contains(strings.ToLower(ki.Name+ki.Resource), "secret") {
			t.Errorf("the registry holds %s", ki.Name)
		}
		want[ki.Group+"/"+ki.Resource] = []string{"get", "list", "watch"}
	}
	for _, ki := range projection.LiveOnly() {
		want[ki.Group+"/"+ki.Resource] = []string{"list"}
	}
	for k, verbs := range extraGrants {
		want[k] = append(want[k], verbs...)
	}
	for k := range want {
		sort.Strings(want[k])
	}
	for k := range got {
		sort.Strings(got[k])
	}
	for k, verbs := range want {
		if !slices.Equal(got[k], verbs) {
			t.Errorf("%s: the ClusterRole grants %v, want %v", k, got[k], verbs)
		}
	}
	for k, verbs := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: the ClusterRole grants %v, which nothing in the registry or the writes needs", k, verbs)
		}
	}
}
