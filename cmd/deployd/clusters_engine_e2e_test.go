package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/engine"
	"github.com/hanzoai/deploy/engine/enginetest"
	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/projection"
)

// engineApp is an App's file in the engine's repository.
func engineApp(name, tag string) string {
	return fmt.Sprintf("apiVersion: hanzo.ai/v1\nkind: App\nmetadata: {name: %s}\nspec: {image: {repository: ghcr.io/hanzoai/%s, tag: %s}}\n", name, name, tag)
}

// TestEngineOfEachCluster: two real API servers, each with an engine of its
// own reading its own path of one repository, with the same App names in
// both. Each cluster gets its path (and only its own), holds its own Lease;
// a prune in one deletes nothing in the other; a run of one that cannot
// complete (a file that does not parse) leaves the other's runs going; the
// page's engine panel shows and reconciles the cluster picked (Chromium);
// a rollback of one cluster's App is a commit to that cluster's file.
func TestEngineOfEachCluster(t *testing.T) {
	home, staging := clustertest.Start(t), clustertest.Start(t)
	for _, c := range []*clustertest.Cluster{home, staging} {
		for _, ns := range []string{"hanzo", "deployd"} {
			if _, err := c.Clientset().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	srv := enginetest.NewServer(t)
	repo := srv.NewRepo(t, "fleet")
	repo.Commit(t, "two clusters", map[string]string{
		"home/iam.yaml": engineApp("iam", "v1.0.0"), "home/keep.yaml": engineApp("keep", "v1.0.0"), "home/gone.yaml": engineApp("gone", "v1.0.0"),
		"staging/iam.yaml": engineApp("iam", "v2.0.0"), "staging/keep.yaml": engineApp("keep", "v2.0.0"), "staging/gone.yaml": engineApp("gone", "v2.0.0"),
	})
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	d := startClusterDeployd(t, home,
		"clusters:\n- name: staging\n  kubeconfig: "+staging.Kubeconfig+"\n  engine: {repo: \""+repo.URL+"\", path: staging}\n", m, buildDeployd(t),
		"DEPLOY_ENGINE_ENABLED=true", "DEPLOY_ENGINE_REPO="+repo.URL, "DEPLOY_ENGINE_PATH=home", "DEPLOY_ENGINE_INTERVAL=0",
		"DEPLOY_ENGINE_PRUNE=true", "DEPLOY_ENGINE_PRUNE_MAX_RATIO=0.5", "DEPLOY_ENGINE_PUSH=true",
		"DEPLOY_ENGINE_CACHE_DIR="+filepath.Join(t.TempDir(), "engine"), "DEPLOY_ENGINE_LEASE_NAMESPACE=deployd", "DEPLOY_ENGINE_LEASE_DURATION=3s")

	// reconcile runs one cluster's engine, once this replica leads it.
	reconcile := func(cluster string) (int, gitops.ReconcileReport, string) {
		t.Helper()
		path := "/v1/deploy/reconcile"
		if cluster != "" {
			path += "?cluster=" + cluster
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, body := d.do(http.MethodPost, path, d.admin, "")
			if code != http.StatusServiceUnavailable || time.Now().After(deadline) {
				var rep gitops.ReconcileReport
				if code == http.StatusOK {
					if err := json.Unmarshal([]byte(body), &rep); err != nil {
						t.Fatalf("reconcile %s: %v: %s", cluster, err, body)
					}
				}
				return code, rep, body
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// tags are the Apps of a cluster's hanzo and their tags.
	tags := func(c *clustertest.Cluster) map[string]string {
		t.Helper()
		list, err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace("hanzo").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, o := range list.Items {
			tag, _, _ := unstructured.NestedString(o.Object, "spec", "image", "tag")
			out[o.GetName()] = tag
		}
		return out
	}
	want := func(c *clustertest.Cluster, name string, expect map[string]string) {
		t.Helper()
		if got := tags(c); fmt.Sprint(got) != fmt.Sprint(expect) {
			t.Errorf("%s's Apps: %v, want %v", name, got, expect)
		}
	}

	code, rep, body := reconcile("")
	if code != http.StatusOK || rep.Cluster != "in-cluster" || rep.Declared != 3 || rep.Failed != 0 {
		t.Fatalf("the first cluster's run: %d %s", code, body)
	}
	want(home, "home", map[string]string{"iam": "v1.0.0", "keep": "v1.0.0", "gone": "v1.0.0"})
	want(staging, "staging", map[string]string{})
	code, rep, body = reconcile("staging")
	if code != http.StatusOK || rep.Cluster != "staging" || rep.Declared != 3 || rep.Failed != 0 {
		t.Fatalf("staging's run: %d %s", code, body)
	}
	want(staging, "staging", map[string]string{"iam": "v2.0.0", "keep": "v2.0.0", "gone": "v2.0.0"})
	want(home, "home", map[string]string{"iam": "v1.0.0", "keep": "v1.0.0", "gone": "v1.0.0"})

	// Each cluster holds its own Lease, held by this replica.
	for name, c := range map[string]*clustertest.Cluster{"home": home, "staging": staging} {
		l, err := c.Clientset().CoordinationV1().Leases("deployd").Get(t.Context(), engine.LeaseName("universe"), metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			t.Errorf("%s's engine Lease: %v %+v", name, err, l)
		}
	}

	// A prune in staging deletes staging's App only.
	repo.Commit(t, "staging drops gone", map[string]string{"staging/gone.yaml": ""})
	if code, rep, body = reconcile("staging"); code != http.StatusOK || rep.Pruned != 1 {
		t.Fatalf("staging's prune: %d %s", code, body)
	}
	if code, rep, body = reconcile(""); code != http.StatusOK || rep.Pruned != 0 {
		t.Fatalf("the first cluster's run after staging's prune: %d %s", code, body)
	}
	want(staging, "staging", map[string]string{"iam": "v2.0.0", "keep": "v2.0.0"})
	want(home, "home", map[string]string{"iam": "v1.0.0", "keep": "v1.0.0", "gone": "v1.0.0"})

	// A file of staging's path that does not parse: staging's runs cannot
	// complete; the first cluster's go on and apply its change.
	repo.Commit(t, "a broken file for staging, a new tag for home", map[string]string{
		"staging/broken.yaml": "apiVersion: hanzo.ai/v1\nkind: App\nmetadata: {name: [\n", "home/keep.yaml": engineApp("keep", "v1.1.0"),
	})
	if code, _, body = reconcile("staging"); code != http.StatusBadGateway || !strings.Contains(body, "broken.yaml") {
		t.Errorf("staging's run with a broken file: %d %s, want 502 naming the file", code, body)
	}
	if code, rep, body = reconcile(""); code != http.StatusOK || rep.Failed != 0 || rep.Synced != 3 {
		t.Errorf("the first cluster's run beside staging's failure: %d %s", code, body)
	}
	want(home, "home", map[string]string{"iam": "v1.0.0", "keep": "v1.1.0", "gone": "v1.0.0"})
	want(staging, "staging", map[string]string{"iam": "v2.0.0", "keep": "v2.0.0"})
	code, body = d.do(http.MethodGet, "/v1/deploy/gitops", d.admin, "")
	var gs struct{ Engines []gitops.EngineStatus }
	if code != http.StatusOK || json.Unmarshal([]byte(body), &gs) != nil || len(gs.Engines) != 2 {
		t.Fatalf("gitops: %d %.1000s", code, body)
	}
	if e := gs.Engines[0]; e.Cluster != "in-cluster" || e.LastRun == nil || e.LastRun.Error != "" || e.Source.Path != "home" {
		t.Errorf("the first cluster's engine: %+v", e)
	}
	if e := gs.Engines[1]; e.Cluster != "staging" || e.LastRun == nil || !strings.Contains(e.LastRun.Error, "broken.yaml") || e.Source.Path != "staging" {
		t.Errorf("staging's engine: %+v", e)
	}

	// The page's engine panel: a select of the clusters' engines; staging's
	// shows its own source and failed run, and its Reconcile previews and
	// runs staging's engine only.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	b := newBrowser(t, ctx)
	b.signInQueued(m, d.base, admin)
	b.waitFor("the first cluster's engine", `(p => !!p && p.dataset.cluster === 'in-cluster' && p.dataset.enabled === 'true' && document.querySelector('#engine-cluster')?.options.length === 2 && document.querySelector('#engine-source').textContent.includes('home'))(document.querySelector('#engine-panel'))`, 30*time.Second)
	eval[bool](b, `(s => { s.value = 'staging'; return s.dispatchEvent(new Event('change')); })(document.querySelector('#engine-cluster'))`)
	b.waitFor("staging's engine", `(p => p.dataset.cluster === 'staging' && document.querySelector('#engine-source').textContent.includes('staging') && document.querySelector('#engine-last-run').textContent.includes('broken.yaml'))(document.querySelector('#engine-panel'))`, 20*time.Second)
	repo.Commit(t, "staging mended, iam v2.1.0", map[string]string{"staging/broken.yaml": "", "staging/iam.yaml": engineApp("iam", "v2.1.0")})
	firstRuns := func() int64 {
		_, body := d.do(http.MethodGet, "/v1/deploy/gitops", d.admin, "")
		var gs struct{ Engines []gitops.EngineStatus }
		if err := json.Unmarshal([]byte(body), &gs); err != nil || len(gs.Engines) != 2 {
			t.Fatalf("gitops: %v %.300s", err, body)
		}
		return gs.Engines[0].Runs
	}
	before := firstRuns()
	b.click("Reconcile", "#engine-reconcile")
	b.waitFor("staging's preview", `document.querySelector('#confirm-dialog').open && document.querySelector('#confirm-title').textContent.includes('in staging')`, 20*time.Second)
	b.click("confirm", "#confirm-ok")
	b.waitFor("staging's run", `[...document.querySelectorAll('.toast')].some(t => t.textContent.includes('Reconciled revision')) && !!document.querySelector('#engine-report')`, 30*time.Second)
	want(staging, "staging", map[string]string{"iam": "v2.1.0", "keep": "v2.0.0"})
	if after := firstRuns(); after != before {
		t.Errorf("the panel's reconcile of staging ran the first cluster's engine (%d runs, then %d)", before, after)
	}
	b.checkConsole()
	if code, rep, body = reconcile("staging"); code != http.StatusOK || rep.Failed != 0 {
		t.Fatalf("staging's run once mended: %d %s", code, body)
	}

	// The list shows each cluster's App with its own engine's source.
	code, body = d.do(http.MethodGet, "/api/v1/applications/iam?appNamespace=hanzo.staging", d.admin, "")
	var app projection.Application
	if code != http.StatusOK || json.Unmarshal([]byte(body), &app) != nil || app.Spec.Source.Path != "staging" || app.Spec.Destination.Name != "staging" {
		t.Errorf("staging's iam: %d %.600s", code, body)
	}

	// A rollback of staging's iam is a commit to staging's file; home's
	// iam and its file are untouched.
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body = d.do(http.MethodPost, "/v1/deploy/iam/rollback?namespace=hanzo.staging", d.admin, `{"tag":"v2.0.0"}`)
		if code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code != http.StatusOK || !strings.Contains(body, `"commit"`) {
		t.Fatalf("rollback of staging's iam: %d %.600s", code, body)
	}
	show := func(file string) string {
		out, err := exec.Command("git", "-C", repo.Bare, "show", "main:"+file).CombinedOutput()
		if err != nil {
			t.Fatalf("git show %s: %v: %s", file, err, out)
		}
		return string(out)
	}
	if f := show("staging/iam.yaml"); !strings.Contains(f, "v2.0.0") {
		t.Errorf("staging/iam.yaml after the rollback:\n%s", f)
	}
	if f := show("home/iam.yaml"); !strings.Contains(f, "v1.0.0") {
		t.Errorf("home/iam.yaml after staging's rollback:\n%s", f)
	}
	staging.WaitFor(t, 30*time.Second, func() (bool, error) { return tags(staging)["iam"] == "v2.0.0", nil })
	want(home, "home", map[string]string{"iam": "v1.0.0", "keep": "v1.1.0", "gone": "v1.0.0"})
	if _, err := home.Dynamic().Resource(projection.KindApp.GVR()).Namespace("hanzo").Get(t.Context(), "gone", metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Errorf("home's gone was deleted")
	}
}
