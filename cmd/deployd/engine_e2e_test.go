package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
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
	live, err := c.Dynamic().Resource(cluster.GVR(projection.KindApp)).Namespace("hanzo").Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := live.GetAnnotations()[projection.AnnotationEngineRevision]; got != sha {
		t.Errorf("revision annotation %q, want %s", got, sha)
	}
	if st := eng.Status(); st.Runs < 1 || st.LastRun == nil || st.LastRun.Trigger != projection.TriggerInterval || st.Revision != sha {
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
