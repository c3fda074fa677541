package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hanzoai/deploy/fleet"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// CRDDir is the repository's deploy/crds folder, found by walking up from
// the working directory (a package folder under go test) to the folder that
// holds go.mod and deploy/crds.
func CRDDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("working directory: %v", err)
	}
	for {
		crds := filepath.Join(dir, "deploy", "crds")
		if fileExists(filepath.Join(dir, "go.mod")) && fileExists(crds) {
			return crds
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("no deploy/crds beside a go.mod above the working directory")
		}
		dir = parent
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// CRDNames are the names of the CRDs in deploy/crds, sorted.
func CRDNames(t testing.TB) []string {
	t.Helper()
	return sortedKeys(loadCRDs(t))
}

// loadCRDs reads every deploy/crds/*.yaml, keyed by metadata.name; a file
// must be named after the CRD it holds.
func loadCRDs(t testing.TB) map[string]*unstructured.Unstructured {
	t.Helper()
	dir := CRDDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRD manifests in %s (%v)", dir, err)
	}
	crds := make(map[string]*unstructured.Unstructured, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("read CRD: %v", err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &u.Object); err != nil {
			t.Fatalf("parse %s: %v", f, err)
		}
		name := u.GetName()
		if u.GetKind() != "CustomResourceDefinition" || name+".yaml" != filepath.Base(f) {
			t.Fatalf("%s: want one CustomResourceDefinition named after the file, got %s %q", f, u.GetKind(), name)
		}
		crds[name] = u
	}
	return crds
}

// createCRDsEarly returns a step that creates the named CRDs while the API
// server is still coming up. The server delays each create of a custom
// resource by 2 s while its CRD was Established less than 2 s ago (a guard
// for HA clusters); creating the CRDs as soon as the API takes them moves
// that window before the cluster is handed to the test. Failures are left
// for InstallCRD, which runs once the server is ready.
func (c *Cluster) createCRDsEarly(ctx context.Context, names []string) func(*apiserver) {
	pending := slices.Clone(names)
	return func(a *apiserver) {
		for len(pending) > 0 {
			body, err := json.Marshal(c.crds[pending[0]].Object)
			if err != nil {
				return
			}
			status, err := a.request(ctx, http.MethodPost, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body)
			if err != nil || status != http.StatusCreated && status != http.StatusConflict {
				return
			}
			pending = pending[1:]
		}
	}
}

// InstallCRD creates the named CRDs of deploy/crds (or updates them if they
// exist) and waits until every one is Established, i.e. served.
func (c *Cluster) InstallCRD(t testing.TB, names ...string) {
	t.Helper()
	ctx := t.Context()
	client := c.dynamic.Resource(crdResource)
	for _, name := range names {
		crd, ok := c.crds[name]
		if !ok {
			t.Fatalf("no CRD %q in deploy/crds (have %v)", name, sortedKeys(c.crds))
		}
		_, err := client.Create(ctx, crd.DeepCopy(), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			_, err = fleet.Replace(ctx, client, crd)
		}
		if err != nil {
			t.Fatalf("install CRD %s: %v", name, err)
		}
	}
	var createsUndelayed time.Time
	for _, name := range names {
		c.WaitFor(t, startBudget, func() (bool, error) {
			crd, err := client.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, fmt.Errorf("get CRD %s: %w", name, err)
			}
			established, ok := conditionTime(crd, "Established", "True")
			if ok && established.Add(createDelayWindow).After(createsUndelayed) {
				createsUndelayed = established.Add(createDelayWindow)
			}
			return ok, nil
		})
		if err := c.primeCRD(ctx, c.crds[name]); err != nil {
			t.Fatalf("install CRD %s: %v", name, err)
		}
	}
	c.mapper.Reset()
	// Wait out the server's create delay (see createDelayWindow), so a
	// test's first create is as fast as any other.
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(createsUndelayed)):
	}
}

// createDelayWindow: kube-apiserver holds every create of a custom resource
// for 2 s while its CRD's Established condition is less than 2 s old (a
// guard for HA clusters, applied to single servers too); the condition's
// time has one-second precision, and a little margin covers rounding.
const createDelayWindow = 2*time.Second + 50*time.Millisecond

// primeCRD lists the CRD's resource until the API server answers 200. The
// server builds a CRD's storage on the first request and answers 429 with
// "Retry-After: 1" until its watch cache is filled, which takes milliseconds;
// client-go would wait the full second on each first touch of each kind.
// Asking again at once makes a fresh CRD cheap for the tests that follow.
func (c *Cluster) primeCRD(ctx context.Context, crd *unstructured.Unstructured) error {
	path := listPath(crd)
	if path == "" {
		return nil
	}
	deadline := time.Now().Add(startBudget)
	for interval := 5 * time.Millisecond; ; interval = min(2*interval, 100*time.Millisecond) {
		status, err := c.apiserver.request(ctx, http.MethodGet, path, nil)
		if err != nil {
			return fmt.Errorf("list %s: %w", path, err)
		}
		if status == http.StatusOK {
			return nil
		}
		if status != http.StatusTooManyRequests && status != http.StatusNotFound || time.Now().After(deadline) {
			return fmt.Errorf("list %s: got status %d, want 200", path, status)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// listPath is the path that lists the CRD's resource in its first served
// version (limit 1); empty when no version is served.
func listPath(crd *unstructured.Unstructured) string {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if served, _ := m["served"].(bool); served {
			version, _ := m["name"].(string)
			return fmt.Sprintf("/apis/%s/%s/%s?limit=1", group, version, plural)
		}
	}
	return ""
}

// primeAllCRDs primes every Established CRD in the cluster (after a restart
// the API server builds each CRD's storage again).
func (c *Cluster) primeAllCRDs(ctx context.Context) error {
	list, err := c.dynamic.Resource(crdResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list CRDs: %w", err)
	}
	for i := range list.Items {
		if hasCondition(&list.Items[i], "Established", "True") {
			if err := c.primeCRD(ctx, &list.Items[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// DeleteCRD deletes the named CRDs and waits until they are gone (with their
// custom resources) and the API server no longer serves their resources, so
// a test can see an optional kind disappear. (The server drops a CRD's
// endpoint a moment after the CRD object is gone: until then a list of the
// resource still answers, empty.)
func (c *Cluster) DeleteCRD(t testing.TB, names ...string) {
	t.Helper()
	ctx := t.Context()
	client := c.dynamic.Resource(crdResource)
	var paths []string
	for _, name := range names {
		crd, err := client.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			t.Fatalf("get CRD %s: %v", name, err)
		}
		if p := listPath(crd); p != "" {
			paths = append(paths, p)
		}
		if err := client.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("delete CRD %s: %v", name, err)
		}
	}
	for _, name := range names {
		c.WaitFor(t, startBudget, func() (bool, error) {
			_, err := client.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		})
	}
	for _, path := range paths {
		c.WaitFor(t, startBudget, func() (bool, error) {
			status, err := c.apiserver.request(ctx, http.MethodGet, path, nil)
			return status == http.StatusNotFound, err
		})
	}
	c.mapper.Reset()
}

// conditionTime reports whether the condition has the status, and since when.
func conditionTime(u *unstructured.Unstructured, typ, status string) (time.Time, bool) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ && m["status"] == status {
			s, _ := m["lastTransitionTime"].(string)
			at, err := time.Parse(time.RFC3339, s)
			return at, err == nil
		}
	}
	return time.Time{}, false
}

func hasCondition(u *unstructured.Unstructured, typ, status string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			return m["status"] == status
		}
	}
	return false
}
