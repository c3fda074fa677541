package handlers

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/projection"
)

// gitEngine is a fake engine that declares every App in git, with push on:
// it records the tag writes and history reads it is asked for, in the
// namespaces it is given.
type gitEngine struct {
	*fakeEngine
	mu     sync.Mutex
	writes []gitops.TagWrite
	asked  []string // namespace/name of Manages and History
}

func (g *gitEngine) PushEnabled() bool { return true }

func (g *gitEngine) Manages(ns, name string) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, ns+"/"+name)
	return "apps/" + ns + "/" + name + ".yaml", true
}

func (g *gitEngine) History(_ context.Context, ns, name string) ([]gitops.GitCommit, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, ns+"/"+name)
	return []gitops.GitCommit{
		{SHA: "c2", Tag: "v1.2.0", Author: "Ada", Date: engineFinished},
		{SHA: "c1", Tag: "v1.1.0", Author: "Ada", Date: engineStarted},
	}, nil
}

func (g *gitEngine) WriteTag(_ context.Context, w gitops.TagWrite) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.writes = append(g.writes, w)
	return "c3", nil
}

func (g *gitEngine) tagWrites() []gitops.TagWrite {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]gitops.TagWrite(nil), g.writes...)
}

// managedApp is an App the engine instance universe applied.
func managedApp(ns, name, tag string) map[string]any {
	return map[string]any{
		"apiVersion": "hanzo.ai/v1", "kind": "App",
		"metadata": map[string]any{"name": name, "namespace": ns, "uid": "uid-" + ns + "-" + name, "resourceVersion": "7",
			"labels":      map[string]any{projection.LabelEngineInstance: "universe"},
			"annotations": map[string]any{projection.AnnotationEngineRevision: testRevision}},
		"spec": map[string]any{"image": map[string]any{"repository": "ghcr.io/hanzoai/" + name, "tag": tag}, "replicas": int64(1)},
	}
}

// storeOf is a store of cfg holding objs.
func storeOf(t *testing.T, cfg projection.Config, objs ...map[string]any) *projection.Store {
	t.Helper()
	store := projection.NewStore(cfg)
	var batch []projection.Change
	for _, o := range objs {
		d, err := projection.Decode(o)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, projection.Change{Op: projection.Upsert, Object: d})
	}
	if _, err := store.Apply(batch...); err != nil {
		t.Fatal(err)
	}
	return store
}

// TestEngineOfEachCluster: with several clusters, each cluster's engine is
// its own: the engine routes take ?cluster= (the first cluster's engine
// when absent; a 400 naming the clusters for one deployd does not serve; a
// 503 naming the cluster for one that runs none); GET /v1/deploy/gitops
// lists every cluster's; an App's source, history and rollback (a commit)
// are its cluster's engine's, asked in the namespace as that cluster names
// it.
func TestEngineOfEachCluster(t *testing.T) {
	first, staging := newEngineFake(), newEngineFake()
	stagingSrc := projection.EngineSource{Repo: "https://git.example.com/staging-fleet.git", Ref: "main", Path: "apps"}
	staging.status.Source = stagingSrc
	stagingGit, firstGit := &gitEngine{fakeEngine: staging}, &gitEngine{fakeEngine: first}
	cfg := testProjectionConfig()
	cfg.Clusters = []projection.ClusterRef{
		{Name: "staging", Server: "https://staging.example:6443", Namespaces: cfg.Namespaces, Engine: &stagingSrc, EngineInstance: "universe"},
		{Name: "qa", Server: "https://qa.example:6443", Namespaces: cfg.Namespaces},
	}
	store := storeOf(t, cfg, managedApp("hanzo", "iam", "v1.2.0"), managedApp("hanzo.staging", "iam", "v1.2.0"), managedApp("hanzo.qa", "iam", "v1.2.0"))
	env := newServerEnvWith(t, func(d *Deps) {
		d.Projection, d.Snapshots = cfg, store
		d.Engine = firstGit
		d.ClusterEngines = map[string]Engine{"staging": stagingGit}
		d.Writer = &fakeWriter{}
	})
	root := env.token(t, userRoot, time.Hour)

	// The routes.
	if r := env.post(t, reconcilePath+"?cluster=staging&dryRun=true", root, ""); r.code != http.StatusOK || !strings.Contains(r.body, `"cluster":"staging"`) {
		t.Fatalf("reconcile staging: %d %s", r.code, r.body)
	}
	if r := env.post(t, reconcilePath, root, ""); r.code != http.StatusOK || !strings.Contains(r.body, `"cluster":"in-cluster"`) {
		t.Fatalf("reconcile the first: %d %s", r.code, r.body)
	}
	if got, _ := staging.calls(); len(got) != 1 || !got[0] {
		t.Errorf("staging's engine ran %v, want one dry run", got)
	}
	if got, _ := first.calls(); len(got) != 1 || got[0] {
		t.Errorf("the first cluster's engine ran %v, want one run", got)
	}
	if r := env.post(t, reconcilePath+"?cluster=prod", root, ""); r.code != http.StatusBadRequest || !strings.Contains(errorMessage(t, r), "in-cluster, staging, qa") {
		t.Errorf("reconcile a cluster deployd does not serve: %d %s", r.code, r.body)
	}
	if r := env.post(t, reconcilePath+"?cluster=qa", root, ""); r.code != http.StatusServiceUnavailable || !strings.Contains(errorMessage(t, r), `cluster "qa" runs no engine`) {
		t.Errorf("reconcile a cluster without an engine: %d %s", r.code, r.body)
	}
	if r := env.post(t, reconcilePath+"?cluster=staging", env.token(t, userAlice, time.Hour), ""); r.code != http.StatusForbidden {
		t.Errorf("a tenant's reconcile of staging: %d, want 403", r.code)
	}
	if r := env.post(t, suspendPath+"?cluster=staging", root, ""); r.code != http.StatusOK || !strings.Contains(r.body, `"cluster":"staging"`) || staging.suspended == nil || first.suspended != nil {
		t.Errorf("suspend staging: %d %s (staging %v, first %v)", r.code, r.body, staging.suspended, first.suspended)
	}
	r := env.get(t, "/v1/deploy/gitops?cluster=staging", root)
	var body struct {
		Engine  gitops.EngineStatus
		Engines []gitops.EngineStatus
	}
	if r.code != http.StatusOK || json.Unmarshal([]byte(r.body), &body) != nil {
		t.Fatalf("gitops: %d %s", r.code, r.body)
	}
	if body.Engine.Cluster != "staging" || body.Engine.Source != stagingSrc || len(body.Engines) != 3 ||
		body.Engines[0].Cluster != "in-cluster" || !body.Engines[0].Enabled || body.Engines[1].Cluster != "staging" ||
		body.Engines[2].Cluster != "qa" || body.Engines[2].Enabled {
		t.Errorf("gitops: %s", r.body)
	}
	push := `{"ref":"refs/heads/main","after":"` + testRevision + `"}`
	env.srv.d.EngineWebhookSecret = []byte(testWebhookSecret)
	if r := env.post(t, webhookPath+"?cluster=staging", "", push, "X-GitHub-Event", "push", "X-Hub-Signature-256", githubSignature(push)); r.code != http.StatusAccepted {
		t.Errorf("staging's webhook: %d %s", r.code, r.body)
	}
	if _, trig := staging.calls(); len(trig) != 1 {
		t.Errorf("staging's webhook triggered %v", trig)
	}
	if _, trig := first.calls(); len(trig) != 0 {
		t.Errorf("staging's webhook triggered the first cluster's engine: %v", trig)
	}

	// The Apps: the same name in three clusters.
	var app struct {
		Spec struct{ Source struct{ RepoURL string } }
	}
	for ns, repo := range map[string]string{"hanzo": testEngineSource.Repo, "hanzo.staging": stagingSrc.Repo, "hanzo.qa": ""} {
		r := env.get(t, "/api/v1/applications/iam?appNamespace="+ns, root)
		if r.code != http.StatusOK || json.Unmarshal([]byte(r.body), &app) != nil {
			t.Fatalf("iam in %s: %d %s", ns, r.code, r.body)
		}
		if got := app.Spec.Source.RepoURL; (repo != "" && got != repo) || (repo == "" && (got == testEngineSource.Repo || got == stagingSrc.Repo)) {
			t.Errorf("iam in %s: spec.source.repoURL %q, want its cluster's engine's (%q)", ns, got, repo)
		}
	}
	r = env.post(t, "/v1/deploy/iam/rollback?namespace=hanzo.staging", root, `{"tag":"v1.1.0"}`)
	if r.code != http.StatusOK || !strings.Contains(r.body, `"commit":"c3"`) {
		t.Fatalf("rollback of staging's iam: %d %s", r.code, r.body)
	}
	if w := stagingGit.tagWrites(); len(w) != 1 || w[0].Namespace != "hanzo" || w[0].Name != "iam" || w[0].Tag != "v1.1.0" || w[0].Verb != "rollback" {
		t.Errorf("staging's engine wrote %+v, want iam's tag v1.1.0 in its namespace hanzo", w)
	}
	for _, q := range stagingGit.asked {
		if q != "hanzo/iam" {
			t.Errorf("staging's engine was asked about %s", q)
		}
	}
	// The first cluster's iam is its engine's.
	n := len(stagingGit.tagWrites())
	r = env.post(t, "/v1/deploy/iam/rollback?namespace=hanzo", root, `{"tag":"v1.1.0"}`)
	if r.code != http.StatusOK || len(stagingGit.tagWrites()) != n {
		t.Errorf("rollback of the first cluster's iam: %d %s", r.code, r.body)
	}
	if w := firstGit.tagWrites(); len(w) != 1 || w[0].Namespace != "hanzo" || w[0].Name != "iam" {
		t.Errorf("the first cluster's engine wrote %+v", w)
	}
	// qa runs no engine: its iam is rolled back by a patch, not a commit.
	r = env.post(t, "/v1/deploy/iam/rollback?namespace=hanzo.qa", root, `{"tag":"v1.1.0"}`)
	if len(stagingGit.tagWrites()) != n || len(firstGit.tagWrites()) != 1 || strings.Contains(r.body, `"commit"`) {
		t.Errorf("rollback of qa's iam: %d %s", r.code, r.body)
	}
}

// TestWebhookSecretOfEachCluster: a cluster's engine whose entry has a
// webhook secret of its own takes only that one; the others take
// DEPLOY_ENGINE_WEBHOOK_SECRET.
func TestWebhookSecretOfEachCluster(t *testing.T) {
	first, staging := newEngineFake(), newEngineFake()
	cfg := testProjectionConfig()
	cfg.Clusters = []projection.ClusterRef{{Name: "staging", Server: "https://staging.example:6443", Namespaces: cfg.Namespaces}}
	env := newServerEnvWith(t, func(d *Deps) {
		d.Projection, d.Snapshots = cfg, storeOf(t, cfg)
		d.Engine, d.ClusterEngines = first, map[string]Engine{"staging": staging}
		d.EngineWebhookSecret = []byte(testWebhookSecret)
		d.ClusterWebhookSecrets = map[string][]byte{"staging": []byte("staging-secret")}
	})
	push := `{"ref":"refs/heads/main"}`
	mac := hmac.New(sha256.New, []byte("staging-secret"))
	mac.Write([]byte(push))
	stagingSig := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	for _, tc := range []struct {
		path, sig string
		code      int
	}{
		{webhookPath + "?cluster=staging", stagingSig, http.StatusAccepted},
		{webhookPath + "?cluster=staging", githubSignature(push), http.StatusUnauthorized},
		{webhookPath, githubSignature(push), http.StatusAccepted},
		{webhookPath, stagingSig, http.StatusUnauthorized},
	} {
		if r := env.post(t, tc.path, "", push, "X-Hub-Signature-256", tc.sig, "X-GitHub-Event", "push"); r.code != tc.code {
			t.Errorf("POST %s: %d %s, want %d", tc.path, r.code, r.body, tc.code)
		}
	}
	if _, trig := staging.calls(); len(trig) != 1 {
		t.Errorf("staging's engine was triggered %d times, want once", len(trig))
	}
	if _, trig := first.calls(); len(trig) != 1 {
		t.Errorf("the first cluster's engine was triggered %d times, want once", len(trig))
	}
}
