package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/engine/enginetest"
	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/projection"
)

// The engine against a real kube-apiserver and a real git server (the
// system git's http-backend), one cluster for every scenario; each has its
// own repository, instance and App names.
func TestEngineE2E(t *testing.T) {
	c := clustertest.Start(t)
	srv := enginetest.NewServer(t)
	createNamespaces(t, c, "hanzo", "hanzo-devnet", "tenant-acme")

	t.Run("reconcile, bump, unchanged", func(t *testing.T) { testReconcileAndBump(t, c, srv) })
	t.Run("prune and fuse", func(t *testing.T) { testPrune(t, c, srv) })
	t.Run("broken yaml and policy", func(t *testing.T) { testBrokenAndPolicy(t, c, srv) })
	t.Run("self-heal", func(t *testing.T) { testSelfHeal(t, c, srv) })
	t.Run("single flight", func(t *testing.T) { testSingleFlight(t, c, srv) })
	t.Run("dry run", func(t *testing.T) { testDryRun(t, c, srv) })
	t.Run("least privilege", func(t *testing.T) { testLeastPrivilege(t, c, srv) })
	t.Run("the Lease with least privilege", func(t *testing.T) { testLeaseLeastPrivilege(t, c, srv) })
	t.Run("kustomization", func(t *testing.T) { testKustomization(t, c, srv) })
	// make bench-engine's code, on a small fleet (the benchmark itself is
	// not run by make test).
	t.Run("bench smoke", func(t *testing.T) {
		createNamespaces(t, c, "hanzo-mainnet", "hanzo-testnet")
		r := runEngineVsKubectl(t, c, srv, 10, "smoke-")
		t.Logf("10 Apps: engine cold %v warm %v; kubectl (%v) cold %v warm %v", r.engineCold, r.engineWarm, r.kubectl, r.kubectlCold, r.kubectlWarm)
	})
}

// Checks 1 and 2: 20 Apps in two namespaces are created and report Synced
// with the SHA; a second run sends nothing; a tag bump patches that App
// only.
func testReconcileAndBump(t *testing.T, c *clustertest.Cluster, srv *enginetest.Server) {
	repo := srv.NewRepo(t, "fleet1")
	files := map[string]string{}
	for i := range 20 {
		ns := "hanzo"
		if i%2 == 1 {
			ns = "hanzo-devnet"
		}
		// Every fourth App names no namespace: DEPLOY_ENGINE_NAMESPACE
		// (hanzo) fills it in.
		declared := ns
		if i%4 == 0 {
			declared = ""
		}
		files[fmt.Sprintf("crs/%s/f1-app%02d.yaml", ns, i)] = appYAML(fmt.Sprintf("f1-app%02d", i), declared, "v1.0.0")
	}
	files["crs/README.md"] = "not a manifest: ["
	sha1 := repo.Commit(t, "twenty apps", files)
	e := newTestEngine(t, c, repo.URL, "f1", nil)

	rep, err := e.Reconcile(t.Context(), gitops.TriggerRequest, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Declared != 20 || rep.Synced != 20 || rep.Failed != 0 || rep.Revision != sha1 || rep.Instance != "f1" {
		t.Fatalf("report: declared %d synced %d failed %d revision %s instance %s; want 20/20/0 %s f1", rep.Declared, rep.Synced, rep.Failed, rep.Revision, rep.Instance, sha1)
	}
	if st := statuses(rep); st[gitops.ResultSynced] != 20 || len(st) != 1 {
		t.Fatalf("statuses %v", st)
	}
	for i, r := range rep.Results {
		if r.Message != "created" {
			t.Errorf("%s: message %q, want created", r.Resource, r.Message)
		}
		if i > 0 && rep.Results[i-1].Resource >= r.Resource {
			t.Errorf("results not sorted at %s", r.Resource)
		}
	}
	if e.applies.Load() != 20 {
		t.Errorf("applies %d, want 20", e.applies.Load())
	}
	// The report's JSON keys are exactly the contract's, in order.
	b, _ := json.Marshal(rep)
	if !strings.HasPrefix(string(b), `{"declared":20,"failed":0,"instance":"f1","prune":false,"pruned":0,"results":[{"message":"created","resource":"hanzo.ai/v1/App/hanzo-devnet/f1-app01","status":"Synced"}`) {
		t.Errorf("report JSON starts %.200s", b)
	}
	app := getApp(t, c, "hanzo", "f1-app00")
	ann := app.GetAnnotations()
	if app.GetLabels()[projection.LabelEngineInstance] != "f1" || ann[projection.AnnotationEngineRevision] != sha1 ||
		ann[projection.AnnotationEngineRun] != e.Status().LastRun.ID || ann[projection.AnnotationEngineAppliedAt] == "" {
		t.Fatalf("App f1-app00: labels %v annotations %v", app.GetLabels(), ann)
	}
	if st := e.Status(); st.Revision != sha1 || st.Runs != 1 || st.LastRun.Synced != 20 || st.LastRun.Trigger != "request" {
		t.Errorf("status %+v", st)
	}
	if d, ok := e.Desired(projection.KindApp, "hanzo", "f1-app04"); !ok || d["metadata"].(map[string]any)["namespace"] != "hanzo" {
		t.Errorf("Desired f1-app04: %v, %v", d, ok)
	}
	if _, ok := e.Desired(projection.KindApp, "hanzo", "nope"); ok {
		t.Error("Desired of an undeclared App answered")
	}

	// Unchanged: nothing sent, nothing moves.
	before := versions(t, c, "hanzo", "hanzo-devnet")
	e.applies.Store(0)
	rep, err = e.Reconcile(t.Context(), gitops.TriggerRequest, false)
	if err != nil {
		t.Fatal(err)
	}
	if e.applies.Load() != 0 || rep.Synced != 20 || resultOf(rep, "hanzo.ai/v1/App/hanzo/f1-app00").Message != "unchanged" {
		t.Fatalf("second run: %d applies, %d synced, %+v", e.applies.Load(), rep.Synced, rep.Results[0])
	}
	if after := versions(t, c, "hanzo", "hanzo-devnet"); !maps.Equal(before, after) {
		t.Fatalf("an unchanged run moved resourceVersions:\nbefore %v\nafter  %v", before, after)
	}

	// Check 2: one tag bump patches that App only.
	sha2 := repo.Commit(t, "bump f1-app07", map[string]string{"crs/hanzo-devnet/f1-app07.yaml": appYAML("f1-app07", "hanzo-devnet", "v1.0.1")})
	e.applies.Store(0)
	rep, err = e.Reconcile(t.Context(), gitops.TriggerRequest, false)
	if err != nil {
		t.Fatal(err)
	}
	if e.applies.Load() != 1 || rep.Revision != sha2 || resultOf(rep, "hanzo.ai/v1/App/hanzo-devnet/f1-app07").Message != "configured" {
		t.Fatalf("bump: %d applies (want 1), revision %s, result %+v", e.applies.Load(), rep.Revision, resultOf(rep, "hanzo.ai/v1/App/hanzo-devnet/f1-app07"))
	}
	after := versions(t, c, "hanzo", "hanzo-devnet")
	for k, rv := range before {
		changed := after[k] != rv
		if changed != (k == "hanzo-devnet/f1-app07") {
			t.Errorf("%s: resourceVersion %s → %s", k, rv, after[k])
		}
	}
	bumped := getApp(t, c, "hanzo-devnet", "f1-app07")
	if tag, _, _ := unstructuredString(bumped.Object, "spec", "image", "tag"); tag != "v1.0.1" || bumped.GetAnnotations()[projection.AnnotationEngineRevision] != sha2 {
		t.Errorf("bumped App: tag %q, revision %q; want v1.0.1, %s", tag, bumped.GetAnnotations()[projection.AnnotationEngineRevision], sha2)
	}
	if other := getApp(t, c, "hanzo", "f1-app00"); other.GetAnnotations()[projection.AnnotationEngineRevision] != sha1 {
		t.Errorf("an unchanged App's revision moved to %q", other.GetAnnotations()[projection.AnnotationEngineRevision])
	}
}

func unstructuredString(m map[string]any, path ...string) (string, bool, error) {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur = mm[p]
	}
	s, ok := cur.(string)
	return s, ok, nil
}

// Check 3: prune off lists candidates and deletes nothing; prune on deletes
// the one removed App; removing half trips the fuse; an unlabelled App is
// never touched.
func testPrune(t *testing.T, c *clustertest.Cluster, srv *enginetest.Server) {
	repo := srv.NewRepo(t, "fleet2")
	files := map[string]string{}
	for i := range 10 {
		files[fmt.Sprintf("crs/p-app%d.yaml", i)] = appYAML(fmt.Sprintf("p-app%d", i), "hanzo", "v1")
	}
	repo.Commit(t, "ten apps", files)
	unlabelled := c.Apply(t, clustertest.Object(t, appYAML("p-stray", "hanzo", "v9")))[0]

	off := newTestEngine(t, c, repo.URL, "f2", nil)
	if _, err := off.Reconcile(t.Context(), gitops.TriggerRequest, false); err != nil {
		t.Fatal(err)
	}
	repo.Commit(t, "remove p-app9", map[string]string{"crs/p-app9.yaml": ""})
	rep, err := off.Reconcile(t.Context(), gitops.TriggerRequest, false)
	if err != nil {
		t.Fatal(err)
	}
	if r := resultOf(rep, "hanzo.ai/v1/App/hanzo/p-app9"); r.Status != gitops.ResultPruneSkipped || r.Message != "pruning is off" || rep.Pruned != 0 || rep.Declared != 9 {
		t.Fatalf("prune off: %+v, pruned %d, declared %d", r, rep.Pruned, rep.Declared)
	}
	if !appExists(t, c, "hanzo", "p-app9") || off.deletes.Load() != 0 {
		t.Fatal("prune off deleted")
	}

	on := newTestEngine(t, c, repo.URL, "f2", func(cfg *Config) { cfg.Prune, cfg.PruneMax, cfg.PruneMaxRatio = true, 3, 0.2 })
	rep, err = on.Reconcile(t.Context(), gitops.TriggerRequest, false)
	if err != nil {
		t.Fatal(err)
	}
	if r := resultOf(rep, "hanzo.ai/v1/App/hanzo/p-app9"); r.Status != gitops.ResultPruned || rep.Pruned != 1 || !rep.Prune {
		t.Fatalf("prune on: %+v, pruned %d", r, rep.Pruned)
	}
	if appExists(t, c, "hanzo", "p-app9") {
		t.Fatal("p-app9 is still there after it was pruned")
	}

	// Half the files removed: 4 of 9 is over both limits; nothing goes.
	before := versions(t, c, "hanzo")
	repo.Commit(t, "remove half", map[string]string{"crs/p-app0.yaml": "", "crs/p-app1.yaml": "", "crs/p-app2.yaml": "", "crs/p-app3.yaml": ""})
	on.deletes.Store(0)
	rep, err = on.Reconcile(t.Context(), gitops.TriggerRequest, false)
	if err != nil {
		t.Fatal(err)
	}
	if st := statuses(rep); st[gitops.ResultPruneSkipped] != 4 || rep.Pruned != 0 || on.deletes.Load() != 0 {
		t.Fatalf("fuse: statuses %v, pruned %d, deletes %d", st, rep.Pruned, on.deletes.Load())
	}
	msg := resultOf(rep, "hanzo.ai/v1/App/hanzo/p-app0").Message
	if !strings.Contains(msg, "fuse: 4 of the instance's 9 objects") || !strings.Contains(msg, "limit of 3 objects or 20%") {
		t.Errorf("fuse message %q", msg)
	}
	if after := versions(t, c, "hanzo"); !maps.Equal(before, after) {
		t.Fatalf("the fuse let something change:\nbefore %v\nafter  %v", before, after)
	}
	stray := getApp(t, c, "hanzo", "p-stray")
	if stray.GetResourceVersion() != unlabelled.GetResourceVersion() {
		t.Error("the unlabelled App was touched")
	}
}

// Check 4: broken YAML fails the run naming the file and line, nothing is
// applied; a Secret, a ClusterRole and an App for kube-system are refused
// by policy and never reach the cluster.
func testBrokenAndPolicy(t *testing.T, c *clustertest.Cluster, srv *enginetest.Server) {
	repo := srv.NewRepo(t, "fleet3")
	sha := repo.Commit(t, "apps and a broken file", map[string]string{
		"crs/a.yaml":      appYAML("b-app1", "hanzo", "v1"),
		"crs/z/bad.yaml":  appYAML("b-app2", "hanzo", "v1") + "---\napiVersion: hanzo.ai/v1\nkind: App\nmetadata:\n  name: b-app3\n   oops: [\n",
		"crs/zz/ok2.yaml": appYAML("b-app4", "hanzo", "v1"),
	})
	e := newTestEngine(t, c, repo.URL, "f3", nil)
	_, err := e.Reconcile(t.Context(), gitops.TriggerRequest, false)
	if err == nil || !strings.HasPrefix(err.Error(), "render crs/z/bad.yaml:15: ") {
		t.Fatalf("got %v, want a render error naming crs/z/bad.yaml:15", err)
	}
	if e.applies.Load() != 0 || appExists(t, c, "hanzo", "b-app1") || appExists(t, c, "hanzo", "b-app4") {
		t.Fatal("a broken rendering applied something")
	}
	if st := e.Status(); st.Revision != sha || st.LastRun.Error != err.Error() {
		t.Errorf("status after a broken run: %+v", st.LastRun)
	}

	sha = repo.Commit(t, "fix it, add refused objects", map[string]string{
		"crs/z/bad.yaml":  appYAML("b-app2", "hanzo", "v1"),
		"crs/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: b-secret, namespace: hanzo}\nstringData: {k: v}\n",
		"crs/role.yaml":   "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: b-role}\nrules: []\n",
		"crs/kube.yaml":   appYAML("b-kube", "kube-system", "v1"),
		"crs/tenant.yaml": appYAML("b-tenant", "tenant-acme", "v1"),
		"crs/nons.yaml":   appYAML("b-nons", "hanzo-testnet", "v1"), // mapped, but the namespace does not exist
	})
	rep, err := e.Reconcile(t.Context(), gitops.TriggerRequest, false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"/v1/Secret/hanzo/b-secret":                        "policy: v1 Secret is not on the engine's allow-list",
		"rbac.authorization.k8s.io/v1/ClusterRole//b-role": "policy: rbac.authorization.k8s.io/v1 ClusterRole is not on the engine's allow-list",
		"hanzo.ai/v1/App/kube-system/b-kube":               `policy: namespace "kube-system" is not in the namespace map`,
		"hanzo.ai/v1/App/tenant-acme/b-tenant":             "policy: in namespace tenant-acme the label hanzo.ai/org must be",
		"hanzo.ai/v1/App/hanzo-testnet/b-nons":             "rejected by the API server (NotFound)",
	}
	for res, prefix := range want {
		r := resultOf(rep, res)
		if r.Status != gitops.ResultSyncFailed || !strings.HasPrefix(r.Message, prefix) {
			t.Errorf("%s: %+v, want SyncFailed %q…", res, r, prefix)
		}
	}
	if rep.Declared != 8 || rep.Synced != 3 || rep.Failed != 5 || rep.Revision != sha {
		t.Errorf("declared %d synced %d failed %d, want 8 3 5", rep.Declared, rep.Synced, rep.Failed)
	}
	// Only the three Apps and the one for a missing namespace were sent.
	if e.applies.Load() != 4 {
		t.Errorf("applies %d, want 4", e.applies.Load())
	}
	if _, err := c.Clientset().CoreV1().Secrets("hanzo").Get(t.Context(), "b-secret", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Secret: %v", err)
	}
	if _, err := c.Clientset().RbacV1().ClusterRoles().Get(t.Context(), "b-role", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ClusterRole: %v", err)
	}
	if _, err := c.Clientset().CoreV1().Namespaces().Get(t.Context(), "hanzo-testnet", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the engine created a namespace: %v", err)
	}
	if appExists(t, c, "kube-system", "b-kube") || appExists(t, c, "tenant-acme", "b-tenant") {
		t.Error("a refused App exists")
	}

	// A fetch failure keeps the last good revision, which the run applies
	// (nothing drifted: only the App the API server refused is sent
	// again), and the status says stale.
	if err := os.Rename(repo.Bare, repo.Bare+".gone"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Rename(repo.Bare+".gone", repo.Bare) })
	e.applies.Store(0)
	rep, err = e.Reconcile(t.Context(), gitops.TriggerRequest, false)
	if err != nil || rep.Revision != sha {
		t.Fatalf("a run with the repository gone: %v, %+v; want the cached revision %s", err, rep, sha)
	}
	st := e.Status()
	if st.Revision != sha || st.State != gitops.EngineStateStale || st.Stale == nil || !strings.HasPrefix(st.Stale.Error, "fetch "+repo.URL+" main: ") || e.applies.Load() != 1 {
		t.Errorf("after a failed fetch: revision %s (want %s), state %q, stale %+v, %d applies", st.Revision, sha, st.State, st.Stale, e.applies.Load())
	}
}

// Check 5: a kubectl-style edit (a merge patch by another field manager)
// is reverted by the next interval run, keeping the SHA it carries; a
// trigger runs at once.
func testSelfHeal(t *testing.T, c *clustertest.Cluster, srv *enginetest.Server) {
	repo := srv.NewRepo(t, "fleet4")
	sha := repo.Commit(t, "one app", map[string]string{"crs/h.yaml": appYAML("h-app", "hanzo", "v1")})
	e := newTestEngine(t, c, repo.URL, "f4", func(cfg *Config) { cfg.Interval = 300 * time.Millisecond })
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	c.WaitFor(t, 20*time.Second, func() (bool, error) { return appExists(t, c, "hanzo", "h-app"), nil })
	applied := getApp(t, c, "hanzo", "h-app").GetAnnotations()
	_, err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace("hanzo").Patch(t.Context(), "h-app", types.MergePatchType,
		[]byte(`{"spec":{"image":{"tag":"hand-edited"}}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"})
	if err != nil {
		t.Fatal(err)
	}
	c.WaitFor(t, 20*time.Second, func() (bool, error) {
		tag, _, _ := unstructuredString(getApp(t, c, "hanzo", "h-app").Object, "spec", "image", "tag")
		return tag == "v1", nil
	})
	healed := getApp(t, c, "hanzo", "h-app").GetAnnotations()
	for _, k := range []string{projection.AnnotationEngineRevision, projection.AnnotationEngineRun, projection.AnnotationEngineAppliedAt} {
		if healed[k] != applied[k] {
			t.Errorf("self-heal moved %s: %q → %q", k, applied[k], healed[k])
		}
	}
	if healed[projection.AnnotationEngineRevision] != sha {
		t.Errorf("revision %q, want %s", healed[projection.AnnotationEngineRevision], sha)
	}
	if st := e.Status(); st.NextRunAt == nil || st.LastRun == nil || st.LastRun.Trigger != gitops.TriggerInterval {
		t.Errorf("status %+v", st)
	}

	// A trigger (the webhook's path) runs without waiting for the interval.
	sha2 := repo.Commit(t, "bump", map[string]string{"crs/h.yaml": appYAML("h-app", "hanzo", "v2")})
	e.Trigger(gitops.TriggerWebhook)
	c.WaitFor(t, 20*time.Second, func() (bool, error) {
		return getApp(t, c, "hanzo", "h-app").GetAnnotations()[projection.AnnotationEngineRevision] == sha2, nil
	})
}

// Check 5, concurrency: callers that arrive while a run is fetching share
// the next run, which fetches after they arrived: one more fetch, one
// apply per changed object, one report for all of them.
func testSingleFlight(t *testing.T, c *clustertest.Cluster, srv *enginetest.Server) {
	repo := srv.NewRepo(t, "fleet5")
	repo.Commit(t, "three apps", map[string]string{"crs/s1.yaml": appYAML("s-app1", "hanzo", "v1"), "crs/s2.yaml": appYAML("s-app2", "hanzo", "v1"), "crs/s3.yaml": appYAML("s-app3", "hanzo", "v1")})
	e := newTestEngine(t, c, repo.URL, "f5", nil)

	var hooked atomic.Int64
	e.OnRun(func(rep *gitops.ReconcileReport, err error, took time.Duration, finished time.Time) {
		if rep != nil && err == nil && took > 0 && !finished.IsZero() {
			hooked.Add(1)
		}
	})
	const callers = 8
	release := srv.Hold(t) // the first run's fetch waits until every caller queued
	reports := make([]*gitops.ReconcileReport, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	wg.Go(func() { reports[0], errs[0] = e.Reconcile(t.Context(), gitops.TriggerRequest, false) })
	c.WaitFor(t, 10*time.Second, func() (bool, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.flights[0].current != nil && e.flights[0].current.fetching, nil
	})
	// The push these callers stand for may have landed after that fetch
	// began: they get the run behind it.
	sha := repo.CommitBehind(t, "a fourth app", map[string]string{"crs/s4.yaml": appYAML("s-app4", "hanzo", "v1")})
	for i := 1; i < callers; i++ {
		wg.Go(func() { reports[i], errs[i] = e.Reconcile(t.Context(), gitops.TriggerRequest, false) })
	}
	c.WaitFor(t, 10*time.Second, func() (bool, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.flights[0].next != nil && e.flights[0].next.joined == callers-1, nil
	})
	release()
	wg.Wait()
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if i > 0 && reports[i] != reports[1] {
			t.Fatalf("caller %d did not share the run behind the first", i)
		}
	}
	if reports[1].Revision != sha || reports[1].Synced != 4 {
		t.Fatalf("the queued callers' run: revision %s (want %s, fetched after they arrived), %d synced (want 4)", reports[1].Revision, sha, reports[1].Synced)
	}
	if e.applies.Load() != 4 || e.Status().Runs != 2 || hooked.Load() != 2 {
		t.Fatalf("%d callers: %d applies (want 4), %d runs (want 2), %d OnRun calls (want 2)", callers, e.applies.Load(), e.Status().Runs, hooked.Load())
	}
	if _, err := e.Reconcile(t.Context(), gitops.TriggerRequest, true); err != nil || hooked.Load() != 2 {
		t.Fatalf("a dry run: %v, %d OnRun calls (want still 2)", err, hooked.Load())
	}
	// A caller that gives up does not cancel the run the others share.
	repo.Commit(t, "bump s-app2", map[string]string{"crs/s2.yaml": appYAML("s-app2", "hanzo", "v2")})
	release = srv.Hold(t)
	quitter, quit := context.WithCancel(t.Context())
	quitErr := make(chan error, 1)
	go func() { _, err := e.Reconcile(quitter, gitops.TriggerRequest, false); quitErr <- err }()
	c.WaitFor(t, 10*time.Second, func() (bool, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.flights[0].current != nil, nil
	})
	quit()
	if err := <-quitErr; err != context.Canceled {
		t.Fatalf("the quitter got %v", err)
	}
	release()
	c.WaitFor(t, 20*time.Second, func() (bool, error) {
		tag, _, _ := unstructuredString(getApp(t, c, "hanzo", "s-app2").Object, "spec", "image", "tag")
		return tag == "v2", nil
	})
}

// Check 6: a dry run sends only dry-run requests, writes nothing, and says
// what would change.
func testDryRun(t *testing.T, c *clustertest.Cluster, srv *enginetest.Server) {
	repo := srv.NewRepo(t, "fleet6")
	repo.Commit(t, "two apps", map[string]string{"crs/d1.yaml": appYAML("d-app1", "hanzo", "v1"), "crs/d2.yaml": appYAML("d-app2", "hanzo", "v1"), "crs/d3.yaml": appYAML("d-app3", "hanzo", "v1")})
	e := newTestEngine(t, c, repo.URL, "f6", func(cfg *Config) { cfg.Prune = true; cfg.PruneMax = 5; cfg.PruneMaxRatio = 0.5 })
	if _, err := e.Reconcile(t.Context(), gitops.TriggerRequest, false); err != nil {
		t.Fatal(err)
	}
	repo.Commit(t, "bump one, add one, remove one", map[string]string{
		"crs/d1.yaml": appYAML("d-app1", "hanzo", "v2"), "crs/d4.yaml": appYAML("d-app4", "hanzo", "v1"), "crs/d3.yaml": "",
	})
	before := versions(t, c, "hanzo")
	rep, err := e.Reconcile(t.Context(), gitops.TriggerRequest, true)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]gitops.ReconcileResult{
		"hanzo.ai/v1/App/hanzo/d-app1": {Status: gitops.ResultSynced, Message: "dry run: would be configured"},
		"hanzo.ai/v1/App/hanzo/d-app2": {Status: gitops.ResultSynced, Message: "dry run: unchanged"},
		"hanzo.ai/v1/App/hanzo/d-app3": {Status: gitops.ResultPruned, Message: "dry run: would be pruned"},
		"hanzo.ai/v1/App/hanzo/d-app4": {Status: gitops.ResultSynced, Message: "dry run: would be created"},
	}
	for res, w := range want {
		if r := resultOf(rep, res); r.Status != w.Status || r.Message != w.Message {
			t.Errorf("%s: %+v, want %+v", res, r, w)
		}
	}
	if after := versions(t, c, "hanzo"); !maps.Equal(before, after) {
		t.Fatalf("a dry run wrote:\nbefore %v\nafter  %v", before, after)
	}
	if _, ok := e.Desired(projection.KindApp, "hanzo", "d-app4"); ok {
		t.Error("a dry run replaced the desired state Desired answers")
	}
}

// A path holding a kustomization is built (its base outside the path
// included) instead of read file by file.
func testKustomization(t *testing.T, c *clustertest.Cluster, srv *enginetest.Server) {
	repo := srv.NewRepo(t, "fleet-kustomize")
	sha := repo.Commit(t, "a base and an overlay", map[string]string{
		"base/app.yaml":           appYAML("web", "", "v1"),
		"base/kustomization.yaml": "resources: [app.yaml]\n",
		"crs/kustomization.yaml":  "resources: [../base]\nnamespace: hanzo-devnet\nnamePrefix: k-\nimages: [{name: ghcr.io/hanzoai/web, newTag: v2}]\n",
		"crs/stray.yaml":          appYAML("k-stray", "hanzo", "v1"),
	})
	e := newTestEngine(t, c, repo.URL, "f7", nil)
	rep, err := e.Reconcile(t.Context(), gitops.TriggerRequest, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Declared != 1 || rep.Synced != 1 || rep.Revision != sha || resultOf(rep, "hanzo.ai/v1/App/hanzo-devnet/k-web").Message != "created" {
		t.Fatalf("report %+v", rep)
	}
	if appExists(t, c, "hanzo", "k-stray") {
		t.Error("a file the kustomization does not list was applied")
	}
}
