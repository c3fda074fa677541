package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/projection"
)

const fleetFixture = "../../projection/testdata/fleet.yaml"

// TestLiveResourceAndLogs: against the real API server, the resource route
// returns the live object and a correct diff for an object carrying a
// last-applied configuration; refuses a ref outside the app's tree (404), a
// kind outside the registry (400) and any Secret (400); the logs route
// answers an honest note when there is no kubelet.
func TestLiveResourceAndLogs(t *testing.T) {
	c := clustertest.Start(t)
	objs := clustertest.Manifests(t, fleetFixture)
	for _, o := range objs {
		if o.GetKind() == "Service" && o.GetName() == "iam" {
			o.SetAnnotations(map[string]string{projection.AnnotationLastApplied: `{"apiVersion":"v1","kind":"Service","metadata":{"name":"iam","namespace":"hanzo"},"spec":{"type":"ClusterIP","selector":{"app.kubernetes.io/instance":"iam"},"ports":[{"port":80,"targetPort":8080}]}}`})
		}
	}
	c.ApplyFleet(t, objs)
	const secretValue = "s3cr3t-value-that-must-never-leak"
	if _, err := c.Clientset().CoreV1().Secrets("tenant-acme").Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app.kubernetes.io/instance": "web"}},
		StringData: map[string]string{"password": secretValue},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env := startPlane(t, c.Config)
	env.waitReady(t, 30*time.Second)
	root := env.token(t, admin, time.Hour)

	live, err := c.Clientset().CoreV1().Services("hanzo").Get(t.Context(), "iam", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := env.send(t, nil, http.MethodGet, "/v1/deploy/iam/resource/:Service:hanzo:iam?namespace=hanzo", root, "")
	var res struct {
		Ref           string
		LiveManifest  map[string]any
		DesiredSource string
		Diff          struct {
			Modified bool
			Patch    []map[string]any
		}
	}
	if err := json.Unmarshal([]byte(r.body), &res); err != nil || r.code != http.StatusOK {
		t.Fatalf("resource: %d %s", r.code, r.body)
	}
	md := res.LiveManifest["metadata"].(map[string]any)
	if md["uid"] != string(live.UID) || md["resourceVersion"] != live.ResourceVersion || md["managedFields"] != nil {
		t.Fatalf("live manifest metadata %v is not the live object's (uid %s, rv %s) without managedFields", md, live.UID, live.ResourceVersion)
	}
	// The API server defaulted fields nobody declared (clusterIP,
	// sessionAffinity, protocol…); only the declared difference shows.
	if res.DesiredSource != "last-applied" || !res.Diff.Modified || len(res.Diff.Patch) != 1 ||
		res.Diff.Patch[0]["path"] != "/spec/ports/0/targetPort" || res.Diff.Patch[0]["value"] != float64(8080) {
		t.Fatalf("diff: %s %v %v", res.DesiredSource, res.Diff.Modified, res.Diff.Patch)
	}
	// An object without a last-applied configuration has no desired side.
	r = env.send(t, nil, http.MethodGet, "/v1/deploy/web/resource/apps:Deployment:tenant-acme:web", root, "")
	if r.code != http.StatusOK || !strings.Contains(r.body, `"desiredSource":"none"`) || !strings.Contains(r.body, `"modified":false`) {
		t.Fatalf("deployment without last-applied: %d %s", r.code, r.body)
	}
	for _, bad := range []struct {
		path string
		code int
	}{
		{"/v1/deploy/iam/resource/:Service:hanzo:gateway?namespace=hanzo", http.StatusNotFound},
		{"/v1/deploy/web/resource/apps:Deployment:tenant-globex:api", http.StatusNotFound},
		{"/v1/deploy/web/resource/apps:DaemonSet:tenant-acme:web", http.StatusBadRequest},
		{"/v1/deploy/web/resource/:Secret:tenant-acme:web", http.StatusBadRequest},
		{"/v1/deploy/web/resource/v1:Secret:tenant-acme:web", http.StatusBadRequest},
		{"/v1/deploy/web/resource/:secrets:tenant-acme:web", http.StatusBadRequest},
	} {
		r := env.send(t, nil, http.MethodGet, bad.path, root, "")
		if r.code != bad.code || strings.Contains(r.body, secretValue) || strings.Contains(r.body, "czNjcjN0") {
			t.Errorf("GET %s: %d %s, want %d", bad.path, r.code, r.body, bad.code)
		}
	}
	// The fixture's pods run on nodes without a kubelet.
	r = env.send(t, nil, http.MethodGet, "/v1/deploy/iam/logs?namespace=hanzo", root, "")
	var logs struct{ Pod, Log, Note string }
	if err := json.Unmarshal([]byte(r.body), &logs); err != nil || r.code != http.StatusOK || logs.Log != "" || logs.Note == "" || logs.Pod == "" {
		t.Fatalf("logs without a kubelet: %d %s", r.code, r.body)
	}
	if strings.Contains(env.logs.String(), secretValue) {
		t.Fatal("a Secret's value reached the log")
	}
}

// startShop is the write tests' start: a real API server with controllers,
// the App shop (two replicas, with others given) rolled out by the
// fixture's operator as v1.0.0 (revision 1), then v1.1.0 (revision 2), a
// plane over it, and a SuperAdmin's token. It answers the Apps as stored.
func startShop(t *testing.T, others ...*unstructured.Unstructured) (*writeFixture, *planeEnv, string, []*unstructured.Unstructured) {
	t.Helper()
	c := clustertest.Start(t, clustertest.WithControllers())
	f := &writeFixture{t: t, c: c}
	f.app = clustertest.Object(t, `
apiVersion: hanzo.ai/v1
kind: App
metadata: {name: shop, namespace: hanzo}
spec: {image: {repository: ghcr.io/hanzoai/shop, tag: v1.0.0}, replicas: 2}
`)
	stored := c.ApplyFleet(t, append([]*unstructured.Unstructured{f.app}, others...))
	f.uid = string(stored[0].GetUID())
	c.Apply(t, f.deployment("v1.0.0"))
	f.operator()
	env := startPlane(t, c.Config)
	env.waitReady(t, 30*time.Second)
	root := env.token(t, admin, time.Hour)
	f.waitState(env, root, func(s, h, rev string, hist []string) bool { return s == "Synced" && h == "Healthy" && len(hist) == 1 })
	f.declare("v1.1.0")
	f.operator()
	f.waitState(env, root, func(s, h, rev string, hist []string) bool {
		return s == "Synced" && h == "Healthy" && rev == "v1.1.0" && slices.Equal(hist, []string{"1:v1.0.0", "2:v1.1.0"})
	})
	return f, env, root, stored
}

// waitState waits (90 s at most) until shop's sync, health, revision and
// history, read through the API, satisfy want.
func (f *writeFixture) waitState(env *planeEnv, token string, want func(sync, health, rev string, history []string) bool) {
	f.t.Helper()
	f.c.WaitFor(f.t, 90*time.Second, func() (bool, error) {
		s, h, rev, hist := appState(f.t, env, token)
		return want(s, h, rev, hist), nil
	})
}

// writeFixture is an App the test rolls out as the operator would, with a
// real Deployment the controllers roll: v1.0.0 (revision 1), then v1.1.0
// (revision 2).
type writeFixture struct {
	t   *testing.T
	c   *clustertest.Cluster
	app *unstructured.Unstructured
	uid string
}

func (f *writeFixture) deployment(tag string) *unstructured.Unstructured {
	return clustertest.Object(f.t, fmt.Sprintf(`
apiVersion: apps/v1
kind: Deployment
metadata:
  name: shop
  namespace: hanzo
  labels: {app.kubernetes.io/instance: shop}
  ownerReferences: [{apiVersion: hanzo.ai/v1, kind: App, name: shop, uid: %s, controller: true}]
spec:
  replicas: 2
  selector: {matchLabels: {app.kubernetes.io/instance: shop}}
  template:
    metadata: {labels: {app.kubernetes.io/instance: shop}}
    spec:
      containers: [{name: shop, image: "ghcr.io/hanzoai/shop:%s"}]
`, f.uid, tag))
}

// operator plays the operator's part: the Deployment runs the App's
// declared tag (the template's other fields are kept), and the App's
// status reports the generation it saw.
func (f *writeFixture) operator() {
	f.t.Helper()
	ctx := f.t.Context()
	apps := f.c.Dynamic().Resource(projection.KindApp.GVR()).Namespace("hanzo")
	// The controllers write the Deployment's status meanwhile: read, change
	// and write again on a conflict, as a controller would.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		app, err := apps.Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			return err
		}
		tag, _, _ := unstructured.NestedString(app.Object, "spec", "image", "tag")
		d, err := f.c.Clientset().AppsV1().Deployments("hanzo").Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Template.Spec.Containers[0].Image = "ghcr.io/hanzoai/shop:" + tag
		_, err = f.c.Clientset().AppsV1().Deployments("hanzo").Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		app, err := apps.Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			return err
		}
		app.Object["status"] = map[string]any{"phase": "Running", "readyReplicas": int64(2), "availableReplicas": int64(2), "observedGeneration": app.GetGeneration()}
		_, err = apps.UpdateStatus(ctx, app, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// declare changes the App's declared tag, as a commit to its manifest
// would.
func (f *writeFixture) declare(tag string) {
	f.t.Helper()
	patch := []byte(`{"spec":{"image":{"tag":"` + tag + `"}}}`)
	if _, err := f.c.Dynamic().Resource(projection.KindApp.GVR()).Namespace("hanzo").
		Patch(f.t.Context(), "shop", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// versions reads back what the cluster holds: the App's resourceVersion
// and tag, and the Deployment's generation and image.
func (f *writeFixture) versions() string {
	f.t.Helper()
	app, err := f.c.Dynamic().Resource(projection.KindApp.GVR()).Namespace("hanzo").Get(f.t.Context(), "shop", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	d, err := f.c.Clientset().AppsV1().Deployments("hanzo").Get(f.t.Context(), "shop", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	tag, _, _ := unstructured.NestedString(app.Object, "spec", "image", "tag")
	// The Deployment's generation, not its resourceVersion: the
	// controllers write its status whenever they like.
	return app.GetResourceVersion() + "/" + tag + "/" + strconv.FormatInt(d.Generation, 10) + "/" + d.Spec.Template.Spec.Containers[0].Image
}

// appState reads the Application through the API.
func appState(t *testing.T, env *planeEnv, token string) (sync, health, revision string, history []string) {
	t.Helper()
	r := env.send(t, nil, http.MethodGet, "/v1/deploy/applications/shop", token, "")
	var app struct {
		Status struct {
			Sync    struct{ Status, Revision string }
			Health  struct{ Status string }
			History []struct {
				ID       int64
				Revision string
			}
		}
	}
	if err := json.Unmarshal([]byte(r.body), &app); err != nil || r.code != http.StatusOK {
		t.Fatalf("application: %d %s", r.code, r.body)
	}
	for _, h := range app.Status.History {
		history = append(history, fmt.Sprintf("%d:%s", h.ID, h.Revision))
	}
	return app.Status.Sync.Status, app.Status.Health.Status, app.Status.Sync.Revision, history
}

// TestWritesAgainstCluster: sync, rollback by id and by tag, and a rolling
// restart, against the real API server with controller-manager and
// scheduler; every refusal leaves the cluster unchanged.
func TestWritesAgainstCluster(t *testing.T) {
	f, env, root, _ := startShop(t)
	c, waitState := f.c, func(want func(sync, health, rev string, history []string) bool) {
		t.Helper()
		f.waitState(env, root, want)
	}

	// Check 4: refusals, and the cluster unchanged.
	before := f.versions()
	cookie := env.browser(t, admin)
	writes := []struct{ path, body string }{
		{"/v1/deploy/applications/shop/sync", "{}"},
		{"/v1/deploy/applications/shop/rollback", `{"id": 1}`},
		{"/v1/deploy/shop/sync?namespace=hanzo", ""},
		{"/v1/deploy/shop/rollback?namespace=hanzo", `{"tag": "v1.0.0"}`},
		{"/v1/paas/apps/shop/deploy?env=main", ""},
	}
	for _, w := range writes {
		for _, who := range []struct {
			name   string
			client *http.Client
			token  string
			header []string
			code   int
		}{
			{"member", nil, env.token(t, acmeMember, time.Hour), nil, 403},
			{"orgadmin", nil, env.token(t, globexAdmin, time.Hour), nil, 403},
			{"anonymous", nil, "", nil, 401},
			{"expired", nil, env.token(t, admin, -time.Minute), nil, 401},
			{"foreign origin", cookie, "", []string{"Origin", "https://evil.example"}, 403},
		} {
			r := env.send(t, who.client, http.MethodPost, w.path, who.token, w.body, who.header...)
			if r.code != who.code {
				t.Errorf("%s POST %s: %d %s, want %d", who.name, w.path, r.code, r.body, who.code)
			}
		}
	}
	// Check 5: every bad body is a 400 and changes nothing.
	for _, b := range []string{`nope`, `{}`, `{"id": 7}`, `{"tag": "latest"}`, `{"tag": "v9.0.0"}`, `{"id": 1, "tag": "v1.0.0"}`} {
		if r := env.send(t, nil, http.MethodPost, "/v1/deploy/applications/shop/rollback", root, b); r.code != http.StatusBadRequest {
			t.Errorf("rollback %s: %d %s", b, r.code, r.body)
		}
	}
	if r := env.send(t, nil, http.MethodPost, "/v1/paas/apps/shop/deploy", root, ""); r.code != http.StatusBadRequest {
		t.Errorf("deploy without env: %d", r.code)
	}
	if after := f.versions(); after != before {
		t.Fatalf("refused writes changed the cluster: %s -> %s", before, after)
	}

	// Check 1: sync sets the annotation, answers the operation, and the
	// stream shows the MODIFIED with it.
	shopEvents := follow(t, nil, env.URL+"/v1/deploy/stream/applications?name=shop", root)
	// The stream's headers come before its first snapshot is read: wait for
	// that snapshot's ADDED, or the sync may land in it and never be a
	// MODIFIED.
	c.WaitFor(t, 10*time.Second, func() (bool, error) { return len(shopEvents.of("hanzo", "shop")) > 0, nil })
	r := env.send(t, nil, http.MethodPost, "/v1/deploy/applications/shop/sync", root, "{}")
	if r.code != http.StatusOK || !strings.Contains(r.body, `"operationState":{`) {
		t.Fatalf("sync: %d %s", r.code, r.body)
	}
	app, _ := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace("hanzo").Get(t.Context(), "shop", metav1.GetOptions{})
	if app.GetAnnotations()[projection.AnnotationSyncRequestedAt] == "" || app.GetAnnotations()[projection.AnnotationSyncRequestedBy] != admin.Subject {
		t.Fatalf("annotations after sync: %v", app.GetAnnotations())
	}
	c.WaitFor(t, 10*time.Second, func() (bool, error) {
		return slices.ContainsFunc(shopEvents.of("hanzo", "shop"), func(e appEvent) bool { return e.Type == "MODIFIED" && e.Operation != "" }), nil
	})

	// Check 2: rollback by id, then the operator rolls it out.
	if r := env.send(t, nil, http.MethodPost, "/v1/deploy/applications/shop/rollback", root, `{"id": 1}`); r.code != http.StatusOK {
		t.Fatalf("rollback by id: %d %s", r.code, r.body)
	}
	waitState(func(s, h, rev string, hist []string) bool { return s == "OutOfSync" && rev == "v1.0.0" })
	f.operator()
	waitState(func(s, h, rev string, hist []string) bool {
		// Kubernetes reuses revision 1's ReplicaSet as revision 3.
		return s == "Synced" && h == "Healthy" && rev == "v1.0.0" && slices.Equal(hist, []string{"2:v1.1.0", "3:v1.0.0"})
	})
	// And by tag.
	if r := env.send(t, nil, http.MethodPost, "/v1/deploy/shop/rollback?namespace=hanzo", root, `{"tag": "v1.1.0"}`); r.code != http.StatusOK {
		t.Fatalf("rollback by tag: %d %s", r.code, r.body)
	}
	waitState(func(s, h, rev string, hist []string) bool { return s == "OutOfSync" && rev == "v1.1.0" })
	f.operator()
	waitState(func(s, h, rev string, hist []string) bool {
		return s == "Synced" && h == "Healthy" && rev == "v1.1.0" && slices.Equal(hist, []string{"3:v1.0.0", "4:v1.1.0"})
	})

	// Check 3: a rolling restart makes a new ReplicaSet with the same image.
	rsBefore, _ := c.Clientset().AppsV1().ReplicaSets("hanzo").List(t.Context(), metav1.ListOptions{})
	r = env.send(t, nil, http.MethodPost, "/v1/paas/apps/shop/deploy?env=main", root, "")
	if r.code != http.StatusAccepted || !strings.Contains(r.body, `"ok":true`) {
		t.Fatalf("deploy: %d %s", r.code, r.body)
	}
	c.WaitFor(t, 60*time.Second, func() (bool, error) {
		list, err := c.Clientset().AppsV1().ReplicaSets("hanzo").List(t.Context(), metav1.ListOptions{})
		return err == nil && len(list.Items) == len(rsBefore.Items)+1, err
	})
	d, _ := c.Clientset().AppsV1().Deployments("hanzo").Get(t.Context(), "shop", metav1.GetOptions{})
	if d.Spec.Template.Spec.Containers[0].Image != "ghcr.io/hanzoai/shop:v1.1.0" || d.Spec.Template.Annotations[projection.AnnotationRestartedAt] == "" {
		t.Fatalf("after the restart: image %s, annotations %v", d.Spec.Template.Spec.Containers[0].Image, d.Spec.Template.Annotations)
	}
	waitState(func(s, h, rev string, hist []string) bool { return s == "Synced" && h == "Healthy" && len(hist) == 3 })
	// Every write left one audit line.
	if n := strings.Count(env.logs.String(), "msg=audit"); n < len(writes)*5+7+4 {
		t.Fatalf("%d audit lines", n)
	}
}
