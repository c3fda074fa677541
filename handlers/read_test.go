package handlers

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/auth/authtest"
	"github.com/hanzoai/deploy/projection"
)

// TestBadInput: every mistake a caller can make is a 4xx whose message says
// what to change — never a 5xx.
func TestBadInput(t *testing.T) {
	env := newServerEnv(t)
	root := env.token(t, userRoot, time.Hour)
	for _, c := range []struct {
		path, want string
		code       int
	}{
		{"/v1/deploy/applications?nmae=web", "unknown query parameter", 400},
		{"/v1/deploy/applications?selector=" + url.QueryEscape("a in (b"), "is not a label selector", 400},
		{"/v1/deploy/applications?selector=" + url.QueryEscape("!!!"), "is not a label selector", 400},
		{"/v1/deploy/applications?name=Not_A_Name", "DNS-1123", 400},
		{"/v1/deploy/applications?name=a&name=b", "more than once", 400},
		{"/v1/deploy/applications?appNamespace=" + strings.Repeat("x", 70), "DNS-1123", 400},
		{"/v1/deploy/applications?fields=spec.source", "fields start with items", 400},
		{"/v1/deploy/applications?fields=items..name", "dotted path", 400},
		{"/v1/deploy/applications?fields=-items.metadata.name", "(exclude) is for streams", 400},
		{"/v1/deploy/applications?projects=" + url.QueryEscape("a b"), "DNS-1123", 400},
		{"/v1/deploy/applications/UPPER", "DNS-1123", 400},
		{"/v1/deploy/applications/iam", "exists in namespaces hanzo, hanzo-testnet", 400},
		{"/v1/deploy/applications/web?refreshh=1", "unknown query parameter", 400},
		{"/v1/deploy/applications/nope", "not found", 404},
		{"/v1/deploy/applications/web/revisions/v9.9.9/metadata", "not in the history", 404},
		{"/v1/deploy/web/resource/no-colons", "group:kind:namespace:name", 400},
		{"/v1/deploy/web/resource/:Secret:tenant-acme:web-env", "is not one deployd reads", 400},
		{"/v1/deploy/web/resource/v1:Secret:tenant-acme:web-env", "is not one deployd reads", 400},
		{"/v1/deploy/web/resource/apps:DaemonSet:tenant-acme:web", "is not one deployd reads", 400},
		{"/v1/deploy/web/resource/:Service:Tenant:web", "not a DNS-1123 label", 400},
		{"/v1/deploy/web/resource/:Service:tenant-acme:" + strings.Repeat("a", 300), "not a valid object name", 400},
		{"/v1/deploy/web/resource/:Service:tenant-acme:nosuch", "not in the cluster", 404},
		{"/v1/deploy/web/resource/:Service:hanzo:iam", "not part of application", 404},
		{"/v1/deploy/web/logs?tail=0", "tail must be", 400},
		{"/v1/deploy/web/logs?tail=5001", "tail must be", 400},
		{"/v1/deploy/web/logs?tail=ten", "tail must be", 400},
		{"/v1/deploy/web/logs?follow=yes", "follow must be", 400},
		{"/v1/deploy/web/logs?container=nosuch", "has no container", 400},
		{"/v1/paas/apps?env=prod", "env must be one of", 400},
		{"/v1/paas/apps?drift=green", "drift must be one of", 400},
		{"/v1/paas/apps/iam", "add ?env=", 400},
		{"/v1/deploy/clusters?x=1", "unknown query parameter", 400},
		{"/v1/deploy/nosuchroute/at/all", "no API route at", 404},
	} {
		r := env.get(t, c.path, root)
		if r.code != c.code {
			t.Errorf("GET %s: got %d, want %d: %s", c.path, r.code, c.code, r.body)
			continue
		}
		if msg := errorMessage(t, r); !strings.Contains(msg, c.want) {
			t.Errorf("GET %s: message %q, want it to say %q", c.path, msg, c.want)
		}
	}
}

// TestNotReady: without a ready cluster the data routes answer 503 with the
// reason, health says degraded with 503 and carries no error string.
func TestNotReady(t *testing.T) {
	env := newServerEnv(t)
	root := env.token(t, userRoot, time.Hour)
	env.setStatus(ClusterStatus{Reason: "no Kubernetes configuration: no --kubeconfig, no KUBECONFIG, and not in a cluster"})
	r := env.get(t, "/v1/deploy/applications", root)
	if r.code != http.StatusServiceUnavailable || !strings.Contains(errorMessage(t, r), "no Kubernetes configuration") {
		t.Fatalf("list while not configured: %d %s", r.code, r.body)
	}
	r = env.get(t, "/v1/deploy/health", "")
	if r.code != http.StatusServiceUnavailable || strings.TrimSpace(r.body) != `{"service":"deploy","status":"degraded","k8s":false}` {
		t.Fatalf("health while not configured: %d %s", r.code, r.body)
	}
	env.setStatus(ClusterStatus{Configured: true, Reachable: true, AppCRD: false, Reason: "the App CRD (apps.hanzo.ai) is not installed"})
	r = env.get(t, "/v1/paas/health", "")
	if r.code != http.StatusServiceUnavailable || strings.TrimSpace(r.body) != `{"service":"paas","status":"degraded","k8s":true,"crd":false}` {
		t.Fatalf("paas health without the CRD: %d %s", r.code, r.body)
	}
	env.setStatus(ClusterStatus{Configured: true, Reachable: true, AppCRD: true, Reason: "the caches are not yet synced",
		Progress: "syncing: 3 of 14 kinds listed, 1200 objects folded"})
	r = env.get(t, "/v1/paas/apps", root)
	if r.code != http.StatusServiceUnavailable || !strings.Contains(errorMessage(t, r), "not yet synced") || r.header.Get("Retry-After") == "" {
		t.Fatalf("board while syncing: %d %s", r.code, r.body)
	}
	r = env.get(t, "/v1/deploy/health", "")
	if r.code != http.StatusServiceUnavailable || strings.TrimSpace(r.body) != `{"service":"deploy","status":"degraded","k8s":true,"crd":true,"reason":"syncing: 3 of 14 kinds listed, 1200 objects folded"}` {
		t.Fatalf("health while syncing: %d %s", r.code, r.body)
	}
	env.setStatus(readyCluster)
	if r = env.get(t, "/v1/deploy/health", ""); r.code != http.StatusOK || strings.TrimSpace(r.body) != `{"service":"deploy","status":"ok","k8s":true,"crd":true}` {
		t.Fatalf("health when ready: %d %s", r.code, r.body)
	}
}

// TestReadyAskedOnce: a ready fleet's status is not computed for every
// read (it walks every informer): a burst of reads asks once, while a
// fleet that is not ready yet is asked on every request, so readiness is
// seen the moment it comes.
func TestReadyAskedOnce(t *testing.T) {
	var asked atomic.Int64
	var ready atomic.Bool
	env := newServerEnvWith(t, func(d *Deps) {
		d.Cluster = func() ClusterStatus {
			asked.Add(1)
			if ready.Load() {
				return readyCluster
			}
			return ClusterStatus{Configured: true, Reachable: true, AppCRD: true, Reason: "the caches are not yet synced"}
		}
	})
	root := env.token(t, userRoot, time.Hour)
	for i := range 5 {
		if r := env.get(t, "/v1/deploy/applications", root); r.code != http.StatusServiceUnavailable {
			t.Fatalf("read %d while syncing: %d %s", i, r.code, r.body)
		}
	}
	if n := asked.Load(); n != 5 {
		t.Errorf("5 reads while syncing asked the clusters %d times; want every time", n)
	}
	ready.Store(true)
	if r := env.get(t, "/v1/deploy/applications", root); r.code != http.StatusOK {
		t.Fatalf("first read once ready: %d %s", r.code, r.body)
	}
	asked.Store(0)
	const reads = 50
	start := time.Now()
	for i := range reads {
		if r := env.get(t, "/api/v1/applications", root); r.code != http.StatusOK {
			t.Fatalf("read %d once ready: %d %s", i, r.code, r.body)
		}
	}
	// At most one question per readyTrusted window the reads spanned.
	if n, most := asked.Load(), int64(time.Since(start)/readyTrusted)+1; n > most {
		t.Errorf("%d reads of a ready fleet asked the clusters %d times; want at most %d", reads, n, most)
	}
}

// TestListContentLength: a plain list is sent with its length, whoever
// asks and whatever it is filtered by, and the length is the body's.
func TestListContentLength(t *testing.T) {
	env := newServerEnv(t)
	for _, c := range []struct {
		who  authtest.User
		path string
	}{
		{userRoot, "/v1/deploy/applications"},
		{userAlice, "/v1/deploy/applications"},
		{userRoot, "/api/v1/applications?projects=acme"},
		{userRoot, "/api/v1/applications?name=no-such-app"},
	} {
		r := env.get(t, c.path, env.token(t, c.who, time.Hour), "Accept-Encoding", "identity")
		if r.code != http.StatusOK {
			t.Fatalf("%s as %s: %d %s", c.path, c.who.Subject, r.code, r.body)
		}
		if got := r.header.Get("Content-Length"); got != strconv.Itoa(len(r.body)) {
			t.Errorf("%s as %s: Content-Length %q, the body is %d bytes", c.path, c.who.Subject, got, len(r.body))
		}
	}
}

// TestETagAndGzip: the list's ETag is its position and a digest of its
// rows, If-None-Match answers 304, a change makes a new ETag, and gzip is
// used when accepted.
func TestETagAndGzip(t *testing.T) {
	env := newServerEnv(t)
	root := env.token(t, userRoot, time.Hour)
	r := env.get(t, "/v1/deploy/applications", root)
	pos := env.store.Snapshot().Position.First()
	if etag := r.header.Get("ETag"); !strings.HasPrefix(etag, `"`+uintString(pos)+`-`) {
		t.Fatalf("ETag %q, want the position %d and a digest", etag, pos)
	}
	if r2 := env.get(t, "/v1/deploy/applications", root, "If-None-Match", r.header.Get("ETag")); r2.code != http.StatusNotModified || r2.body != "" {
		t.Fatalf("If-None-Match: %d %q", r2.code, r2.body)
	}
	// A change moves the revision: the old ETag no longer matches.
	o, _ := projection.Decode(map[string]any{"apiVersion": "hanzo.ai/v1", "kind": "App",
		"metadata": map[string]any{"name": "new", "namespace": "hanzo", "uid": "u-new"},
		"spec":     map[string]any{"image": map[string]any{"repository": "ghcr.io/hanzoai/new", "tag": "v1.0.0"}}})
	if _, err := env.store.Apply(projection.Change{Op: projection.Upsert, Object: o}); err != nil {
		t.Fatal(err)
	}
	r3 := env.get(t, "/v1/deploy/applications", root, "If-None-Match", r.header.Get("ETag"))
	if r3.code != http.StatusOK || !strings.Contains(r3.body, `"name":"new"`) {
		t.Fatalf("after a change: %d", r3.code)
	}
	// The fleet-wide list is compressed on the way the first time and
	// served from the kept compressed form the second: both decode to the
	// plain list.
	for i := range 2 {
		req, _ := http.NewRequest(http.MethodGet, env.URL+"/v1/deploy/applications", nil)
		req.Header.Set("Authorization", "Bearer "+root)
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("request %d: Content-Encoding %q, want gzip", i, resp.Header.Get("Content-Encoding"))
		}
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := io.ReadAll(zr)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("request %d: decoding: %v", i, err)
		}
		if !bytes.Equal(plain, []byte(r3.body)) {
			t.Fatalf("request %d: the gzipped list differs from the plain one", i)
		}
	}
}

// TestAccessLogAndSpan: one structured line per request, without the token;
// a span per request when a tracer provider is installed.
func TestAccessLogAndSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	env := newServerEnv(t)
	tok := env.token(t, userAlice, time.Hour)
	env.get(t, "/v1/deploy/applications/web/resource-tree", tok)
	logs := env.logs.String()
	if !strings.Contains(logs, "msg=request") || !strings.Contains(logs, "route=/v1/deploy/applications/:name/resource-tree") ||
		!strings.Contains(logs, "status=200") || !strings.Contains(logs, "org=acme") {
		t.Fatalf("no access log line for the request:\n%s", logs)
	}
	if strings.Contains(logs, tok) || strings.Contains(logs, "eyJ") {
		t.Fatal("the access log holds the token")
	}
	var found bool
	for _, s := range rec.Ended() {
		if s.Name() == "GET /v1/deploy/applications/:name/resource-tree" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no span for the request; spans: %d", len(rec.Ended()))
	}
}

// TestLogsHonest: no running pod, or a kubelet that cannot be reached, is a
// 200 with an empty log and a note — never invented text.
func TestLogsHonest(t *testing.T) {
	env := newServerEnv(t)
	root := env.token(t, userRoot, time.Hour)
	var ans logsAnswer
	r := env.get(t, "/v1/deploy/worker/logs", root)
	if err := json.Unmarshal([]byte(r.body), &ans); err != nil || r.code != 200 || ans.Log != "" || !strings.Contains(ans.Note, "no running pod") {
		t.Fatalf("scaled-to-zero app: %d %s", r.code, r.body)
	}
	env.pods.err = errBoom
	r = env.get(t, "/v1/deploy/web/logs", root)
	if err := json.Unmarshal([]byte(r.body), &ans); err != nil || r.code != 200 || ans.Log != "" || !strings.Contains(ans.Note, "not reachable") || strings.Contains(r.body, "10250") {
		t.Fatalf("unreachable kubelet: %d %s", r.code, r.body)
	}
	env.pods.err = nil
	env.pods.text = strings.Repeat("x", maxLogBytes+100)
	r = env.get(t, "/v1/deploy/web/logs?tail=5000", root)
	if err := json.Unmarshal([]byte(r.body), &ans); err != nil || len(ans.Log) != maxLogBytes || !ans.Truncated {
		t.Fatalf("oversized log: %d bytes, truncated %v", len(ans.Log), ans.Truncated)
	}
	if env.pods.last.TailLines != 5000 || env.pods.last.LimitBytes != maxLogBytes || env.pods.last.Container != "web" {
		t.Fatalf("log request %+v", env.pods.last)
	}
}

// TestLogsFollow streams lines as SSE events.
func TestLogsFollow(t *testing.T) {
	env := newServerEnv(t)
	root := env.token(t, userRoot, time.Hour)
	env.pods.text = "one\ntwo\n"
	r := env.get(t, "/v1/deploy/web/logs?follow=true", root)
	if r.header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("content type %q", r.header.Get("Content-Type"))
	}
	for _, want := range []string{"retry: 3000", "event: line\ndata: one\n\n", "event: line\ndata: two\n\n", "event: end\n"} {
		if !strings.Contains(r.body, want) {
			t.Fatalf("follow stream lacks %q:\n%s", want, r.body)
		}
	}
}

// TestBrowserBounceOnRead: a page navigation without a session goes to the
// login with the current location.
func TestBrowserBounceOnRead(t *testing.T) {
	env := newServerEnv(t)
	r := env.get(t, "/v1/deploy/applications/web?appNamespace=tenant-acme", "", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document")
	if r.code != http.StatusFound || r.header.Get("Location") != "/v1/deploy/login?returnTo="+url.QueryEscape("/v1/deploy/applications/web?appNamespace=tenant-acme") {
		t.Fatalf("navigation: %d to %q", r.code, r.header.Get("Location"))
	}
	if r = env.get(t, "/v1/deploy/applications", "", "Sec-Fetch-Mode", "cors"); r.code != http.StatusUnauthorized {
		t.Fatalf("fetch: %d", r.code)
	}
}

// TestPaaSDriftFilter: drift=<severity> keeps that severity's rows, drift=1
// (or true) every row that drifts, drift=0 (or false) every row that does
// not; together they are the whole board.
func TestPaaSDriftFilter(t *testing.T) {
	env := newServerEnv(t)
	root := env.token(t, userRoot, time.Hour)
	board := func(q string) []projection.AppView {
		t.Helper()
		r := env.get(t, "/v1/paas/apps"+q, root)
		if r.code != http.StatusOK {
			t.Fatalf("GET /v1/paas/apps%s: %d %s", q, r.code, r.body)
		}
		var l paasList
		if err := json.Unmarshal([]byte(r.body), &l); err != nil {
			t.Fatal(err)
		}
		return l.Apps
	}
	all := board("")
	for _, tc := range []struct {
		q    string
		keep func(projection.DriftSeverity) bool
	}{
		{"?drift=1", func(s projection.DriftSeverity) bool { return s != projection.SeverityOK }},
		{"?drift=true", func(s projection.DriftSeverity) bool { return s != projection.SeverityOK }},
		{"?drift=0", func(s projection.DriftSeverity) bool { return s == projection.SeverityOK }},
		{"?drift=false", func(s projection.DriftSeverity) bool { return s == projection.SeverityOK }},
		{"?drift=red", func(s projection.DriftSeverity) bool { return s == projection.SeverityRed }},
	} {
		got := board(tc.q)
		want := 0
		for _, v := range all {
			if tc.keep(v.Drift.Severity) {
				want++
			}
		}
		if want == 0 || want == len(all) {
			t.Fatalf("%s: the fixture must have rows on both sides (%d of %d)", tc.q, want, len(all))
		}
		if len(got) != want {
			t.Errorf("%s: got %d rows, want %d", tc.q, len(got), want)
		}
		for _, v := range got {
			if !tc.keep(v.Drift.Severity) {
				t.Errorf("%s: row %s has severity %s", tc.q, v.ID, v.Drift.Severity)
			}
		}
	}
}

// TestAppendNamed: the rows of a run named name, found by search in a run
// of one namespace and by a scan across namespaces, narrowed by namespace.
func TestAppendNamed(t *testing.T) {
	row := func(ns, name string) *projection.App {
		return &projection.App{AppMeta: &projection.AppMeta{Namespace: ns, Name: name}}
	}
	one := []*projection.App{row("tenant-acme", "api"), row("tenant-acme", "iam"), row("tenant-acme", "web")}
	across := []*projection.App{row("argocd", "iam"), row("argocd", "web"), row("hanzo", "iam")}
	names := func(rows []*projection.App) (out []string) {
		for _, a := range rows {
			out = append(out, a.Namespace+"/"+a.Name)
		}
		return out
	}
	for _, c := range []struct {
		run             []*projection.App
		name, namespace string
		want            []string
	}{
		{one, "iam", "", []string{"tenant-acme/iam"}},
		{one, "api", "tenant-acme", []string{"tenant-acme/api"}},
		{one, "web", "", []string{"tenant-acme/web"}},
		{one, "iam", "hanzo", nil},
		{one, "kms", "", nil},
		{one, "zzz", "", nil},
		{nil, "iam", "", nil},
		{across, "iam", "", []string{"argocd/iam", "hanzo/iam"}},
		{across, "iam", "hanzo", []string{"hanzo/iam"}},
		{across, "web", "hanzo", nil},
	} {
		if got := names(appendNamed(nil, auth.AllScope(), c.run, c.name, c.namespace)); !slices.Equal(got, c.want) {
			t.Errorf("appendNamed(%v, %q, %q) = %v, want %v", names(c.run), c.name, c.namespace, got, c.want)
		}
	}
}
