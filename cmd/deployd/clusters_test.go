package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hanzoai/deploy/cluster"
	"github.com/hanzoai/deploy/engine"
	"github.com/hanzoai/deploy/projection"
)

// TestClustersFromEnv: the first cluster's name and the clusters file are
// read and checked; a bad name or file stops serve with a message naming
// the variable, the cluster and the field.
func TestClustersFromEnv(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	first, es, err := clustersFromEnv(env())
	if err != nil || first != "in-cluster" || len(es) != 0 {
		t.Fatalf("defaults: %q %v %v", first, es, err)
	}
	good := write("good.yaml", "clusters:\n- name: staging\n  kubeconfig: /k\n")
	first, es, err = clustersFromEnv(env("DEPLOY_CLUSTER_NAME", "prod", "DEPLOY_CLUSTERS_FILE", good))
	if err != nil || first != "prod" || len(es) != 1 || es[0].Name != "staging" {
		t.Fatalf("a file: %q %v %v", first, es, err)
	}
	for _, c := range []struct {
		env  func(string) string
		want []string
	}{
		{env("DEPLOY_CLUSTER_NAME", "Prod"), []string{"DEPLOY_CLUSTER_NAME", `"Prod" is not a cluster name`}},
		{env("DEPLOY_CLUSTERS_FILE", filepath.Join(dir, "none.yaml")), []string{"DEPLOY_CLUSTERS_FILE", "none.yaml cannot be read"}},
		{env("DEPLOY_CLUSTERS_FILE", write("bad.yaml", "clusters:\n- name: staging\n")), []string{"DEPLOY_CLUSTERS_FILE", `cluster "staging"`, "kubeconfig is missing", "bad.yaml"}},
		{env("DEPLOY_CLUSTER_NAME", "staging", "DEPLOY_CLUSTERS_FILE", good), []string{`cluster "staging"`, "is the cluster deployd runs in"}},
	} {
		_, _, err := clustersFromEnv(c.env)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("error %v: want it to say %q", err, w)
			}
		}
	}
}

// TestOtherWatchersBadKubeconfig: a kubeconfig that cannot be read, or an
// engine that cannot work, stops serve, naming the cluster and the field.
func TestOtherWatchersBadKubeconfig(t *testing.T) {
	pcfg := projection.DefaultConfig()
	discard := slog.New(slog.DiscardHandler)
	_, err := newOtherWatchers([]cluster.Entry{{Name: "staging", Kubeconfig: filepath.Join(t.TempDir(), "missing")}}, &pcfg, engineEnv{Config: engine.Defaults()}, cluster.NewFeed(), discard)
	if err == nil || !strings.Contains(err.Error(), `cluster "staging": kubeconfig`) || !strings.Contains(err.Error(), "DEPLOY_CLUSTERS_FILE") {
		t.Errorf("newOtherWatchers: %v", err)
	}
	if len(pcfg.Clusters) != 0 {
		t.Errorf("a cluster was added: %v", pcfg.Clusters)
	}
	kc := filepath.Join(t.TempDir(), "staging.kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: s, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: s, context: {cluster: s, user: u}}]
current-context: s
users: [{name: u, user: {token: t}}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		engine cluster.EntryEngine
		ns     string
		want   string
	}{
		{cluster.EntryEngine{Repo: "r"}, "", `cluster "staging": engine.repo: repo "r" is not a URL`},
		{cluster.EntryEngine{Repo: "https://git.example.com/fleet.git", Ref: "a..b"}, "", `cluster "staging": engine.ref:`},
		{cluster.EntryEngine{Repo: "https://git.example.com/fleet.git", Path: "../up"}, "", `cluster "staging": engine.path:`},
		{cluster.EntryEngine{Repo: "https://git.example.com/fleet.git"}, "web=prod", `cluster "staging": DEPLOY_ENGINE_NAMESPACE (not in the cluster's namespaces)`},
	} {
		pcfg := projection.DefaultConfig()
		_, err = newOtherWatchers([]cluster.Entry{{Name: "staging", Kubeconfig: kc, Namespaces: c.ns, Engine: &c.engine}}, &pcfg, engineEnv{Config: engine.Defaults()}, cluster.NewFeed(), discard)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "DEPLOY_CLUSTERS_FILE") {
			t.Errorf("engine %+v: %v, want %q", c.engine, err, c.want)
		}
	}
	pcfg = projection.DefaultConfig()
	others, err := newOtherWatchers([]cluster.Entry{{Name: "staging", Kubeconfig: kc, Engine: &cluster.EntryEngine{Repo: "https://git.example.com/fleet.git", Path: "staging"}}}, &pcfg, engineEnv{Config: engine.Defaults()}, cluster.NewFeed(), discard)
	if err != nil || len(others) != 1 {
		t.Fatalf("a good engine: %v", err)
	}
	if e := pcfg.Clusters[0].Engine; e == nil || e.Repo != "https://git.example.com/fleet.git" || e.Path != "staging" || e.Ref != "main" || pcfg.Clusters[0].EngineInstance != "universe" {
		t.Errorf("the cluster's engine source: %+v %q", e, pcfg.Clusters[0].EngineInstance)
	}
}
