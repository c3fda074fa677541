package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hanzoai/deploy/auth/authtest"
	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/stream/streamtest"
)

// twoClusterDeployd is a deployd binary serving two real clusters: the
// first through --kubeconfig, staging through DEPLOY_CLUSTERS_FILE.
type twoClusterDeployd struct {
	t           *testing.T
	base        string
	metrics     string // the metrics listener's base URL
	logs        *authtest.LogBuffer
	admin, acme string
}

// startClusterDeployd runs deployd serve over home, and over the clusters
// of the clusters file body; env is more of its environment (NAME=value,
// over what it would have).
func startClusterDeployd(t *testing.T, home *clustertest.Cluster, clustersFile string, m *mockoidc.MockOIDC, bin string, env ...string) *twoClusterDeployd {
	t.Helper()
	file := filepath.Join(t.TempDir(), "clusters.yaml")
	if err := os.WriteFile(file, []byte(clustersFile), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, maddr := freeAddr(t), freeAddr(t)
	d := &twoClusterDeployd{t: t, base: "http://" + addr, metrics: "http://" + maddr, logs: &authtest.LogBuffer{}}
	cmd := exec.Command(bin, "serve", "--listen", addr, "--metrics-listen", maddr, "--kubeconfig", home.Kubeconfig)
	cmd.Env = append(os.Environ(), "LOG_LEVEL=info", "DEPLOY_PUBLIC_URL="+d.base, "DEPLOY_ENGINE_ENABLED=false",
		"DEPLOY_CLUSTERS_FILE="+file,
		"IAM_ENDPOINT="+m.Issuer(), "DEPLOY_IAM_CLIENT_ID="+m.ClientID, "DEPLOY_IAM_CLIENT_SECRET="+m.ClientSecret)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = d.logs, d.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("deployd's log:\n%s", d.logs.String())
		}
	})
	waitHealthy(t, d.base, 2*time.Minute)
	var err error
	if d.admin, err = authtest.IDToken(m, admin, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if d.acme, err = authtest.IDToken(m, acmeMember, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *twoClusterDeployd) do(method, path, token, body string) (int, string) {
	d.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(d.t.Context(), method, d.base+path, rd)
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// appKeys are the namespace/name of a list's Applications, with their
// destination's cluster name.
func appKeys(t *testing.T, body string) map[string]string {
	t.Helper()
	var list struct {
		Items []struct {
			Metadata struct{ Name, Namespace string }
			Spec     struct {
				Destination struct{ Name, Server, Namespace string }
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("list: %v: %.300s", err, body)
	}
	out := map[string]string{}
	for _, it := range list.Items {
		out[it.Metadata.Namespace+"/"+it.Metadata.Name] = it.Spec.Destination.Name + " " + it.Spec.Destination.Namespace
	}
	return out
}

// applyApps creates namespaces and Apps (namespace/name[@org]) in c, with
// a Deployment owned by each, and returns the Apps' uids.
func applyApps(t *testing.T, c *clustertest.Cluster, apps ...string) {
	t.Helper()
	seen := map[string]bool{}
	for _, a := range apps {
		ref, org, _ := strings.Cut(a, "@")
		ns, name, _ := strings.Cut(ref, "/")
		if !seen[ns] {
			c.Apply(t, clustertest.Object(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}\n"))
			seen[ns] = true
		}
		labels := ""
		if org != "" {
			labels = ", labels: {hanzo.ai/org: " + org + "}"
		}
		app := c.Apply(t, clustertest.Object(t, fmt.Sprintf(
			"apiVersion: hanzo.ai/v1\nkind: App\nmetadata: {name: %s, namespace: %s%s}\nspec: {image: {repository: ghcr.io/hanzoai/%s, tag: v1.0.0}}\n", name, ns, labels, name)))[0]
		c.Apply(t, clustertest.Object(t, fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: %[2]s
  ownerReferences: [{apiVersion: hanzo.ai/v1, kind: App, name: %[1]s, uid: %[3]s, controller: true}]
spec:
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec: {containers: [{name: app, image: ghcr.io/hanzoai/%[1]s:v1.0.0}]}
`, name, ns, app.GetUID())))
	}
}

// setTag patches an App's tag in c.
func setTag(t *testing.T, c *clustertest.Cluster, ns, name, tag string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"image":{"tag":%q}}}`, tag)
	if _, err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace(ns).Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// sseWatch reads an applications stream in the background, recording each
// event's namespace/name and tag with when it arrived.
type sseWatch struct {
	events chan sseEvent
	lastID func() string
	seen   []sseEvent // received, not yet waited for
}

type sseEvent struct {
	key, typ, tag string
	at            time.Time
}

func (d *twoClusterDeployd) watch(ctx context.Context, token, lastID string) *sseWatch {
	d.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.base+"/api/v1/stream/applications", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		d.t.Fatalf("stream: %s", resp.Status)
	}
	w := &sseWatch{events: make(chan sseEvent, 256)}
	ids := make(chan string, 1)
	ids <- lastID
	w.lastID = func() string { id := <-ids; ids <- id; return id }
	go func() {
		defer resp.Body.Close()
		rd := streamtest.NewReader(resp.Body)
		for {
			f, err := rd.Next()
			if err != nil {
				close(w.events)
				return
			}
			if f.HasID {
				<-ids
				ids <- f.ID
			}
			if !f.HasData {
				continue
			}
			var ev struct {
				Result struct {
					Type        string
					Application struct {
						Metadata struct{ Name, Namespace string }
						Status   struct {
							Sync struct{ Revision string }
						}
					}
				}
			}
			if json.Unmarshal([]byte(f.Data), &ev) != nil {
				continue
			}
			a := ev.Result.Application
			w.events <- sseEvent{key: a.Metadata.Namespace + "/" + a.Metadata.Name, typ: ev.Result.Type, tag: a.Status.Sync.Revision, at: time.Now()}
		}
	}()
	return w
}

// waitEvent waits for an event of key with tag; it fails after timeout.
// Events of other keys or tags before it are kept for a later wait.
func (w *sseWatch) waitEvent(t *testing.T, key, tag string, timeout time.Duration) sseEvent {
	t.Helper()
	for i, ev := range w.seen {
		if ev.key == key && ev.tag == tag {
			w.seen = append(w.seen[:i], w.seen[i+1:]...)
			return ev
		}
	}
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-w.events:
			if !ok {
				t.Fatalf("the stream ended before %s reached %s", key, tag)
			}
			if ev.key == key && ev.tag == tag {
				return ev
			}
			w.seen = append(w.seen, ev)
		case <-deadline:
			t.Fatalf("no event of %s at %s within %s (others: %v)", key, tag, timeout, w.seen)
		}
	}
}

// TestTwoClusters runs deployd over two real clusters (each its own
// kube-apiserver and etcd): one projection holding the same App names of
// both, distinct; tenancy over both; writes landing on the App's own
// cluster; one cluster stopped and started again while the other's
// changes keep flowing; and a start with a cluster that never answers.
func TestTwoClusters(t *testing.T) {
	// home runs the controllers: its Deployment's ReplicaSet is the
	// release history a rollback picks from.
	home, staging := clustertest.Start(t, clustertest.WithControllers()), clustertest.Start(t)
	applyApps(t, home, "hanzo/iam", "tenant-acme/web@acme")
	applyApps(t, staging, "hanzo/iam", "tenant-acme/api@acme", "tenant-globex/shop@globex")
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	bin := buildDeployd(t)
	d := startClusterDeployd(t, home, "clusters:\n- name: staging\n  kubeconfig: "+staging.Kubeconfig+"\n", m, bin)

	var all map[string]string
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := d.do(http.MethodGet, "/api/v1/applications", d.admin, "")
		if code == http.StatusOK {
			if all = appKeys(t, body); len(all) == 5 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the SuperAdmin's list never held the five Apps: %d %.500s", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for k, want := range map[string]string{
		"hanzo/iam": "in-cluster hanzo", "hanzo.staging/iam": "staging hanzo",
		"tenant-acme/web": "in-cluster tenant-acme", "tenant-acme.staging/api": "staging tenant-acme",
		"tenant-globex.staging/shop": "staging tenant-globex",
	} {
		if all[k] != want {
			t.Errorf("%s: destination %q, want %q (list %v)", k, all[k], want, all)
		}
	}

	t.Run("tenancy", func(t *testing.T) {
		code, body := d.do(http.MethodGet, "/api/v1/applications", d.acme, "")
		got := appKeys(t, body)
		if code != http.StatusOK || len(got) != 2 || got["tenant-acme/web"] == "" || got["tenant-acme.staging/api"] == "" {
			t.Errorf("acme's list: %d %v, want its App in each cluster and nothing else", code, got)
		}
		for _, probe := range []string{
			"/api/v1/applications/shop?appNamespace=tenant-globex.staging",
			"/api/v1/applications/iam?appNamespace=hanzo.staging",
			"/api/v1/applications/iam/resource-tree?appNamespace=hanzo.staging",
			"/api/v1/applications/shop/managed-resources?appNamespace=tenant-globex.staging",
		} {
			if code, body := d.do(http.MethodGet, probe, d.acme, ""); code != http.StatusNotFound {
				t.Errorf("acme's %s: %d %.200s, want 404", probe, code, body)
			}
		}
		if code, _ := d.do(http.MethodGet, "/api/v1/applications/api?appNamespace=tenant-acme.staging", d.acme, ""); code != http.StatusOK {
			t.Errorf("acme's own App in staging: %d", code)
		}
	})

	t.Run("clusters", func(t *testing.T) {
		code, body := d.do(http.MethodGet, "/api/v1/clusters", d.admin, "")
		var list struct {
			Items []struct {
				Name, Server string
				Info         struct {
					ApplicationsCount int
					ServerVersion     string
					ConnectionState   struct{ Status string }
				}
			}
		}
		if err := json.Unmarshal([]byte(body), &list); err != nil || code != http.StatusOK || len(list.Items) != 2 {
			t.Fatalf("clusters: %d %v %.400s", code, err, body)
		}
		for i, want := range []struct {
			name, server string
			apps         int
		}{{"in-cluster", "https://kubernetes.default.svc", 2}, {"staging", staging.URL(), 3}} {
			it := list.Items[i]
			if it.Name != want.name || it.Server != want.server || it.Info.ApplicationsCount != want.apps ||
				it.Info.ConnectionState.Status != "Successful" || it.Info.ServerVersion == "" {
				t.Errorf("cluster %d: %+v, want %s at %s with %d Apps, Successful", i, it, want.name, want.server, want.apps)
			}
		}
	})

	t.Run("metrics", func(t *testing.T) {
		resp, err := http.Get(d.metrics + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var info, apps []string
		for line := range strings.Lines(string(b)) {
			if strings.HasPrefix(line, "argocd_cluster_info{") {
				info = append(info, line)
			}
			if strings.HasPrefix(line, "argocd_app_info{") && strings.Contains(line, `name="iam"`) {
				apps = append(apps, line)
			}
		}
		if len(info) != 2 || !strings.Contains(strings.Join(info, ""), `name="staging",server="`+staging.URL()+`"`) {
			t.Errorf("argocd_cluster_info: %v", info)
		}
		if len(apps) != 2 || !strings.Contains(strings.Join(apps, ""), `dest_server="`+staging.URL()+`"`) {
			t.Errorf("argocd_app_info of the two iam: %v", apps)
		}
	})

	t.Run("cli", func(t *testing.T) {
		run := func(args ...string) (string, error) {
			var stdout, stderr strings.Builder
			err := runApp(t.Context(), append(args, "--server", d.base, "--token", d.admin), &stdout, &stderr)
			return stdout.String() + stderr.String(), err
		}
		out, err := run("list", "--cluster", "staging", "-o", "json")
		if err != nil {
			t.Fatalf("app list --cluster staging: %v %s", err, out)
		}
		if got := appKeys(t, out); len(got) != 3 || got["hanzo.staging/iam"] == "" || got["hanzo/iam"] != "" {
			t.Errorf("app list --cluster staging: %v", got)
		}
		out, err = run("list", "--cluster", "https://kubernetes.default.svc", "-o", "wide")
		if err != nil || strings.Count(out, "in-cluster") != 2 || strings.Contains(out, "staging") {
			t.Errorf("app list --cluster <first server> -o wide: %v\n%s", err, out)
		}
		if out, err := run("list", "--cluster", "nowhere"); err == nil || !strings.Contains(out+err.Error(), "deployd reads in-cluster, staging") {
			t.Errorf("app list --cluster nowhere: %v %s", err, out)
		}
	})

	t.Run("writes land on the App's cluster", func(t *testing.T) {
		if code, body := d.do(http.MethodPost, "/api/v1/applications/iam/sync", d.admin, `{"appNamespace":"hanzo.staging"}`); code != http.StatusOK {
			t.Fatalf("sync: %d %.300s", code, body)
		}
		syncedBy := func(c *clustertest.Cluster) string {
			app, err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace("hanzo").Get(t.Context(), "iam", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return app.GetAnnotations()[projection.AnnotationSyncRequestedBy]
		}
		if h, st := syncedBy(home), syncedBy(staging); h != "" || st != admin.Subject {
			t.Errorf("sync of staging's iam: home annotated %q, staging %q", h, st)
		}
		setTag(t, home, "hanzo", "iam", "v1.1.0")
		setTag(t, staging, "hanzo", "iam", "v1.1.0")
		for deadline := time.Now().Add(60 * time.Second); ; {
			code, body := d.do(http.MethodPost, "/v1/deploy/iam/rollback?namespace=hanzo", d.admin, `{"tag":"v1.0.0"}`)
			if code == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("rollback: %d %.300s", code, body)
			}
			time.Sleep(200 * time.Millisecond) // until the ReplicaSet is in the history
		}
		q := url.Values{"appNamespace": {"hanzo.staging"}, "namespace": {"hanzo.staging"}, "resourceName": {"iam"},
			"kind": {"Deployment"}, "group": {"apps"}, "version": {"v1"}}
		if code, body := d.do(http.MethodPost, "/api/v1/applications/iam/resource/actions?"+q.Encode(), d.admin, `"restart"`); code != http.StatusOK {
			t.Fatalf("restart: %d %.300s", code, body)
		}
		read := func(c *clustertest.Cluster) (tag, restarted string) {
			app, err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace("hanzo").Get(t.Context(), "iam", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			dep, err := c.Clientset().AppsV1().Deployments("hanzo").Get(t.Context(), "iam", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tag, _, _ = unstructured.NestedString(app.Object, "spec", "image", "tag")
			return tag, dep.Spec.Template.Annotations[projection.AnnotationRestartedAt]
		}
		ht, hr := read(home)
		st, sr := read(staging)
		if ht != "v1.0.0" || st != "v1.1.0" {
			t.Errorf("rollback of home's iam: home at %q, staging at %q", ht, st)
		}
		if hr != "" || sr == "" {
			t.Errorf("restart of staging's Deployment: home %q, staging %q", hr, sr)
		}
	})

	t.Run("one cluster down", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		live := d.watch(ctx, d.admin, "")
		live.waitEvent(t, "tenant-globex.staging/shop", "v1.0.0", 10*time.Second)
		staging.StopAPIServer(t)
		stopped := time.Now()
		time.Sleep(200 * time.Millisecond)
		changed := time.Now()
		setTag(t, home, "tenant-acme", "web", "v1.1.0")
		ev := live.waitEvent(t, "tenant-acme/web", "v1.1.0", 5*time.Second)
		lat := ev.at.Sub(changed)
		if lat > time.Second {
			t.Errorf("home's change reached the stream %s after it was made, with staging down; want within 1s", lat)
		}
		t.Logf("with staging down, home's change reached the stream in %s", lat.Round(time.Millisecond))
		// Staging is reported Failed once discovery finds it gone; its Apps
		// stay listed.
		deadline := time.Now().Add(45 * time.Second)
		for {
			_, body := d.do(http.MethodGet, "/api/v1/clusters", d.admin, "")
			if strings.Count(body, `"status":"Failed"`) == 1 && strings.Contains(body, "has not answered since") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("staging was not reported Failed %s after it stopped: %.600s", time.Since(stopped).Round(time.Second), body)
			}
			time.Sleep(250 * time.Millisecond)
		}
		code, body := d.do(http.MethodGet, "/api/v1/applications", d.admin, "")
		if code != http.StatusOK || len(appKeys(t, body)) != 5 {
			t.Errorf("while staging is down the list holds %d Apps (%d), want 5", len(appKeys(t, body)), code)
		}
		// Staging's Apps carry a condition naming it and since when; the
		// other cluster's do not.
		for deadline := time.Now().Add(5 * time.Second); ; {
			_, body = d.do(http.MethodGet, "/api/v1/applications/shop?appNamespace=tenant-globex.staging", d.admin, "")
			if strings.Contains(body, `"conditions":[{"type":"ComparisonError","message":"cluster staging has not answered since `) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("staging's shop carries no condition: %.800s", body)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if _, body := d.do(http.MethodGet, "/api/v1/applications/web?appNamespace=tenant-acme", d.admin, ""); strings.Contains(body, `"conditions"`) {
			t.Errorf("in-cluster's web carries a condition: %.500s", body)
		}
		before := live.lastID()

		staging.StartAPIServer(t)
		setTag(t, staging, "tenant-globex", "shop", "v2.0.0")
		setTag(t, staging, "hanzo", "iam", "v2.0.0")
		// A client that stayed away since before the outage resumes and
		// receives what changed in both clusters meanwhile, each once.
		ctx2, cancel2 := context.WithCancel(t.Context())
		defer cancel2()
		again := d.watch(ctx2, d.admin, before)
		again.waitEvent(t, "tenant-globex.staging/shop", "v2.0.0", 60*time.Second)
		again.waitEvent(t, "hanzo.staging/iam", "v2.0.0", 10*time.Second)
		for _, ev := range again.seen {
			if ev.key == "tenant-acme/web" {
				t.Errorf("the resumed client received %s %s again", ev.typ, ev.key)
			}
		}
		// The client that stayed connected through the outage has them too.
		live.waitEvent(t, "tenant-globex.staging/shop", "v2.0.0", 10*time.Second)
		live.waitEvent(t, "hanzo.staging/iam", "v2.0.0", 10*time.Second)
		cancel()
		deadline = time.Now().Add(45 * time.Second)
		for {
			_, body := d.do(http.MethodGet, "/api/v1/clusters", d.admin, "")
			_, app := d.do(http.MethodGet, "/api/v1/applications/shop?appNamespace=tenant-globex.staging", d.admin, "")
			if strings.Count(body, `"status":"Successful"`) == 2 && !strings.Contains(app, `"conditions"`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("staging was not reported Successful again: %.600s", body)
			}
			time.Sleep(250 * time.Millisecond)
		}
	})

	t.Run("a cluster unreachable from the start", func(t *testing.T) {
		gone := "https://" + freeAddr(t)
		kc := filepath.Join(t.TempDir(), "gone.kubeconfig")
		cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: gone, cluster: {server: %q, insecure-skip-tls-verify: true}}]\n"+
			"users: [{name: u, user: {token: x}}]\ncontexts: [{name: gone, context: {cluster: gone, user: u}}]\ncurrent-context: gone\n", gone)
		if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		d2 := startClusterDeployd(t, home, "clusters:\n- name: gone\n  kubeconfig: "+kc+"\n", m, bin)
		code, body := d2.do(http.MethodGet, "/api/v1/applications", d2.admin, "")
		if got := appKeys(t, body); code != http.StatusOK || len(got) != 2 {
			t.Errorf("with a cluster gone from the start, the list: %d %v", code, got)
		}
		_, body = d2.do(http.MethodGet, "/api/v1/clusters", d2.admin, "")
		if !strings.Contains(body, `"name":"gone"`) || !strings.Contains(body, `"status":"Failed"`) {
			t.Errorf("the gone cluster is not reported Failed: %.500s", body)
		}
	})
}
