package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/projection"
)

// TestConcurrentWritesOneApp: against the real API server, twenty
// concurrent syncs of one App, then twenty mixed syncs and rollbacks: each
// answers the App as the watch delivered it at or after its own write (no
// stall waiting for a version a later write replaced, no state from before
// the batch), and the sync annotation records the subject.
func TestConcurrentWritesOneApp(t *testing.T) {
	c := clustertest.Start(t)
	app := clustertest.Object(t, `
apiVersion: hanzo.ai/v1
kind: App
metadata:
  name: shop
  namespace: hanzo
  annotations: {gitops.hanzo.ai/sync-requested-at: "2020-01-01T00:00:00Z"}
spec: {image: {repository: ghcr.io/hanzoai/shop, tag: v1.1.0}, replicas: 1}
status:
  phase: Running
  observedGeneration: 1
  upgradeHistory:
  - {tag: v1.0.0, startedAt: "2026-10-01T10:00:00Z", completedAt: "2026-10-01T10:01:00Z", result: Succeeded}
  - {tag: v1.1.0, startedAt: "2026-10-02T10:00:00Z", completedAt: "2026-10-02T10:01:00Z", result: Succeeded}
`)
	c.ApplyFleet(t, []*unstructured.Unstructured{app})
	env := startPlane(t, c.Config)
	env.waitReady(t, 30*time.Second)
	root := env.token(t, admin, time.Hour)
	c.WaitFor(t, 30*time.Second, func() (bool, error) {
		r := env.send(t, nil, http.MethodGet, "/v1/deploy/applications/shop", root, "")
		return r.code == http.StatusOK && strings.Contains(r.body, "v1.0.0"), nil
	})

	type answer struct {
		code    int
		body    string
		took    time.Duration
		started string
	}
	batch := func(name string, write func(i int) (path, body string)) {
		t.Helper()
		start := time.Now().UTC().Truncate(time.Second)
		answers := make([]answer, 20)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Go(func() {
				path, body := write(i)
				t0 := time.Now()
				r := env.send(t, nil, http.MethodPost, path, root, body)
				a := answer{code: r.code, body: r.body, took: time.Since(t0)}
				var app struct {
					Status struct {
						OperationState *struct{ StartedAt string }
					}
				}
				if json.Unmarshal([]byte(r.body), &app) == nil && app.Status.OperationState != nil {
					a.started = app.Status.OperationState.StartedAt
				}
				answers[i] = a
			})
		}
		wg.Wait()
		var slowest time.Duration
		for i, a := range answers {
			slowest = max(slowest, a.took)
			if a.code != http.StatusOK {
				t.Errorf("%s %d: %d %s", name, i, a.code, a.body)
				continue
			}
			// Every write of the batch sets sync-requested-at to its own
			// time: an answer from before the batch still shows 2020.
			at, err := time.Parse(time.RFC3339, a.started)
			if err != nil || at.Before(start) {
				t.Errorf("%s %d: answered a state from before its own write (operation started %q, the batch at %s)", name, i, a.started, start.Format(time.RFC3339))
			}
		}
		t.Logf("%s: 20 concurrent writes, the slowest answered in %s", name, slowest.Round(time.Millisecond))
	}

	batch("sync", func(int) (string, string) { return "/v1/deploy/applications/shop/sync", "{}" })
	batch("sync and rollback", func(i int) (string, string) {
		switch i % 3 {
		case 0:
			return "/v1/deploy/applications/shop/sync", "{}"
		case 1:
			return "/v1/deploy/applications/shop/rollback", fmt.Sprintf(`{"tag":"v1.%d.0"}`, i%2)
		}
		return "/v1/deploy/shop/rollback?namespace=hanzo", `{"tag":"v1.0.0"}`
	})
	if logs := env.logs.String(); strings.Contains(logs, "had not delivered") {
		t.Fatalf("a write waited for a version the watch never delivered:\n%s", grepLines(logs, "had not delivered"))
	}

	live, err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace("hanzo").Get(t.Context(), "shop", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ann := live.GetAnnotations(); ann[projection.AnnotationSyncRequestedBy] != admin.Subject || ann[projection.AnnotationSyncRequestedByName] != "root" {
		t.Fatalf("sync annotations %v: want the subject %q and the name root", ann, admin.Subject)
	}
}

// grepLines keeps the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			out = append(out, strings.TrimRight(l, "\n"))
		}
	}
	return strings.Join(out, "\n")
}
