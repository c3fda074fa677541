package handlers

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hanzoai/deploy/projection"
)

// appVersion is a version of an App of the fleet, written at resourceVersion rv.
func appVersion(t *testing.T, name, tag string, rv uint64) *projection.Object {
	t.Helper()
	o, err := projection.Decode(map[string]any{"apiVersion": "hanzo.ai/v1", "kind": "App",
		"metadata": map[string]any{"name": name, "namespace": "hanzo", "uid": "u-" + name, "resourceVersion": strconv.FormatUint(rv, 10)},
		"spec":     map[string]any{"image": map[string]any{"repository": "ghcr.io/hanzoai/" + name, "tag": tag}}})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestSameAnswersOnTwoReplicas: two replicas that folded the same writes,
// in different batches, answer a list, a detail and a tree byte for byte
// alike, ETags included, and the list's resourceVersion is the cluster's
// position, not either process's count.
func TestSameAnswersOnTwoReplicas(t *testing.T) {
	a, b := newServerEnv(t), newServerEnv(t)
	pos := a.store.Snapshot().Position.First()
	if pos == 0 || pos != b.store.Snapshot().Position.First() {
		t.Fatalf("positions %d and %d after the same fleet", pos, b.store.Snapshot().Position.First())
	}
	one, two := appVersion(t, "edge", "v1.0.0", pos+1), appVersion(t, "edge", "v1.1.0", pos+2)
	for _, c := range []*projection.Object{one, two} {
		if _, err := a.store.Apply(projection.Change{Op: projection.Upsert, Object: c}); err != nil {
			t.Fatal(err)
		}
	}
	// b folds both at once: its revisions differ from a's.
	if _, err := b.store.Apply(projection.Change{Op: projection.Upsert, Object: one}, projection.Change{Op: projection.Upsert, Object: two}); err != nil {
		t.Fatal(err)
	}
	if a.store.Snapshot().Revision == b.store.Snapshot().Revision {
		t.Fatal("the two stores should count revisions differently")
	}
	ta, tb := a.token(t, userRoot, time.Hour), b.token(t, userRoot, time.Hour)
	for _, path := range []string{
		"/api/v1/applications", "/v1/deploy/applications", "/api/v1/applications?selector=hanzo.ai/env%3Dmain",
		"/api/v1/applications/edge?appNamespace=hanzo", "/api/v1/applications/edge/resource-tree?appNamespace=hanzo",
		"/api/v1/applications/web/resource-tree?appNamespace=tenant-acme",
	} {
		ra, rb := a.get(t, path, ta), b.get(t, path, tb)
		if ra.code != http.StatusOK || rb.code != http.StatusOK {
			t.Fatalf("GET %s: %d and %d", path, ra.code, rb.code)
		}
		if ra.body != rb.body {
			t.Errorf("GET %s: the bodies differ:\n%s\n%s", path, ra.body, rb.body)
		}
		if ea, eb := ra.header.Get("ETag"), rb.header.Get("ETag"); ea == "" || ea != eb {
			t.Errorf("GET %s: ETags %q and %q", path, ea, eb)
		}
	}
	r := a.get(t, "/api/v1/applications?fields=metadata.resourceVersion", ta)
	if want := `{"metadata":{"resourceVersion":"` + strconv.FormatUint(pos+2, 10) + `"}}`; strings.TrimSpace(r.body) != want {
		t.Errorf("list resourceVersion %s, want %s", r.body, want)
	}
	// An ETag of one replica is good on the other.
	etag := a.get(t, "/api/v1/applications/edge?appNamespace=hanzo", ta).header.Get("ETag")
	if r := b.get(t, "/api/v1/applications/edge?appNamespace=hanzo", tb, "If-None-Match", etag); r.code != http.StatusNotModified {
		t.Errorf("If-None-Match with the other replica's ETag: %d", r.code)
	}
}

// TestNamedPositionWaits: a list naming a resourceVersion this replica has
// not folded waits for it, and answers at or past it; one never reached is
// a 504 that says what to do; If-None-Match naming a newer position waits
// too.
func TestNamedPositionWaits(t *testing.T) {
	env := newServerEnv(t)
	root := env.token(t, userRoot, time.Hour)
	pos := env.store.Snapshot().Position.First()
	// One writer at a time, as the store requires: the second write
	// waits for the first.
	firstDone := make(chan struct{})
	go func() {
		defer close(firstDone)
		time.Sleep(200 * time.Millisecond)
		_, _ = env.store.Apply(projection.Change{Op: projection.Upsert, Object: appVersion(t, "late", "v1.0.0", pos+10)})
	}()
	start := time.Now()
	r := env.get(t, "/api/v1/applications?resourceVersion="+strconv.FormatUint(pos+10, 10)+"&fields=metadata.resourceVersion", root)
	if r.code != http.StatusOK || !strings.Contains(r.body, `"`+strconv.FormatUint(pos+10, 10)+`"`) {
		t.Fatalf("list at a newer resourceVersion: %d %s", r.code, r.body)
	}
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Errorf("answered after %v: it did not wait for the position", waited)
	}
	if r := env.get(t, "/api/v1/applications?resourceVersion=abc", root); r.code != http.StatusBadRequest {
		t.Errorf("resourceVersion=abc: %d %s", r.code, r.body)
	}
	r = env.get(t, "/api/v1/applications?resourceVersion="+strconv.FormatUint(pos+1000, 10), root)
	if r.code != http.StatusGatewayTimeout || !strings.Contains(errorMessage(t, r), "newer than this replica has seen") {
		t.Errorf("a resourceVersion never reached: %d %s", r.code, r.body)
	}
	// If-None-Match from a replica ahead: the answer waits for its
	// position, so it is never older than what the client holds.
	etag := `"` + strconv.FormatUint(pos+20, 10) + `-abc"`
	<-firstDone
	secondDone := make(chan struct{})
	go func() {
		defer close(secondDone)
		time.Sleep(200 * time.Millisecond)
		_, _ = env.store.Apply(projection.Change{Op: projection.Upsert, Object: appVersion(t, "later", "v1.0.0", pos+20)})
	}()
	defer func() { <-secondDone }()
	r = env.get(t, "/api/v1/applications?fields=metadata.resourceVersion", root, "If-None-Match", etag)
	if r.code != http.StatusOK || !strings.Contains(r.body, `"`+strconv.FormatUint(pos+20, 10)+`"`) {
		t.Errorf("If-None-Match naming a newer position: %d %s", r.code, r.body)
	}
}

func TestTaggedPosition(t *testing.T) {
	for h, want := range map[string]uint64{
		"":                         0,
		`"12-ab"`:                  12,
		`W/"12-ab", "40-x"`:        40,
		`"7"`:                      0,
		`*`:                        0,
		`"99999999999999999999-x"`: 0,
		`"-x", "5-"`:               5,
	} {
		if got := (&Server{}).taggedPosition(h); got.First() != want {
			t.Errorf("taggedPosition(%q) = %s, want %d", h, got, want)
		}
	}
	// With several clusters: the tags' positions name the clusters (and
	// hold commas); the newest of each part is taken.
	s := &Server{clusterNames: []string{"in-cluster", "staging"}}
	for h, want := range map[string]string{
		`"in-cluster=3,staging=9-ab", W/"in-cluster=5,staging=2-cd"`: "in-cluster=5,staging=9",
		`"staging=4-x"`: "in-cluster=0,staging=4",
		`"12-ab"`:       "in-cluster=12,staging=0",
		`"other=4-x"`:   "in-cluster=0,staging=0",
	} {
		if got := s.taggedPosition(h).String(); got != want {
			t.Errorf("taggedPosition(%q) = %s, want %s", h, got, want)
		}
	}
}

// TestNamedPositionClientGone: a client that goes away while its request
// waits for a position ends the wait; the access log records 499 (the
// client closed the request), not a server error.
func TestNamedPositionClientGone(t *testing.T) {
	env := newServerEnv(t)
	root := env.token(t, userRoot, time.Hour)
	pos := env.store.Snapshot().Position.First()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.URL+"/api/v1/applications?resourceVersion="+strconv.FormatUint(pos+1000, 10), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+root)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("answered %s before the client went away", resp.Status)
	}
	var line string
	for deadline := time.Now().Add(5 * time.Second); line == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for l := range strings.Lines(env.logs.String()) {
			if strings.Contains(l, "msg=request") && strings.Contains(l, "path=/api/v1/applications ") {
				line = l
			}
		}
	}
	if line == "" {
		t.Fatalf("no access-log line for the request:\n%s", env.logs.String())
	}
	if !strings.Contains(line, "status=499") {
		t.Errorf("a client gone while waiting is logged as: %s; want status=499", line)
	}
}
