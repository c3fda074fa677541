package handlers

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hanzoai/deploy/projection"
)

// TestBoardClusters: with several clusters, each drift board row names
// its App's cluster (the same App in two clusters is two rows, told apart
// by namespace), and ?cluster= keeps one cluster's rows; a cluster that is
// not a name is a 400.
func TestBoardClusters(t *testing.T) {
	cfg := testProjectionConfig()
	cfg.Clusters = []projection.ClusterRef{{Name: "staging", Server: "https://staging.example:6443", Namespaces: cfg.Namespaces}}
	store := storeOf(t, cfg, managedApp("hanzo", "iam", "v1.0.0"), managedApp("hanzo.staging", "iam", "v2.0.0"), managedApp("hanzo.staging", "kms", "v1.0.0"))
	env := newServerEnvWith(t, func(d *Deps) { d.Projection, d.Snapshots = cfg, store })
	root := env.token(t, userRoot, time.Hour)
	rows := func(path string) map[string]string {
		t.Helper()
		r := env.get(t, path, root)
		var ans struct{ Apps []projection.AppView }
		if r.code != http.StatusOK || json.Unmarshal([]byte(r.body), &ans) != nil {
			t.Fatalf("GET %s: %d %s", path, r.code, r.body)
		}
		out := map[string]string{}
		for _, v := range ans.Apps {
			out[v.Namespace+"/"+v.App] = v.Cluster + " " + v.DeclaredTag
		}
		return out
	}
	all := rows("/v1/paas/apps")
	if len(all) != 3 || all["hanzo/iam"] != "in-cluster v1.0.0" || all["hanzo.staging/iam"] != "staging v2.0.0" || all["hanzo.staging/kms"] != "staging v1.0.0" {
		t.Errorf("the board: %v", all)
	}
	if got := rows("/v1/paas/apps?cluster=staging"); len(got) != 2 || got["hanzo/iam"] != "" {
		t.Errorf("the board of staging: %v", got)
	}
	if got := rows("/v1/paas/apps?cluster=in-cluster"); len(got) != 1 || got["hanzo/iam"] == "" {
		t.Errorf("the board of in-cluster: %v", got)
	}
	if r := env.get(t, "/v1/paas/apps?cluster=Staging!", root); r.code != http.StatusBadRequest || !strings.Contains(errorMessage(t, r), "cluster") {
		t.Errorf("a cluster that is not a name: %d %s", r.code, r.body)
	}
}

// TestBoardTenancy: an OrgAdmin's board holds the Apps the one visibility
// rule shows it, in every cluster: not an App in its namespace labelled
// for another org, and its org's App in a second cluster; a SuperAdmin's
// holds all of them, a member reads no board.
func TestBoardTenancy(t *testing.T) {
	cfg := testProjectionConfig()
	cfg.Clusters = []projection.ClusterRef{{Name: "staging", Server: "https://staging.example:6443", Namespaces: cfg.Namespaces}}
	labelled := func(o map[string]any, org string) map[string]any {
		o["metadata"].(map[string]any)["labels"] = map[string]any{"hanzo.ai/org": org}
		return o
	}
	store := storeOf(t, cfg,
		labelled(managedApp("tenant-globex", "web", "v1.0.0"), "globex"),
		labelled(managedApp("tenant-globex", "intruder", "v1.0.0"), "acme"),
		labelled(managedApp("tenant-globex.staging", "web", "v2.0.0"), "globex"),
		labelled(managedApp("tenant-acme", "shop", "v1.0.0"), "acme"),
		managedApp("hanzo", "iam", "v1.0.0"))
	env := newServerEnvWith(t, func(d *Deps) { d.Projection, d.Snapshots = cfg, store })
	rows := func(token string) map[string]bool {
		t.Helper()
		r := env.get(t, "/v1/paas/apps", token)
		var ans struct{ Apps []projection.AppView }
		if r.code != http.StatusOK || json.Unmarshal([]byte(r.body), &ans) != nil {
			t.Fatalf("GET /v1/paas/apps: %d %s", r.code, r.body)
		}
		out := map[string]bool{}
		for _, v := range ans.Apps {
			out[v.Namespace+"/"+v.App] = true
		}
		return out
	}
	gina := env.token(t, userGlobexAdmin, time.Hour)
	if got := rows(gina); len(got) != 2 || !got["tenant-globex/web"] || !got["tenant-globex.staging/web"] {
		t.Errorf("globex's OrgAdmin's board: %v, want its web in both clusters only", got)
	}
	if r := env.get(t, "/v1/paas/apps/intruder?namespace=tenant-globex", gina); r.code != http.StatusNotFound {
		t.Errorf("an App of another org's label in globex's namespace: %d %s", r.code, r.body)
	}
	if r := env.get(t, "/v1/paas/apps/web?env=main&namespace=tenant-globex.staging", gina); r.code != http.StatusOK || !strings.Contains(r.body, `"cluster":"staging"`) {
		t.Errorf("globex's App in staging: %d %s", r.code, r.body)
	}
	if got := rows(env.token(t, userRoot, time.Hour)); len(got) != 5 {
		t.Errorf("the SuperAdmin's board: %v, want all 5", got)
	}
	if r := env.get(t, "/v1/paas/apps", env.token(t, userAlice, time.Hour)); r.code != http.StatusForbidden {
		t.Errorf("a member's board: %d", r.code)
	}
}
