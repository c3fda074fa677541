package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/auth/authtest"
	"github.com/hanzoai/deploy/cluster"
	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/engine"
	"github.com/hanzoai/deploy/engine/enginetest"
	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/projection"
)

// TestPlaneRunsTheEngine: with the engine configured from the environment,
// the plane runs its loop; the App it applies from the git server comes back
// through the watch into the projection, marked with the commit.
func TestPlaneRunsTheEngine(t *testing.T) {
	c := clustertest.Start(t)
	srv := enginetest.NewServer(t)
	repo := srv.NewRepo(t, "fleet")
	sha := repo.Commit(t, "one app", map[string]string{
		"crs/web.yaml": "apiVersion: hanzo.ai/v1\nkind: App\nmetadata: {name: web}\nspec: {image: {repository: ghcr.io/hanzoai/web, tag: v1}}\n",
	})
	if _, err := c.Clientset().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "hanzo"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env, err := engineFromEnv(envMap(map[string]string{
		"DEPLOY_ENGINE_ENABLED": "true", "DEPLOY_ENGINE_REPO": repo.URL, "DEPLOY_ENGINE_PATH": "crs",
		"DEPLOY_ENGINE_INTERVAL": "200ms", "DEPLOY_ENGINE_CACHE_DIR": filepath.Join(t.TempDir(), "cache"),
	}), projection.DefaultNamespaces())
	if err != nil {
		t.Fatal(err)
	}
	logs := &authtest.LogBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	eng, err := engine.New(env.Config, c.Config, log)
	if err != nil {
		t.Fatal(err)
	}
	pcfg := projection.DefaultConfig()
	src := eng.Config().Source()
	pcfg.Engine, pcfg.EngineInstance = &src, eng.Config().Instance
	feed := cluster.NewFeed()
	w, err := cluster.NewWatcher(c.Config, "", feed, cluster.Options{Namespaces: pcfg.Namespaces, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := newPlane(ctx, planeConfig{Log: log, Projection: pcfg, Watcher: w, Feed: feed, Auth: auth.Config{}, ClusterName: "in-cluster", Engine: eng})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("plane: %v", err)
		}
	})
	c.WaitFor(t, 30*time.Second, func() (bool, error) {
		app := p.store.Snapshot().Get("hanzo", "web")
		return app != nil, nil
	})
	live, err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace("hanzo").Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := live.GetAnnotations()[projection.AnnotationEngineRevision]; got != sha {
		t.Errorf("revision annotation %q, want %s", got, sha)
	}
	if st := eng.Status(); st.Runs < 1 || st.LastRun == nil || st.LastRun.Trigger != gitops.TriggerInterval || st.Revision != sha {
		t.Errorf("engine status %+v", st)
	}
	// The App comes back through the watch as managed: its Application's
	// source is the engine's, its sync revision the commit.
	c.WaitFor(t, 30*time.Second, func() (bool, error) {
		app := p.store.Snapshot().Get("hanzo", "web")
		return app != nil && app.Engine != nil && app.Engine.Revision == sha, nil
	})
	got := p.store.Snapshot().Get("hanzo", "web").Application()
	if src := got.Spec.Source; src.RepoURL != repo.URL || src.TargetRevision != "main" || src.Path != "crs" {
		t.Errorf("spec.source %+v, want the engine's repo, ref and path", src)
	}
	if got.Status.Sync.Revision != sha {
		t.Errorf("status.sync.revision %q, want %s", got.Status.Sync.Revision, sha)
	}
	// The loop's runs reach the metrics.
	rec := httptest.NewRecorder()
	p.metrics.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if body := rec.Body.String(); !strings.Contains(body, `deployd_engine_runs_total{result="succeeded"}`) {
		t.Errorf("the metrics hold no succeeded engine run:\n%.2000s", body)
	}
}

// TestReconcileRoute: deployd served against the real API server and the
// git server. Only a SuperAdmin's POST /v1/deploy/reconcile runs the engine;
// its report counts the 20 Apps of two namespaces Synced at the commit, and
// the list and the stream show them; a commit bumping one tag patches that
// App alone (every other resourceVersion read back unchanged) and the stream
// shows the change.
func TestReconcileRoute(t *testing.T) {
	c := clustertest.Start(t)
	srv := enginetest.NewServer(t)
	repo := srv.NewRepo(t, "fleet")
	files := map[string]string{}
	appFile := func(ns, name, tag string) string {
		org := ""
		if ns == "tenant-acme" {
			org = "\n  labels: {hanzo.ai/org: acme}"
		}
		return fmt.Sprintf("apiVersion: hanzo.ai/v1\nkind: App\nmetadata:\n  name: %s\n  namespace: %s%s\nspec:\n  image: {repository: ghcr.io/hanzoai/%s, tag: %s}\n", name, ns, org, name, tag)
	}
	for i := range 20 {
		ns := []string{"hanzo", "tenant-acme"}[i%2]
		name := fmt.Sprintf("app-%02d", i)
		files["crs/"+ns+"/"+name+".yaml"] = appFile(ns, name, "v1.0.0")
	}
	sha := repo.Commit(t, "twenty apps", files)
	for _, ns := range []string{"hanzo", "tenant-acme"} {
		if _, err := c.Clientset().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eenv, err := engineFromEnv(envMap(map[string]string{
		"DEPLOY_ENGINE_ENABLED": "true", "DEPLOY_ENGINE_REPO": repo.URL, "DEPLOY_ENGINE_PATH": "crs",
		"DEPLOY_ENGINE_INTERVAL": "0", "DEPLOY_ENGINE_CACHE_DIR": filepath.Join(t.TempDir(), "cache"),
	}), projection.DefaultNamespaces())
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(eenv.Config, c.Config, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	env := startPlaneWith(t, c.Config, func(pc *planeConfig) {
		src := eng.Config().Source()
		pc.Engine = eng
		pc.Projection.Engine, pc.Projection.EngineInstance = &src, eng.Config().Instance
	})
	env.waitReady(t, 30*time.Second)
	root := env.token(t, admin, time.Hour)

	// Nobody but a SuperAdmin starts a run.
	for _, who := range []struct {
		token string
		code  int
	}{{"", http.StatusUnauthorized}, {env.token(t, acmeMember, time.Hour), http.StatusForbidden}, {env.token(t, globexAdmin, time.Hour), http.StatusForbidden}} {
		if r := env.send(t, nil, http.MethodPost, "/v1/deploy/reconcile", who.token, ""); r.code != who.code {
			t.Fatalf("reconcile as %q: %d %s, want %d", who.token, r.code, r.body, who.code)
		}
	}
	if runs := eng.Status().Runs; runs != 0 {
		t.Fatalf("refused requests ran the engine %d times", runs)
	}

	events := follow(t, nil, env.URL+"/v1/deploy/stream/applications", root)
	reconcile := func() gitops.ReconcileReport {
		t.Helper()
		r := env.send(t, nil, http.MethodPost, "/v1/deploy/reconcile", root, "")
		var rep gitops.ReconcileReport
		if r.code != http.StatusOK || json.Unmarshal([]byte(r.body), &rep) != nil {
			t.Fatalf("reconcile: %d %s", r.code, r.body)
		}
		return rep
	}
	rep := reconcile()
	if rep.Declared != 20 || rep.Synced != 20 || rep.Failed != 0 || rep.Revision != sha || len(rep.Results) != 20 {
		t.Fatalf("first report: declared %d synced %d failed %d revision %s (want %s), %d results", rep.Declared, rep.Synced, rep.Failed, rep.Revision, sha, len(rep.Results))
	}
	for _, res := range rep.Results {
		if res.Status != gitops.ResultSynced {
			t.Errorf("%s: %s %s", res.Resource, res.Status, res.Message)
		}
	}
	managed := func(revision string) (int, error) {
		r := env.send(t, nil, http.MethodGet, "/v1/deploy/applications", root, "")
		var l struct {
			Items []struct {
				Status struct{ Sync struct{ Revision string } }
			}
		}
		if err := json.Unmarshal([]byte(r.body), &l); err != nil {
			return 0, err
		}
		n := 0
		for _, a := range l.Items {
			if a.Status.Sync.Revision == revision {
				n++
			}
		}
		return n, nil
	}
	c.WaitFor(t, 30*time.Second, func() (bool, error) {
		n, err := managed(sha)
		return n == 20, err
	})
	for i := range 20 {
		ns := []string{"hanzo", "tenant-acme"}[i%2]
		name := fmt.Sprintf("app-%02d", i)
		c.WaitFor(t, 10*time.Second, func() (bool, error) {
			return slices.ContainsFunc(events.of(ns, name), func(e appEvent) bool { return e.Revision == sha }), nil
		})
	}

	// One tag bumped: that App alone is patched.
	before := map[string]string{}
	list, err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range list.Items {
		before[o.GetNamespace()+"/"+o.GetName()] = o.GetResourceVersion()
	}
	sha2 := repo.Commit(t, "bump app-03", map[string]string{"crs/tenant-acme/app-03.yaml": appFile("tenant-acme", "app-03", "v1.1.0")})
	rep = reconcile()
	if rep.Revision != sha2 || rep.Synced != 20 {
		t.Fatalf("second report: revision %s (want %s), synced %d", rep.Revision, sha2, rep.Synced)
	}
	for _, res := range rep.Results {
		changed := strings.HasSuffix(res.Resource, "/tenant-acme/app-03")
		if changed == (res.Message == "unchanged") {
			t.Errorf("%s: %q", res.Resource, res.Message)
		}
	}
	list, err = c.Dynamic().Resource(projection.KindApp.GVR()).Namespace("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range list.Items {
		key := o.GetNamespace() + "/" + o.GetName()
		moved := o.GetResourceVersion() != before[key]
		if moved != (key == "tenant-acme/app-03") {
			t.Errorf("%s: resourceVersion %s → %s", key, before[key], o.GetResourceVersion())
		}
	}
	c.WaitFor(t, 10*time.Second, func() (bool, error) {
		return slices.ContainsFunc(events.of("tenant-acme", "app-03"), func(e appEvent) bool { return e.Type == "MODIFIED" && e.Revision == sha2 }), nil
	})
}
