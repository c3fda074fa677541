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
