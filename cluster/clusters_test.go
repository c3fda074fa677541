package cluster

import (
	"errors"
	"strings"
	"testing"

	"github.com/hanzoai/deploy/projection"
)

func TestParseClusters(t *testing.T) {
	ok := `
clusters:
- name: staging
  kubeconfig: /etc/deployd/clusters/staging.kubeconfig
  namespaces: "hanzo=test,tenant-*=test"
- name: eu-west-1
  kubeconfig: /etc/deployd/clusters/eu.kubeconfig
  context: eu
  engine: {repo: "https://git.example.com/fleet.git", ref: main, path: clusters/eu}
`
	es, err := ParseClusters([]byte(ok), DefaultName)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].Name != "staging" || es[1].Context != "eu" || es[1].Engine == nil || es[1].Engine.Path != "clusters/eu" {
		t.Fatalf("entries: %+v", es)
	}
	if ns := es[0].NamespaceMap(projection.DefaultNamespaces()); ns.TenantPrefix != "tenant-" {
		t.Errorf("staging's namespace map: %+v", ns)
	}
	if es, err := ParseClusters([]byte("clusters: []\n"), DefaultName); err != nil || len(es) != 0 {
		t.Errorf("an empty list: %v %v", es, err)
	}

	for _, c := range []struct{ name, file, want string }{
		{"not yaml", "clusters: [\n", "not YAML"},
		{"not a list", "clusters: staging\n", "want a document `clusters:`"},
		{"unknown top", "cluster: []\n", "unknown field \"cluster\""},
		{"unknown field", "clusters:\n- name: staging\n  kubeconfg: /x\n", `cluster "staging": unknown field "kubeconfg"; an entry's fields are name, kubeconfig, context, namespaces, engine`},
		{"no name", "clusters:\n- kubeconfig: /x\n", "cluster 1: name is empty"},
		{"bad name", "clusters:\n- name: Staging_1\n  kubeconfig: /x\n", `cluster 1: name "Staging_1" is not a cluster name`},
		{"name not a string", "clusters:\n- name: [a]\n  kubeconfig: /x\n", "cluster 1: name: want a string"},
		{"duplicate", "clusters:\n- name: a\n  kubeconfig: /x\n- name: a\n  kubeconfig: /y\n", `cluster "a": name: cluster 1 has this name too`},
		{"first's name", "clusters:\n- name: in-cluster\n  kubeconfig: /x\n", `cluster "in-cluster": name: "in-cluster" is the cluster deployd runs in`},
		{"no kubeconfig", "clusters:\n- name: staging\n", `cluster "staging": kubeconfig is missing`},
		{"bad namespaces", "clusters:\n- name: staging\n  kubeconfig: /x\n  namespaces: \"hanzo\"\n", `cluster "staging": namespaces:`},
		{"engine without repo", "clusters:\n- name: staging\n  kubeconfig: /x\n  engine: {path: a}\n", `cluster "staging": engine.repo is missing`},
		{"engine path escapes", "clusters:\n- name: staging\n  kubeconfig: /x\n  engine: {repo: r, path: ../a}\n", `cluster "staging": engine.path "../a"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseClusters([]byte(c.file), DefaultName)
			if err == nil || !errors.Is(err, ErrClustersFile) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("ParseClusters: %v, want an ErrClustersFile containing %q", err, c.want)
			}
		})
	}
}

func TestCheckName(t *testing.T) {
	for _, n := range []string{"a", "in-cluster", "eu-west-1", "0", strings.Repeat("a", 63)} {
		if err := CheckName(n); err != nil {
			t.Errorf("%q: %v", n, err)
		}
	}
	for _, n := range []string{"", "-a", "a-", "A", "a.b", "a_b", strings.Repeat("a", 64)} {
		if CheckName(n) == nil {
			t.Errorf("%q: accepted", n)
		}
	}
}

// FuzzParseClusters: any file either parses into entries whose names are
// valid and unique, or is refused with an ErrClustersFile; never a panic.
func FuzzParseClusters(f *testing.F) {
	f.Add([]byte("clusters:\n- name: staging\n  kubeconfig: /x\n"))
	f.Add([]byte("clusters:\n- name: a\n  kubeconfig: /x\n  engine: {repo: r}\n- name: b\n  kubeconfig: /y\n  namespaces: \"x=main\"\n"))
	f.Add([]byte("clusters: [{name: 1}]"))
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := ParseClusters(data, DefaultName)
		if err != nil {
			if !errors.Is(err, ErrClustersFile) {
				t.Fatalf("an error not marked: %v", err)
			}
			return
		}
		seen := map[string]bool{DefaultName: true}
		for _, e := range es {
			if CheckName(e.Name) != nil || seen[e.Name] || e.Kubeconfig == "" {
				t.Fatalf("accepted %+v", e)
			}
			seen[e.Name] = true
		}
	})
}
