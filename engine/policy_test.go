package engine

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/projection/drift/drifttest"
)

func testPolicy() Policy {
	return Policy{Allow: DefaultAllow(), Namespaces: projection.DefaultNamespaces(), DefaultNamespace: "hanzo"}
}

func obj(apiVersion, kind, ns, name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
	u.SetName(name)
	if ns != "" {
		u.SetNamespace(ns)
	}
	if labels != nil {
		u.SetLabels(labels)
	}
	return u
}

func TestPolicy(t *testing.T) {
	cases := []struct {
		name   string
		obj    *unstructured.Unstructured
		refuse string // "" admits
		ns     string // the namespace after Admit
	}{
		{"app", obj("hanzo.ai/v1", "App", "hanzo-devnet", "web", nil), "", "hanzo-devnet"},
		{"default namespace", obj("hanzo.ai/v1", "App", "", "web", nil), "", "hanzo"},
		{"middleware", obj("hanzo.ai/v1alpha1", "Middleware", "hanzo", "m", nil), "", "hanzo"},
		{"ingressroute", obj("hanzo.ai/v1alpha1", "IngressRoute", "hanzo", "r", nil), "", "hanzo"},
		{"tenant with its org", obj("hanzo.ai/v1", "App", "tenant-acme", "w", map[string]string{"hanzo.ai/org": "acme"}), "", "tenant-acme"},
		{"secret", obj("v1", "Secret", "hanzo", "s", nil), "policy: v1 Secret is not on the engine's allow-list", "hanzo"},
		{"secret without namespace stays unfilled", obj("v1", "Secret", "", "s", nil), "allow-list", ""},
		{"clusterrole", obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "admin", nil), "policy: rbac.authorization.k8s.io/v1 ClusterRole is not on the engine's allow-list", ""},
		{"namespace", obj("v1", "Namespace", "", "kube-system", nil), "allow-list", ""},
		{"deployment (read, not applied)", obj("apps/v1", "Deployment", "hanzo", "d", nil), "allow-list", "hanzo"},
		{"app of another version", obj("hanzo.ai/v2", "App", "hanzo", "web", nil), "allow-list", "hanzo"},
		{"kube-system", obj("hanzo.ai/v1", "App", "kube-system", "web", nil), `policy: namespace "kube-system" is not in the namespace map`, "kube-system"},
		{"tenant without org", obj("hanzo.ai/v1", "App", "tenant-acme", "w", nil), `policy: in namespace tenant-acme the label hanzo.ai/org must be "acme" (it is missing)`, "tenant-acme"},
		{"tenant of another org", obj("hanzo.ai/v1", "App", "tenant-acme", "w", map[string]string{"hanzo.ai/org": "globex"}), `(it is "globex")`, "tenant-acme"},
		{"bare tenant prefix", obj("hanzo.ai/v1", "App", "tenant-", "w", nil), "not in the namespace map", "tenant-"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := testPolicy().Admit(c.obj)
			switch {
			case c.refuse == "" && err != nil:
				t.Fatalf("got %v, want admitted", err)
			case c.refuse != "" && (err == nil || !strings.Contains(err.Error(), c.refuse)):
				t.Fatalf("got %v, want a refusal containing %q", err, c.refuse)
			}
			if got := c.obj.GetNamespace(); got != c.ns {
				t.Errorf("namespace after Admit %q, want %q", got, c.ns)
			}
		})
	}
}

func TestResourceSpelling(t *testing.T) {
	for want, u := range map[string]*unstructured.Unstructured{
		"/v1/Secret/ns/s": obj("v1", "Secret", "ns", "s", nil),
		"rbac.authorization.k8s.io/v1/ClusterRole//admin": obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "admin", nil),
		"hanzo.ai/v1/App/hanzo/web":                       obj("hanzo.ai/v1", "App", "hanzo", "web", nil),
	} {
		if got := resourceOf(u); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if got := resourceOfKind(projection.KindApp, "hanzo", "web"); got != "hanzo.ai/v1/App/hanzo/web" {
		t.Errorf("got %q", got)
	}
}

// FuzzPolicy: whatever an object declares, Admit never panics and admits
// only an allowed kind in a mapped namespace, with the tenant's org label in
// a tenant namespace.
func FuzzPolicy(f *testing.F) {
	f.Add("hanzo.ai/v1", "App", "tenant-acme", "acme")
	f.Add("v1", "Secret", "hanzo", "")
	f.Add("hanzo.ai/v1alpha1", "Middleware", "", "x")
	f.Add("hanzo.ai/v1", "App", "kube-system", "")
	f.Fuzz(func(t *testing.T, apiVersion, kind, ns, org string) {
		u := obj(apiVersion, kind, ns, "n", map[string]string{"hanzo.ai/org": org})
		p := testPolicy()
		k, err := p.Admit(u)
		if err != nil {
			return
		}
		if !p.allowed(k) {
			t.Fatalf("admitted %s %s, not on the allow-list", apiVersion, kind)
		}
		_, wantOrg, ok := p.Namespaces.Env(u.GetNamespace())
		if !ok || (wantOrg != "" && wantOrg != org) {
			t.Fatalf("admitted %s/%s into namespace %q with org %q", apiVersion, kind, u.GetNamespace(), org)
		}
	})
}

func TestConfigValidate(t *testing.T) {
	bad := map[string]func(*Config){
		"credentials over plain http": func(c *Config) { c.Repo = "http://git.example.com/r.git"; c.Auth = []byte("tok") },
		"credentials in the URL":      func(c *Config) { c.Repo = "https://u:p@git.example.com/r.git" },
		"not a URL":                   func(c *Config) { c.Repo = "universe" },
		"ftp":                         func(c *Config) { c.Repo = "ftp://x/y" },
		"ref with space":              func(c *Config) { c.Ref = "main branch" },
		"absolute path":               func(c *Config) { c.Path = "/etc" },
		"dotdot path":                 func(c *Config) { c.Path = "a/../../b" },
		"ratio over 1":                func(c *Config) { c.PruneMaxRatio = 1.5 },
		"negative max":                func(c *Config) { c.PruneMax = -1 },
		"instance not a label":        func(c *Config) { c.Instance = "a b" },
	}
	for name, mut := range bad {
		c := Defaults()
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: got nil, want an error", name)
		}
	}
	ok := map[string]func(*Config){
		"defaults":                 func(*Config) {},
		"token over loopback http": func(c *Config) { c.Repo = "http://127.0.0.1:3000/r.git"; c.Auth = []byte("tok") },
		"scp-like ssh":             func(c *Config) { c.Repo = "git@github.com:hanzoai/universe.git" },
		"anonymous plain http":     func(c *Config) { c.Repo = "http://git.example.com/r.git" },
	}
	for name, mut := range ok {
		c := Defaults()
		mut(&c)
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestDriftPairs: the engine's self-heal decision on each drift pair — a
// live object carrying the hash of the desired state it was applied from,
// which git still declares — is to send it exactly when the pair drifted,
// as the diff routes show it modified (handlers' TestDriftPairsModified).
func TestDriftPairs(t *testing.T) {
	e := &Engine{cfg: Config{Instance: "demo"}}
	for _, p := range drifttest.Pairs() {
		want := &unstructured.Unstructured{Object: p.Desired}
		applied := want.DeepCopy()
		prepare(applied)
		live := &unstructured.Unstructured{Object: p.Live}
		labels := live.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[projection.LabelEngineInstance] = "demo"
		live.SetLabels(labels)
		ann := live.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		// What the engine's last apply of it left.
		ann[AnnotationDesiredHash] = desiredHash(applied)
		ann[projection.AnnotationEngineRevision], ann[projection.AnnotationEngineRun] = "abc", "run-1"
		ann[projection.AnnotationEngineAppliedAt] = "2026-12-01T00:00:00Z"
		live.SetAnnotations(ann)
		key := objKey{projection.KindApp, drifttest.Namespace, drifttest.Name}
		plan := e.plan(run{id: "t", sha: "abc"}, []admittedObj{{key: key, obj: want, resource: "App/gateway"}},
			liveSet{ours: map[objKey]*unstructured.Unstructured{key: live}})
		if sent := len(plan.jobs) == 1; sent != p.Drifted {
			t.Errorf("%s: the engine sends it: %v, want %v (drifted)", p.Name, sent, p.Drifted)
		}
		if len(plan.jobs) == 1 && !plan.jobs[0].heal {
			t.Errorf("%s: sent, but not as a self-heal", p.Name)
		}
	}
}
