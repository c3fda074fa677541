package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/projection"
)

// TestArgoRoutesAgainstCluster: Argo CD's paths against the real API server
// with controller-manager and scheduler: the events route lists the Events
// of the app's objects (one the test creates for its Pod among them) and
// none of another app's; the restart action makes a new ReplicaSet; the
// Argo-shaped sync and rollback act like deployd's own, and an option they
// cannot honour changes nothing.
func TestArgoRoutesAgainstCluster(t *testing.T) {
	other := clustertest.Object(t, `
apiVersion: hanzo.ai/v1
kind: App
metadata: {name: blog, namespace: hanzo}
spec: {image: {repository: ghcr.io/hanzoai/blog, tag: v2.0.0}}
`)
	f, env, root, stored := startShop(t, other)
	c, blogUID := f.c, stored[1].GetUID()
	waitState := func(want func(sync, health, rev string, history []string) bool) {
		t.Helper()
		f.waitState(env, root, want)
	}

	// The cluster list: the API server's version as Argo CD shows it, and
	// when the cluster was last asked.
	v, err := c.Clientset().Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	var clusters struct {
		Items []struct {
			Name string
			Info struct {
				ApplicationsCount int
				ServerVersion     string
				ConnectionState   struct {
					Status      string
					AttemptedAt time.Time
				}
			}
		}
	}
	if r := env.send(t, nil, http.MethodGet, "/api/v1/clusters", root, ""); r.code != http.StatusOK || json.Unmarshal([]byte(r.body), &clusters) != nil || len(clusters.Items) != 1 {
		t.Fatalf("clusters: %d %s", r.code, r.body)
	}
	ci := clusters.Items[0].Info
	if ci.ServerVersion != v.Major+"."+strings.TrimSuffix(v.Minor, "+") || ci.ConnectionState.Status != "Successful" ||
		time.Since(ci.ConnectionState.AttemptedAt) > time.Minute || ci.ApplicationsCount != 2 {
		t.Fatalf("the cluster's info: %+v (the API server is %s.%s)", ci, v.Major, v.Minor)
	}

	// Events: one for a Pod of shop's tree, one for the other app.
	var pod corev1.Pod
	c.WaitFor(t, 60*time.Second, func() (bool, error) {
		list, err := c.Clientset().CoreV1().Pods("hanzo").List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=shop"})
		if err != nil || len(list.Items) == 0 {
			return false, err
		}
		pod = list.Items[0]
		r := env.send(t, nil, http.MethodGet, "/api/v1/applications/shop/resource-tree?appNamespace=hanzo", root, "")
		return strings.Contains(r.body, string(pod.UID)), nil
	})
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	for _, ev := range []corev1.Event{
		{ObjectMeta: metav1.ObjectMeta{Name: "shop-pod.test"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "hanzo", Name: pod.Name, UID: pod.UID, APIVersion: "v1"},
			Reason: "Tested", Message: "an event of shop's pod", Type: corev1.EventTypeNormal, FirstTimestamp: now, LastTimestamp: now, Count: 1, Source: corev1.EventSource{Component: "test"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "blog.test"}, InvolvedObject: corev1.ObjectReference{Kind: "App", Namespace: "hanzo", Name: "blog", UID: blogUID, APIVersion: "hanzo.ai/v1"},
			Reason: "Tested", Message: "an event of blog", Type: corev1.EventTypeWarning, FirstTimestamp: now, LastTimestamp: now, Count: 1, Source: corev1.EventSource{Component: "test"}},
	} {
		if _, err := c.Clientset().CoreV1().Events("hanzo").Create(t.Context(), &ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	events := func(query string) []corev1.Event {
		t.Helper()
		r := env.send(t, nil, http.MethodGet, "/api/v1/applications/shop/events?appNamespace=hanzo"+query, root, "")
		var l corev1.EventList
		if r.code != http.StatusOK || json.Unmarshal([]byte(r.body), &l) != nil {
			t.Fatalf("events%s: %d %s", query, r.code, r.body)
		}
		return l.Items
	}
	tree := env.send(t, nil, http.MethodGet, "/api/v1/applications/shop/resource-tree?appNamespace=hanzo", root, "")
	all := events("")
	if !slices.ContainsFunc(all, func(e corev1.Event) bool { return e.Name == "shop-pod.test" }) {
		t.Fatalf("the events of shop lack the pod's: %v", eventNames(all))
	}
	for _, e := range all {
		if e.InvolvedObject.UID == blogUID || !strings.Contains(tree.body, string(e.InvolvedObject.UID)) {
			t.Errorf("event %s of %s/%s (%s) is not about shop's tree", e.Name, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.InvolvedObject.UID)
		}
	}
	one := events("&resourceNamespace=hanzo&resourceName=" + pod.Name + "&resourceUID=" + string(pod.UID))
	if !slices.ContainsFunc(one, func(e corev1.Event) bool { return e.Name == "shop-pod.test" }) ||
		slices.ContainsFunc(one, func(e corev1.Event) bool { return e.InvolvedObject.UID != pod.UID }) {
		t.Fatalf("the pod's events: %v", eventNames(one))
	}
	if r := env.send(t, nil, http.MethodGet, "/api/v1/applications/shop/events?resourceUID="+string(blogUID), root, ""); r.code != http.StatusNotFound {
		t.Fatalf("events of blog through shop: %d %s", r.code, r.body)
	}

	// managed-resources reads the live objects.
	d, _ := c.Clientset().AppsV1().Deployments("hanzo").Get(t.Context(), "shop", metav1.GetOptions{})
	r := env.send(t, nil, http.MethodGet, "/api/v1/applications/shop/managed-resources?appNamespace=hanzo&kind=Deployment", root, "")
	var managed struct {
		Items []struct{ Kind, Name, LiveState, ResourceVersion string }
	}
	if json.Unmarshal([]byte(r.body), &managed) != nil || len(managed.Items) != 1 || !strings.Contains(managed.Items[0].LiveState, string(d.UID)) {
		t.Fatalf("managed-resources: %d %s", r.code, r.body)
	}

	// An option sync cannot honour changes nothing. (The controllers keep
	// writing the Deployment's status: its generation says whether its spec
	// changed.)
	written := func() string {
		t.Helper()
		app, err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace("hanzo").Get(t.Context(), "shop", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d, err := c.Clientset().AppsV1().Deployments("hanzo").Get(t.Context(), "shop", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("App %s %v, Deployment generation %d", app.GetResourceVersion(), app.Object["spec"], d.Generation)
	}
	before := written()
	if r := env.send(t, nil, http.MethodPost, "/api/v1/applications/shop/sync", root, `{"appNamespace":"hanzo","prune":true}`); r.code != http.StatusBadRequest || !strings.Contains(r.body, "prune") {
		t.Fatalf("sync with prune: %d %s", r.code, r.body)
	}
	if r := env.send(t, nil, http.MethodPost, "/api/v1/applications/shop/rollback", root, `{"id":1,"appNamespace":"hanzo","prune":true}`); r.code != http.StatusBadRequest {
		t.Fatalf("rollback with prune: %d %s", r.code, r.body)
	}
	if after := written(); after != before {
		t.Fatalf("refused writes changed the cluster: %s -> %s", before, after)
	}

	// The sync the stock UI sends sets the App's sync annotation.
	ui := `{"appNamespace":"hanzo","revision":"HEAD","prune":false,"dryRun":false,"strategy":{"hook":{"force":false}},"resources":null,"syncOptions":{"items":[]},"retryStrategy":null}`
	if r := env.send(t, nil, http.MethodPost, "/api/v1/applications/shop/sync", root, ui); r.code != http.StatusOK || !strings.Contains(r.body, `"operationState":{`) {
		t.Fatalf("sync: %d %s", r.code, r.body)
	}
	app, _ := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace("hanzo").Get(t.Context(), "shop", metav1.GetOptions{})
	if app.GetAnnotations()[projection.AnnotationSyncRequestedBy] != admin.Subject {
		t.Fatalf("annotations after sync: %v", app.GetAnnotations())
	}

	// Rollback by history id, then the operator rolls it out.
	if r := env.send(t, nil, http.MethodPost, "/api/v1/applications/shop/rollback", root, `{"id":1,"appNamespace":"hanzo","prune":false}`); r.code != http.StatusOK {
		t.Fatalf("rollback: %d %s", r.code, r.body)
	}
	waitState(func(s, h, rev string, hist []string) bool { return s == "OutOfSync" && rev == "v1.0.0" })
	f.operator()
	waitState(func(s, h, rev string, hist []string) bool {
		return s == "Synced" && rev == "v1.0.0" && slices.Equal(hist, []string{"2:v1.1.0", "3:v1.0.0"})
	})

	// The restart action makes a new ReplicaSet with the same image.
	rsBefore, _ := c.Clientset().AppsV1().ReplicaSets("hanzo").List(t.Context(), metav1.ListOptions{})
	body := `{"appNamespace":"hanzo","namespace":"hanzo","resourceName":"shop","version":"v1","kind":"Deployment","group":"apps","action":"restart","resourceActionParameters":[]}`
	if r := env.send(t, nil, http.MethodPost, "/api/v1/applications/shop/resource/actions/v2", root, body); r.code != http.StatusOK {
		t.Fatalf("restart: %d %s", r.code, r.body)
	}
	c.WaitFor(t, 60*time.Second, func() (bool, error) {
		list, err := c.Clientset().AppsV1().ReplicaSets("hanzo").List(t.Context(), metav1.ListOptions{})
		return err == nil && len(list.Items) == len(rsBefore.Items)+1, err
	})
	d, _ = c.Clientset().AppsV1().Deployments("hanzo").Get(t.Context(), "shop", metav1.GetOptions{})
	if d.Spec.Template.Spec.Containers[0].Image != "ghcr.io/hanzoai/shop:v1.0.0" || d.Spec.Template.Annotations[projection.AnnotationRestartedAt] == "" {
		t.Fatalf("after the restart: image %s, annotations %v", d.Spec.Template.Spec.Containers[0].Image, d.Spec.Template.Annotations)
	}
	if !strings.Contains(env.logs.String(), `body="action restart Deployment hanzo/shop at `) {
		t.Fatal("no audit line for the restart")
	}
}

func eventNames(l []corev1.Event) []string {
	var out []string
	for _, e := range l {
		out = append(out, e.Name+"("+e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name+")")
	}
	return out
}
