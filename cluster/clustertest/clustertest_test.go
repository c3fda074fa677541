package clustertest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

var (
	appGVK         = schema.GroupVersionKind{Group: "hanzo.ai", Version: "v1", Kind: "App"}
	appsResource   = schema.GroupVersionResource{Group: "hanzo.ai", Version: "v1", Resource: "apps"}
	cdAppsResource = schema.GroupVersionResource{Group: "apps.hanzo.ai", Version: "v1alpha1", Resource: "applications"}
)

const appManifest = `
apiVersion: hanzo.ai/v1
kind: App
metadata:
  name: iam
  namespace: tenant-acme
  labels: {hanzo.ai/org: acme}
spec:
  image: {repository: ghcr.io/hanzoai/iam, tag: v1.2.3}
  role: service
  port: 8000
  ingress: {enabled: true, hosts: [iam.acme.example], tls: true}
  env: [{name: LOG_LEVEL, value: debug}]
status:
  phase: Running
  readyReplicas: 1
  availableReplicas: 1
  replicas: 1
  observedGeneration: 1
  conditions: [{type: Ready, status: "True", reason: Available, lastTransitionTime: "2026-01-02T03:04:05Z"}]
  endpoints: [https://iam.acme.example]
  lastGoodImage: ghcr.io/hanzoai/iam:v1.2.2
  upgradeHistory: [{tag: v1.2.3, image: ghcr.io/hanzoai/iam:v1.2.3, startedAt: "2026-01-02T03:00:00Z", result: Succeeded}]
`

func namespace(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Namespace")
	u.SetName(name)
	return u
}

// TestCluster exercises one cluster end to end: CRDs, the App schema, a
// restricted identity, an optional CRD installed late, an API server
// restart and an etcd compaction.
func TestCluster(t *testing.T) {
	t.Parallel()
	began := time.Now()
	c := Start(t, WithoutCRDs("applications.apps.hanzo.ai"))
	t.Logf("Start took %v", time.Since(began))
	ctx := t.Context()
	dyn := c.Dynamic()

	t.Run("crds established", func(t *testing.T) {
		for _, gvr := range []schema.GroupVersionResource{
			appsResource,
			{Group: "hanzo.ai", Version: "v1alpha1", Resource: "middlewares"},
			{Group: "hanzo.ai", Version: "v1alpha1", Resource: "ingressroutes"},
			{Group: "argoproj.io", Version: "v1alpha1", Resource: "appprojects"},
		} {
			list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatalf("list %s: %v", gvr, err)
			}
			if len(list.Items) != 0 {
				t.Errorf("list %s: got %d items, want 0", gvr, len(list.Items))
			}
		}
		_, err := dyn.Resource(cdAppsResource).List(ctx, metav1.ListOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("list applications left out by WithoutCRDs: got %v, want NotFound", err)
		}
	})

	var app *unstructured.Unstructured
	t.Run("app round trip", func(t *testing.T) {
		app = c.Apply(t, namespace("tenant-acme"), Object(t, appManifest))[1]
		got, err := dyn.Resource(appsResource).Namespace("tenant-acme").Get(ctx, "iam", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get app: %v", err)
		}
		if r, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); r != 1 {
			t.Errorf("spec.replicas: got %d, want the default 1", r)
		}
		if env, _, _ := unstructured.NestedSlice(got.Object, "spec", "env"); len(env) != 1 {
			t.Errorf("spec.env (a field the schema does not list): got %v, want it kept", env)
		}
		if tls, _, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "ingress", "tls"); tls != true {
			t.Errorf("spec.ingress.tls: got %v, want true", tls)
		}
		status, _, _ := unstructured.NestedMap(got.Object, "status")
		if status["phase"] != "Running" || status["lastGoodImage"] != "ghcr.io/hanzoai/iam:v1.2.2" {
			t.Errorf("status not written through the subresource: %v", status)
		}
		if _, ok := status["replicas"]; ok {
			t.Errorf("status.replicas: got %v, want it pruned (the App has no status.replicas)", status["replicas"])
		}
		if h, _, _ := unstructured.NestedSlice(got.Object, "status", "upgradeHistory"); len(h) != 1 {
			t.Errorf("status.upgradeHistory: got %v, want one entry", h)
		}
	})

	t.Run("app printer columns", func(t *testing.T) {
		hc, err := rest.HTTPClientFor(c.Config)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL()+"/apis/hanzo.ai/v1/namespaces/tenant-acme/apps", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var table metav1.Table
		if err := json.NewDecoder(resp.Body).Decode(&table); err != nil {
			t.Fatalf("decode table: %v", err)
		}
		var names []string
		for _, col := range table.ColumnDefinitions {
			names = append(names, col.Name)
		}
		if diff := cmp.Diff([]string{"Name", "Tag", "Phase", "Ready", "Age"}, names); diff != "" {
			t.Errorf("columns (-want +got):\n%s", diff)
		}
		if len(table.Rows) != 1 {
			t.Fatalf("rows: got %d, want 1", len(table.Rows))
		}
		if diff := cmp.Diff([]any{"iam", "v1.2.3", "Running", float64(1)}, table.Rows[0].Cells[:4]); diff != "" {
			t.Errorf("row (-want +got):\n%s", diff)
		}
	})

	t.Run("app schema rejects", func(t *testing.T) {
		for name, spec := range map[string]string{
			"no repository":     `{image: {tag: v1}}`,
			"negative replicas": `{image: {repository: r}, replicas: -1}`,
			"bad pull policy":   `{image: {repository: r, pullPolicy: Sometimes}}`,
		} {
			bad := Object(t, "apiVersion: hanzo.ai/v1\nkind: App\nmetadata: {name: bad, namespace: tenant-acme}\nspec: "+spec)
			_, err := dyn.Resource(appsResource).Namespace("tenant-acme").Create(ctx, bad, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) {
				t.Errorf("%s: got %v, want Invalid", name, err)
			}
		}
		bad := Object(t, "apiVersion: hanzo.ai/v1\nkind: App\nmetadata: {name: iam, namespace: tenant-acme}\nspec: {image: {repository: r}}\nstatus: {phase: Sleeping}")
		_, err := dyn.Resource(appsResource).Namespace("tenant-acme").UpdateStatus(ctx, withRV(bad, app), metav1.UpdateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Errorf("status.phase Sleeping: got %v, want Invalid", err)
		}
	})

	t.Run("restricted user", func(t *testing.T) {
		restricted, err := dynamic.NewForConfig(c.UserConfig(DeploydUser))
		if err != nil {
			t.Fatal(err)
		}
		_, err = restricted.Resource(appsResource).List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("list apps as %s before any binding: got %v, want Forbidden", DeploydUser, err)
		}
		cs := c.Clientset()
		_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "app-reader"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"hanzo.ai"}, Resources: []string{"apps"}, Verbs: []string{"get", "list", "watch"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "app-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "app-reader"},
			Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "deployd"}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.WaitFor(t, 10*time.Second, func() (bool, error) {
			list, err := restricted.Resource(appsResource).List(ctx, metav1.ListOptions{})
			if apierrors.IsForbidden(err) {
				return false, nil // the authorizer's cache catches up
			}
			return err == nil && len(list.Items) == 1, err
		})
		err = restricted.Resource(appsResource).Namespace("tenant-acme").Delete(ctx, "iam", metav1.DeleteOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("delete app as %s with a read-only role: got %v, want Forbidden", DeploydUser, err)
		}
		_, err = kubernetes.NewForConfigOrDie(c.UserConfig(DeploydUser)).CoreV1().Secrets("tenant-acme").List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("list secrets as %s: got %v, want Forbidden", DeploydUser, err)
		}
	})

	t.Run("install a CRD late", func(t *testing.T) {
		c.InstallCRD(t, "applications.apps.hanzo.ai")
		cd := Object(t, `
apiVersion: apps.hanzo.ai/v1alpha1
kind: Application
metadata: {name: web, namespace: tenant-acme}
spec:
  project: default
  source: {repoURL: https://github.com/hanzoai/universe, path: infra/k8s/web, targetRevision: main}
  destination: {server: https://kubernetes.default.svc, namespace: tenant-acme}
status:
  sync: {status: Synced, revision: abc123}
  health: {status: Healthy}
`)
		got := c.Apply(t, cd)[0]
		if s, _, _ := unstructured.NestedString(got.Object, "status", "health", "status"); s != "Healthy" {
			t.Errorf("application status.health.status: got %q, want Healthy", s)
		}
		c.DeleteCRD(t, "applications.apps.hanzo.ai")
		_, err := dyn.Resource(cdAppsResource).List(ctx, metav1.ListOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("list applications after DeleteCRD: got %v, want NotFound", err)
		}
	})

	before := app.GetResourceVersion()
	t.Run("compact etcd", func(t *testing.T) {
		app.Object["spec"].(map[string]any)["role"] = "web"
		app = c.Apply(t, app)[0]
		rev := c.CompactEtcd(t)
		if rev <= 0 {
			t.Fatalf("compacted revision: got %d", rev)
		}
		// etcd no longer has the old revision.
		var out struct{}
		err := c.etcd.call(ctx, "POST", "/v3/kv/range", map[string]any{"key": "AA==", "revision": before}, &out)
		if err == nil || !strings.Contains(err.Error(), "compacted") {
			t.Errorf("etcd range at %s after compaction: got %v, want 'compacted'", before, err)
		}
		// Compacting twice in a row is fine.
		c.CompactEtcd(t)
	})

	t.Run("restart api server", func(t *testing.T) {
		url := c.URL()
		pid := c.PIDs()["kube-apiserver"]
		c.RestartAPIServer(t)
		if c.URL() != url {
			t.Errorf("URL after restart: got %s, want %s", c.URL(), url)
		}
		if got := c.PIDs()["kube-apiserver"]; got == pid {
			t.Errorf("kube-apiserver pid unchanged (%d) after restart", pid)
		}
		apps := dyn.Resource(appsResource).Namespace("tenant-acme")
		got, err := apps.Get(ctx, "iam", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get app after restart: %v", err)
		}
		if got.GetUID() != app.GetUID() || got.GetResourceVersion() != app.GetResourceVersion() {
			t.Errorf("app after restart: got uid %s rv %s, want %s %s", got.GetUID(), got.GetResourceVersion(), app.GetUID(), app.GetResourceVersion())
		}
		// The fresh watch cache and the compacted etcd both lack the
		// revision from before: an exact list and a watch get 410.
		_, err = apps.List(ctx, metav1.ListOptions{ResourceVersion: before, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
		if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			t.Errorf("list apps at compacted resourceVersion %s: got %v, want 410", before, err)
		}
		w, err := apps.Watch(ctx, metav1.ListOptions{ResourceVersion: before})
		if err != nil {
			t.Fatalf("watch from %s: %v", before, err)
		}
		defer w.Stop()
		select {
		case ev := <-w.ResultChan():
			status, ok := ev.Object.(*metav1.Status)
			if ev.Type != watch.Error || !ok || status.Code != 410 {
				t.Errorf("watch from %s after restart: got %s %v, want an ERROR event with 410", before, ev.Type, ev.Object)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("watch from %s after restart: no event, want an ERROR event with 410", before)
		}
	})
}

func withRV(obj, live *unstructured.Unstructured) *unstructured.Unstructured {
	u := obj.DeepCopy()
	u.SetResourceVersion(live.GetResourceVersion())
	return u
}

// TestControllers rolls a Deployment out through kube-controller-manager,
// kube-scheduler and the fake kubelet, and breaks pods by image tag.
func TestControllers(t *testing.T) {
	t.Parallel()
	began := time.Now()
	c := Start(t, WithControllers())
	t.Logf("Start with controllers took %v", time.Since(began))
	cs := c.Clientset()
	ctx := t.Context()
	c.Apply(t, namespace("hanzo"))

	deploy := func(name, image string, replicas int32) {
		t.Helper()
		labels := map[string]string{"app.kubernetes.io/name": name}
		_, err := cs.AppsV1().Deployments("hanzo").Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{
				Replicas: &replicas,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: image}}},
				},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create deployment %s: %v", name, err)
		}
	}
	pods := func(t *testing.T, name string) []corev1.Pod {
		t.Helper()
		list, err := cs.CoreV1().Pods("hanzo").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + name})
		if err != nil {
			t.Fatalf("list pods: %v", err)
		}
		return list.Items
	}
	available := func(name string, want int32) func() (bool, error) {
		return func() (bool, error) {
			d, err := cs.AppsV1().Deployments("hanzo").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			s := d.Status
			return s.ObservedGeneration == d.Generation && s.AvailableReplicas == want && s.ReadyReplicas == want &&
				s.UpdatedReplicas == want && s.Replicas == want, nil
		}
	}

	t.Run("deployment becomes available", func(t *testing.T) {
		deploy("web", "ghcr.io/hanzoai/web:v1.0.0", 2)
		c.WaitFor(t, 30*time.Second, available("web", 2))
		got := pods(t, "web")
		if len(got) != 2 {
			t.Fatalf("pods: got %d, want 2", len(got))
		}
		for _, p := range got {
			if p.Spec.NodeName != NodeName || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
				t.Errorf("pod %s: node %q phase %s ip %q, want %s Running with an IP", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.PodIP, NodeName)
			}
			want := []string{"main=ghcr.io/hanzoai/web:v1.0.0 ready=true running=true"}
			if diff := cmp.Diff(want, containerSummary(p)); diff != "" {
				t.Errorf("pod %s containers (-want +got):\n%s", p.Name, diff)
			}
		}
	})

	t.Run("rolling update completes", func(t *testing.T) {
		d, err := cs.AppsV1().Deployments("hanzo").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d.Spec.Template.Spec.Containers[0].Image = "ghcr.io/hanzoai/web:v1.1.0"
		if _, err := cs.AppsV1().Deployments("hanzo").Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.WaitFor(t, 30*time.Second, available("web", 2))
		// The old pods are gone (the kubelet confirmed their deletion).
		c.WaitFor(t, 30*time.Second, func() (bool, error) {
			got := pods(t, "web")
			for _, p := range got {
				if p.Spec.Containers[0].Image != "ghcr.io/hanzoai/web:v1.1.0" {
					return false, nil
				}
			}
			return len(got) == 2, nil
		})
	})

	t.Run("crash image gives CrashLoopBackOff", func(t *testing.T) {
		deploy("api", "ghcr.io/hanzoai/api:v2.0.0-crash", 1)
		c.WaitFor(t, 30*time.Second, func() (bool, error) {
			for _, p := range pods(t, "api") {
				for _, s := range p.Status.ContainerStatuses {
					if s.State.Waiting != nil && s.State.Waiting.Reason == "CrashLoopBackOff" && s.RestartCount > 0 && !s.Ready {
						return p.Status.Phase == corev1.PodRunning && !podReady(p), nil
					}
				}
			}
			return false, nil
		})
		d, err := cs.AppsV1().Deployments("hanzo").Get(ctx, "api", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Status.AvailableReplicas != 0 {
			t.Errorf("deployment api available: got %d, want 0", d.Status.AvailableReplicas)
		}
	})

	t.Run("badpull image gives ImagePullBackOff", func(t *testing.T) {
		deploy("worker", "ghcr.io/hanzoai/worker:v3-badpull", 1)
		c.WaitFor(t, 30*time.Second, func() (bool, error) {
			for _, p := range pods(t, "worker") {
				for _, s := range p.Status.ContainerStatuses {
					if s.State.Waiting != nil && s.State.Waiting.Reason == "ImagePullBackOff" {
						return p.Status.Phase == corev1.PodPending, nil
					}
				}
			}
			return false, nil
		})
	})

	t.Run("pod logs through the API server", func(t *testing.T) {
		deploy("logger", "ghcr.io/hanzoai/logger:v1", 1)
		var pod corev1.Pod
		c.WaitFor(t, 30*time.Second, func() (bool, error) {
			ps := pods(t, "logger")
			if len(ps) == 0 || !podReady(ps[0]) {
				return false, nil
			}
			pod = ps[0]
			return true, nil
		})
		tail := int64(2)
		b, err := cs.CoreV1().Pods("hanzo").GetLogs(pod.Name, &corev1.PodLogOptions{Container: "main", TailLines: &tail, Timestamps: true}).DoRaw(ctx)
		if err != nil {
			t.Fatalf("pods/log: %v", err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 2 || !strings.Contains(lines[0], "image ghcr.io/hanzoai/logger:v1") {
			t.Fatalf("pods/log (tailLines 2): %q", b)
		}
		if _, err := time.Parse(time.RFC3339Nano, strings.Fields(lines[0])[0]); err != nil {
			t.Errorf("pods/log with timestamps: %q", lines[0])
		}
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		rc, err := cs.CoreV1().Pods("hanzo").GetLogs(pod.Name, &corev1.PodLogOptions{Container: "main", Follow: true}).Stream(fctx)
		if err != nil {
			t.Fatalf("pods/log follow: %v", err)
		}
		defer rc.Close()
		sc := bufio.NewScanner(rc)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "still here") {
				return
			}
		}
		t.Fatalf("a followed log gave no new line: %v", sc.Err())
	})

	t.Run("restart api server with controllers", func(t *testing.T) {
		c.RestartAPIServer(t)
		d, err := cs.AppsV1().Deployments("hanzo").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		two := int32(3)
		d.Spec.Replicas = &two
		if _, err := cs.AppsV1().Deployments("hanzo").Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.WaitFor(t, 30*time.Second, available("web", 3))
	})
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func containerSummary(p corev1.Pod) []string {
	var out []string
	for _, s := range p.Status.ContainerStatuses {
		out = append(out, fmt.Sprintf("%s=%s ready=%t running=%t", s.Name, s.Image, s.Ready, s.State.Running != nil))
	}
	return out
}

// TestCleanupLeavesNothing starts a full cluster in a subtest and checks
// that, once the subtest is over, none of its processes, files or
// goroutines is left. It does not run in parallel, so the goroutine check
// sees only this test's.
func TestCleanupLeavesNothing(t *testing.T) {
	before := goleak.IgnoreCurrent()
	var dir string
	var pids map[string]int
	t.Run("cluster", func(t *testing.T) {
		c := Start(t, WithControllers())
		dir, pids = c.Dir, c.PIDs()
	})
	if pids == nil {
		t.Skip("the cluster did not start")
	}
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		pid := pids[name]
		if pid == 0 {
			t.Errorf("%s: no pid recorded", name)
			continue
		}
		if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
			t.Errorf("%s (pid %d) still there after cleanup: kill -0 gave %v", name, pid, err)
		}
	}
	out, err := exec.Command("pgrep", "-af", dir).Output()
	if errors.Is(err, exec.ErrNotFound) {
		t.Log("pgrep not installed: checked the recorded pids only")
	} else if err == nil || len(out) > 0 {
		t.Errorf("processes mentioning %s remain:\n%s", dir, out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still there after cleanup (stat: %v)", dir, err)
	}
	goleak.VerifyNone(t, before)
}
