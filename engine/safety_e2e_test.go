package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/engine/enginetest"
	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/projection"
)

// The engine when the repository is wrong, git is down, a stage fails or
// an operator steps in: against a real kube-apiserver and a real git
// server, one cluster for every scenario.
func TestEngineSafetyE2E(t *testing.T) {
	c := clustertest.Start(t)
	srv := enginetest.NewServer(t)
	createNamespaces(t, c, "hanzo")

	t.Run("a misspelt document prunes nothing", func(t *testing.T) { testMisspeltNotPruned(t, c, srv) })
	t.Run("opt-outs hold under prune and self-heal", func(t *testing.T) { testOptOuts(t, c, srv) })
	t.Run("ownership", func(t *testing.T) { testOwnership(t, c, srv) })
	t.Run("git down", func(t *testing.T) { testGitDown(t, c, srv) })
	t.Run("panics are the run's error", func(t *testing.T) { testPanics(t, c, srv) })
	t.Run("no lost trigger", func(t *testing.T) { testNoLostTrigger(t, c, srv) })
	t.Run("suspend", func(t *testing.T) { testSuspend(t, c, srv) })
}

func pruning(cfg *Config) { cfg.Prune, cfg.PruneMax, cfg.PruneMaxRatio = true, 10, 1 }

func reconcile(t *testing.T, e *testEngine) *gitops.ReconcileReport {
	t.Helper()
	rep, err := e.Reconcile(t.Context(), gitops.TriggerRequest, false)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func annotateApp(t *testing.T, c *clustertest.Cluster, ns, name string, ann map[string]string) {
	t.Helper()
	patch := `{"metadata":{"annotations":{`
	first := true
	for k, v := range ann {
		if !first {
			patch += ","
		}
		first = false
		patch += `"` + k + `":"` + v + `"`
	}
	patch += `}}}`
	if _, err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace(ns).Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func setTag(t *testing.T, c *clustertest.Cluster, ns, name, tag string) {
	t.Helper()
	patch := `{"spec":{"image":{"tag":"` + tag + `"}}}`
	if _, err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace(ns).Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
}

func liveTag(t *testing.T, c *clustertest.Cluster, ns, name string) string {
	t.Helper()
	return tagOf(getApp(t, c, ns, name))
}

// A document whose apiVersion or kind is misspelt is refused, and the live
// App it meant to declare stays: the repository still names it.
func testMisspeltNotPruned(t *testing.T, c *clustertest.Cluster, srv *enginetest.Server) {
	repo := srv.NewRepo(t, "safety-typo")
	repo.Commit(t, "two apps", map[string]string{"crs/a.yaml": appYAML("typo-a", "hanzo", "v1"), "crs/b.yaml": appYAML("typo-b", "", "v1"), "crs/c.yaml": appYAML("typo-c", "hanzo", "v1")})
	e := newTestEngine(t, c, repo.URL, "typo", pruning)
	if rep := reconcile(t, e); rep.Synced != 3 {
		t.Fatalf("first run: %+v", rep)
	}
	repo.Commit(t, "typos", map[string]string{
		"crs/a.yaml": strings.Replace(appYAML("typo-a", "hanzo", "v2"), "apiVersion: hanzo.ai/v1", "apiVersion: hanzo.ai/v2", 1),
		// No namespace: the default one is what it names.
		"crs/b.yaml": strings.Replace(appYAML("typo-b", "", "v2"), "kind: App", "kind: Ap", 1),
		"crs/c.yaml": "",
	})
	rep := reconcile(t, e)
	if got := resultOf(rep, "hanzo.ai/v2/App/hanzo/typo-a"); got.Status != gitops.ResultSyncFailed || !strings.Contains(got.Message, "allow-list") {
		t.Errorf("the misspelt apiVersion: %+v", got)
	}
	if got := resultOf(rep, "hanzo.ai/v1/Ap//typo-b"); got.Status != gitops.ResultSyncFailed {
		t.Errorf("the misspelt kind: %+v", got)
	}
	for _, name := range []string{"typo-a", "typo-b"} {
		if !appExists(t, c, "hanzo", name) {
			t.Errorf("App %s was deleted though the repository still names it", name)
		}
		if r := resultOf(rep, "hanzo.ai/v1/App/hanzo/"+name); r.Status == gitops.ResultPruned || r.Status == gitops.ResultPruneSkipped {
			t.Errorf("App %s was a prune candidate: %+v", name, r)
		}
	}
	// What the repository no longer names is still pruned.
	if appExists(t, c, "hanzo", "typo-c") || resultOf(rep, "hanzo.ai/v1/App/hanzo/typo-c").Status != gitops.ResultPruned {
		t.Errorf("typo-c, removed from the repository, was not pruned: %+v", resultOf(rep, "hanzo.ai/v1/App/hanzo/typo-c"))
	}
}

// prune: disabled keeps an object the repository dropped; reconcile:
// disabled keeps a hotfix through self-heal and prune alike.
func testOptOuts(t *testing.T, c *clustertest.Cluster, srv *enginetest.Server) {
	repo := srv.NewRepo(t, "safety-optout")
	repo.Commit(t, "three apps", map[string]string{"crs/k.yaml": appYAML("opt-keep", "hanzo", "v1"), "crs/h.yaml": appYAML("opt-hot", "hanzo", "v1"), "crs/o.yaml": appYAML("opt-other", "hanzo", "v1")})
	e := newTestEngine(t, c, repo.URL, "optout", pruning)
	reconcile(t, e)
	annotateApp(t, c, "hanzo", "opt-keep", map[string]string{projection.AnnotationPrune: projection.Disabled})
	annotateApp(t, c, "hanzo", "opt-hot", map[string]string{projection.AnnotationReconcile: projection.Disabled})
	setTag(t, c, "hanzo", "opt-hot", "v1-hotfix")
	setTag(t, c, "hanzo", "opt-other", "v1-drift")

	rep := reconcile(t, e) // self-heal
	if got := resultOf(rep, "hanzo.ai/v1/App/hanzo/opt-hot"); got.Status != gitops.ResultSkipped {
		t.Errorf("the hotfixed App under self-heal: %+v, want Skipped", got)
	}
	if tag := liveTag(t, c, "hanzo", "opt-hot"); tag != "v1-hotfix" {
		t.Errorf("self-heal reverted the hotfix: tag %s", tag)
	}
	if tag := liveTag(t, c, "hanzo", "opt-other"); tag != "v1" {
		t.Errorf("the other App was not healed: tag %s", tag)
	}
	if rep.Declared != 3 || rep.Synced != 2 {
		t.Errorf("declared %d synced %d, want 3 and 2 (a skipped object is declared)", rep.Declared, rep.Synced)
	}

	repo.Commit(t, "drop two", map[string]string{"crs/k.yaml": "", "crs/h.yaml": ""})
	rep = reconcile(t, e)
	if got := resultOf(rep, "hanzo.ai/v1/App/hanzo/opt-keep"); got.Status != gitops.ResultPruneSkipped || !strings.Contains(got.Message, projection.AnnotationPrune) {
		t.Errorf("the opted-out App: %+v", got)
	}
	if got := resultOf(rep, "hanzo.ai/v1/App/hanzo/opt-hot"); got.Status != gitops.ResultSkipped {
		t.Errorf("the hotfixed App under prune: %+v, want Skipped", got)
	}
	for _, name := range []string{"opt-keep", "opt-hot", "opt-other"} {
		if !appExists(t, c, "hanzo", name) {
			t.Errorf("App %s was pruned", name)
		}
	}
	if rep.Pruned != 0 {
		t.Errorf("pruned %d, want 0", rep.Pruned)
	}
}

// An object labelled for another instance is never taken; an unlabelled
// one is adopted.
func testOwnership(t *testing.T, c *clustertest.Cluster, srv *enginetest.Server) {
	theirs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "hanzo.ai/v1", "kind": "App",
		"metadata": map[string]any{"name": "own-theirs", "namespace": "hanzo", "labels": map[string]any{projection.LabelEngineInstance: "elsewhere"}},
		"spec":     map[string]any{"image": map[string]any{"repository": "ghcr.io/hanzoai/own-theirs", "tag": "v7"}},
	}}
	loose := theirs.DeepCopy()
	loose.SetName("own-loose")
	loose.SetLabels(nil)
	for _, u := range []*unstructured.Unstructured{theirs, loose} {
		if _, err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace("hanzo").Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	before := getApp(t, c, "hanzo", "own-theirs").GetResourceVersion()
	repo := srv.NewRepo(t, "safety-own")
	repo.Commit(t, "both", map[string]string{"crs/t.yaml": appYAML("own-theirs", "hanzo", "v1"), "crs/l.yaml": appYAML("own-loose", "hanzo", "v1")})
	e := newTestEngine(t, c, repo.URL, "own", pruning)
	rep := reconcile(t, e)
	got := resultOf(rep, "hanzo.ai/v1/App/hanzo/own-theirs")
	if got.Status != gitops.ResultSyncFailed || !strings.Contains(got.Message, `"elsewhere"`) {
		t.Errorf("another instance's App: %+v, want SyncFailed naming the owner", got)
	}
	if rv := getApp(t, c, "hanzo", "own-theirs").GetResourceVersion(); rv != before {
		t.Errorf("another instance's App was written (resourceVersion %s → %s)", before, rv)
	}
	if got := resultOf(rep, "hanzo.ai/v1/App/hanzo/own-loose"); got.Status != gitops.ResultSynced || !strings.HasPrefix(got.Message, "adopted") {
		t.Errorf("the unlabelled App: %+v, want Synced adopted", got)
	}
	if l := getApp(t, c, "hanzo", "own-loose").GetLabels()[projection.LabelEngineInstance]; l != "own" {
		t.Errorf("the adopted App's label: %q", l)
	}
}

// While git is down every run heals from the last good commit, the status
// says stale since when, and a fresh process heals from the cache folder
// its predecessor left.
func testGitDown(t *testing.T, c *clustertest.Cluster, srv *enginetest.Server) {
	repo := srv.NewRepo(t, "safety-down")
	sha := repo.Commit(t, "one app", map[string]string{"crs/d.yaml": appYAML("down-app", "hanzo", "v1")})
	cache := t.TempDir() + "/cache"
	e := newTestEngine(t, c, repo.URL, "down", func(cfg *Config) { cfg.CacheDir = cache })
	reconcile(t, e)

	restore := srv.Down(t)
	setTag(t, c, "hanzo", "down-app", "v9-by-hand")
	rep := reconcile(t, e)
	if rep.Revision != sha || resultOf(rep, "hanzo.ai/v1/App/hanzo/down-app").Message != "self-healed: live state had drifted from git" {
		t.Fatalf("a run with git down: %+v", rep)
	}
	if tag := liveTag(t, c, "hanzo", "down-app"); tag != "v1" {
		t.Errorf("not healed from the cached commit: tag %s", tag)
	}
	st := e.Status()
	if st.State != gitops.EngineStateStale || st.Stale == nil || st.Stale.Error == "" || st.Stale.Since.IsZero() {
		t.Fatalf("status with git down: state %q stale %+v", st.State, st.Stale)
	}
	since := st.Stale.Since
	reconcile(t, e)
	if st := e.Status(); st.Stale == nil || !st.Stale.Since.Equal(since) {
		t.Errorf("a second failed fetch moved stale.since: %+v, want %v", st.Stale, since)
	}

	// A process started while git is down heals from the cache folder.
	cold := newTestEngine(t, c, repo.URL, "down", func(cfg *Config) { cfg.CacheDir = cache })
	setTag(t, c, "hanzo", "down-app", "v8-by-hand")
	rep, err := cold.Reconcile(t.Context(), gitops.TriggerInterval, false)
	if err != nil || rep.Revision != sha {
		t.Fatalf("a cold process with git down: %v, %+v", err, rep)
	}
	if tag := liveTag(t, c, "hanzo", "down-app"); tag != "v1" {
		t.Errorf("the cold process did not heal: tag %s", tag)
	}
	restore()
	reconcile(t, e)
	if st := e.Status(); st.State != gitops.EngineStateOK || st.Stale != nil {
		t.Errorf("status once git is back: %q %+v", st.State, st.Stale)
	}
}

// A panic in render, in an apply worker or in prune is recorded as the
// run's error; the next run works.
func testPanics(t *testing.T, c *clustertest.Cluster, srv *enginetest.Server) {
	repo := srv.NewRepo(t, "safety-panic")
	repo.Commit(t, "apps", map[string]string{"crs/p1.yaml": appYAML("panic-1", "hanzo", "v1"), "crs/p2.yaml": appYAML("panic-2", "hanzo", "v1")})
	e := newTestEngine(t, c, repo.URL, "panic", pruning)
	var runs []error
	e.OnRun(func(_ *gitops.ReconcileReport, err error, _ time.Duration, _ time.Time) { runs = append(runs, err) })
	for _, stage := range []string{"render", "apply", "prune"} {
		runs = runs[:0]
		e.SetStageHook(func(s string) {
			if s == stage {
				panic("injected into " + stage)
			}
		})
		if stage != "render" {
			setTag(t, c, "hanzo", "panic-1", "v0-"+stage) // something to apply
		}
		rep, err := e.Reconcile(t.Context(), gitops.TriggerRequest, false)
		if err == nil || rep != nil {
			t.Fatalf("%s: a run that panicked answered %+v, %v", stage, rep, err)
		}
		st := e.Status()
		if st.LastRun == nil || st.LastRun.Error == "" || !strings.Contains(st.LastRun.Error, "internally") {
			t.Errorf("%s: lastRun %+v, want the panic as its error", stage, st.LastRun)
		}
		if len(runs) != 1 || runs[0] == nil {
			t.Errorf("%s: the metrics' hook saw %v", stage, runs)
		}
		e.SetStageHook(nil)
		if rep := reconcile(t, e); rep.Failed != 0 {
			t.Errorf("%s: the run after: %+v", stage, rep)
		}
		if st := e.Status(); st.LastRun.Error != "" {
			t.Errorf("%s: the run after still shows an error: %+v", stage, st.LastRun)
		}
	}
}

// A webhook that arrives while a run is in flight (its fetch done) leads to
// a run that fetches after it: the push is applied without waiting for an
// interval.
func testNoLostTrigger(t *testing.T, c *clustertest.Cluster, srv *enginetest.Server) {
	repo := srv.NewRepo(t, "safety-trigger")
	repo.Commit(t, "v1", map[string]string{"crs/t.yaml": appYAML("trig-app", "hanzo", "v1")})
	e := newTestEngine(t, c, repo.URL, "trig", nil) // interval 0: triggers only
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { e.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	inRender := make(chan struct{})
	proceed := make(chan struct{})
	var once sync.Once
	e.SetStageHook(func(s string) {
		if s == "render" {
			once.Do(func() { close(inRender); <-proceed })
		}
	})
	done := make(chan error, 1)
	go func() { _, err := e.Reconcile(t.Context(), gitops.TriggerRequest, false); done <- err }()
	<-inRender // the run fetched v1
	sha := repo.Commit(t, "v2", map[string]string{"crs/t.yaml": appYAML("trig-app", "hanzo", "v2")})
	e.Trigger(gitops.TriggerWebhook)
	c.WaitFor(t, 10*time.Second, func() (bool, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.flights[0].next != nil, nil // the loop queued the webhook's run
	})
	close(proceed)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The webhook's run applies v2 and then records itself as the last run:
	// wait for both (the annotation is visible before the run has ended).
	c.WaitFor(t, 20*time.Second, func() (bool, error) {
		st := e.Status()
		return getApp(t, c, "hanzo", "trig-app").GetAnnotations()[projection.AnnotationEngineRevision] == sha &&
			st.LastRun != nil && st.LastRun.Trigger == gitops.TriggerWebhook, nil
	})
}

// While suspended a reconcile request is refused naming who and when, a
// write-back commits nothing, and interval runs are skipped; resume runs.
func testSuspend(t *testing.T, c *clustertest.Cluster, srv *enginetest.Server) {
	repo := srv.NewRepo(t, "safety-suspend")
	repo.Commit(t, "v1", map[string]string{"crs/s.yaml": appYAML("susp-app", "hanzo", "v1")})
	e := newTestEngine(t, c, repo.URL, "susp", pushOn)
	reconcile(t, e)
	st, err := e.Suspend(t.Context(), "Ada Lovelace")
	if err != nil || st.State != gitops.EngineStateSuspended || st.Suspended == nil || st.Suspended.By != "Ada Lovelace" {
		t.Fatalf("suspend: %v %+v", err, st)
	}
	_, err = e.Reconcile(t.Context(), gitops.TriggerRequest, false)
	var se *SuspendedError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "Ada Lovelace") || !se.Conflict() {
		t.Fatalf("a request while suspended: %v", err)
	}
	if _, err := e.Reconcile(t.Context(), gitops.TriggerInterval, false); !errors.Is(err, errSkipped) {
		t.Fatalf("an interval run while suspended: %v", err)
	}
	head := repo.Head(t)
	if _, err := e.WriteTag(t.Context(), TagWrite{Namespace: "hanzo", Name: "susp-app", Tag: "v2", Verb: "rollback"}); err == nil {
		t.Fatal("a write-back while suspended was accepted")
	}
	if repo.Head(t) != head {
		t.Error("a write-back while suspended committed")
	}
	runs := e.Status().Runs
	if _, err := e.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := e.Status(); st.State != gitops.EngineStateOK || st.Runs != runs {
		t.Errorf("after resume: %+v", st)
	}
	reconcile(t, e)
}
