package engine

import (
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/projection"
)

func appYAML(name, ns, tag string) string {
	nsLine := ""
	if ns != "" {
		nsLine = "\n  namespace: " + ns
	}
	return fmt.Sprintf(`apiVersion: hanzo.ai/v1
kind: App
metadata:
  name: %s%s
  labels: {app.kubernetes.io/part-of: fleet}
spec:
  image: {repository: ghcr.io/hanzoai/%s, tag: %s}
  replicas: 2
`, name, nsLine, name, tag)
}

// countingTransport counts the server-side applies and deletes sent.
type countingTransport struct {
	rt              http.RoundTripper
	applies, delete *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	switch {
	case r.Method == http.MethodPatch && r.Header.Get("Content-Type") == "application/apply-patch+yaml":
		c.applies.Add(1)
	case r.Method == http.MethodDelete:
		c.delete.Add(1)
	}
	return c.rt.RoundTrip(r)
}

type testEngine struct {
	*Engine
	applies, deletes atomic.Int64
}

func newTestEngine(t *testing.T, c *clustertest.Cluster, repoURL, instance string, mut func(*Config)) *testEngine {
	t.Helper()
	cfg := Defaults()
	cfg.Repo, cfg.Ref, cfg.Path, cfg.Instance = repoURL, "main", "crs", instance
	cfg.Interval = 0
	cfg.CacheDir = filepath.Join(t.TempDir(), "cache")
	if mut != nil {
		mut(&cfg)
	}
	te := &testEngine{}
	rc := rest.CopyConfig(c.Config)
	rc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return countingTransport{rt: rt, applies: &te.applies, delete: &te.deletes}
	}
	e, err := New(cfg, rc, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	te.Engine = e
	return te
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func createNamespaces(t testing.TB, c *clustertest.Cluster, names ...string) {
	t.Helper()
	for _, ns := range names {
		_, err := c.Clientset().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

func getApp(t *testing.T, c *clustertest.Cluster, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get App %s/%s: %v", ns, name, err)
	}
	return u
}

func appExists(t *testing.T, c *clustertest.Cluster, ns, name string) bool {
	t.Helper()
	_, err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// versions reads back the resourceVersion of every App in the namespaces.
func versions(t *testing.T, c *clustertest.Cluster, namespaces ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, ns := range namespaces {
		list, err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range list.Items {
			out[ns+"/"+u.GetName()] = u.GetResourceVersion()
		}
	}
	return out
}

// statuses counts a report's results by status.
func statuses(rep *gitops.ReconcileReport) map[string]int {
	out := map[string]int{}
	for _, r := range rep.Results {
		out[r.Status]++
	}
	return out
}

func resultOf(rep *gitops.ReconcileReport, resource string) gitops.ReconcileResult {
	for _, r := range rep.Results {
		if r.Resource == resource {
			return r
		}
	}
	return gitops.ReconcileResult{}
}
