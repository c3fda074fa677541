package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/auth/authtest"
	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/stream"
)

// watchPlane is a store and a hub behind a tiny handler that checks a bearer
// token, as the real middleware does.
type watchPlane struct {
	store *projection.Store
	hub   *stream.Hub
	stop  context.CancelFunc
	done  chan struct{}
	// synced: the hub was told the initial lists are folded.
	synced bool
}

func newWatchPlane(t *testing.T, baseRevision uint64) *watchPlane {
	cfg := projection.DefaultConfig()
	cfg.BaseRevision = baseRevision
	p := &watchPlane{store: projection.NewStore(cfg), done: make(chan struct{})}
	p.hub = stream.NewHub(p.store, stream.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	go func() { defer close(p.done); p.hub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-p.done })
	return p
}

func (p *watchPlane) apply(t *testing.T, ns, name, tag string) {
	t.Helper()
	o := &projection.Object{Kind: projection.KindApp, Namespace: ns, Name: name, UID: ns + "-" + name, ResourceVersion: strconv.FormatUint(watchRV.Add(1), 10),
		Generation: 1, Created: 1_760_000_000,
		Spec: &projection.AppSpec{Repository: "ghcr.io/hanzoai/" + name, Tag: tag, Replicas: 1, HasStatus: true, Phase: "Running", ReadyReplicas: 1, ObservedGeneration: 1}}
	deltas, err := p.store.Apply(projection.Change{Op: projection.Upsert, Object: o})
	if err != nil {
		t.Fatal(err)
	}
	p.hub.Publish(deltas)
	if !p.synced {
		// The first write stands for the initial lists: from here the
		// ring holds every change, as a watcher's readiness tells it.
		p.synced = true
		p.hub.Synced(p.store.Snapshot().Position)
	}
}

// watchRV is the tests' cluster: each write gets the next resourceVersion,
// whichever plane (process) folds it.
var watchRV atomic.Uint64

func newWatchServer(t *testing.T, current *atomic.Pointer[watchPlane]) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/deploy/stream/applications" {
			http.NotFound(w, r)
			return
		}
		switch r.Header.Get("Authorization") {
		case "Bearer admin":
		case "Bearer no-org":
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"error":"the account belongs to no organization","message":"the account belongs to no organization","code":403}`))
			return
		default:
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"sign in required","message":"sign in required","code":401}`))
			return
		}
		req, err := stream.ParseRequest(r, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req.Scope = auth.AllScope()
		if err := current.Load().hub.ServeApplications(w, r, req); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func waitWatchOutput(t *testing.T, out *authtest.LogBuffer, what string, re *regexp.Regexp, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(re.FindAllString(out.String(), -1)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; output:\n%s", what, out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWatch: the burst, a change, a lost connection resumed without a
// repeat or a gap, and a server restart that says reset and lists again.
func TestWatch(t *testing.T) {
	var current atomic.Pointer[watchPlane]
	first := newWatchPlane(t, 1_000_000)
	current.Store(first)
	first.apply(t, "hanzo", "iam", "v1.4.1")
	first.apply(t, "hanzo-testnet", "kms", "v0.9.0")
	srv := newWatchServer(t, &current)

	var stdout, stderr authtest.LogBuffer
	ctx, cancel := context.WithCancel(t.Context())
	ended := make(chan error, 1)
	go func() {
		ended <- runWatch(ctx, []string{"--server", srv.URL, "--token", "admin"}, &stdout, &stderr)
	}()
	line := func(typ, app, rest string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d ` + typ + ` +` + regexp.QuoteMeta(app) + ` ` + rest + `$`)
	}
	waitWatchOutput(t, &stdout, "the burst", line("ADDED", "hanzo/iam", `Healthy \S+ v1\.4\.1`), 1)
	waitWatchOutput(t, &stdout, "the burst", line("ADDED", "hanzo-testnet/kms", `\S+ \S+ v0\.9\.0`), 1)

	first.apply(t, "hanzo", "iam", "v1.4.2")
	waitWatchOutput(t, &stdout, "a change", line("MODIFIED", "hanzo/iam", `\S+ \S+ v1\.4\.2`), 1)

	// A lost connection: the watch resumes after the last event it saw.
	srv.CloseClientConnections()
	first.apply(t, "hanzo", "iam", "v1.4.3")
	waitWatchOutput(t, &stdout, "the change made while disconnected", line("MODIFIED", "hanzo/iam", `\S+ \S+ v1\.4\.3`), 1)
	if n := len(line("ADDED", "hanzo/iam", `.*`).FindAllString(stdout.String(), -1)); n != 1 {
		t.Errorf("hanzo/iam ADDED %d times; a resumed watch must not list again:\n%s", n, stdout.String())
	}

	// A restart: the new process cannot resume the old ids.
	second := newWatchPlane(t, 2_000_000)
	second.apply(t, "hanzo", "iam", "v1.4.3")
	current.Store(second)
	srv.CloseClientConnections()
	waitWatchOutput(t, &stdout, "the reset line", regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d reset: `), 1)
	waitWatchOutput(t, &stdout, "the list after the reset", line("ADDED", "hanzo/iam", `\S+ \S+ v1\.4\.3`), 1)

	cancel()
	select {
	case err := <-ended:
		if err != nil {
			t.Errorf("runWatch after cancel: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("runWatch did not return after its context ended")
	}
	if strings.Contains(stdout.String(), "skipped") || strings.Contains(stderr.String(), "skipped") {
		t.Errorf("frames were skipped:\n%s\n%s", stdout.String(), stderr.String())
	}
}

func TestWatchRefused(t *testing.T) {
	var current atomic.Pointer[watchPlane]
	current.Store(newWatchPlane(t, 1_000_000))
	srv := newWatchServer(t, &current)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--server", srv.URL, "--token", "wrong"}, "401 Unauthorized: sign in required"},
		{[]string{"--server", srv.URL}, "refused the token"},
		{[]string{"--server", srv.URL, "--token", "no-org"}, "403 Forbidden"},
		{[]string{"--server", srv.URL, "--token", "admin", "--selector", "a in ("}, "400 Bad Request"},
		{[]string{"--server", "127.0.0.1:8080"}, "not an http(s) URL"},
		{[]string{}, "no server"},
		{[]string{"--server", srv.URL, "extra"}, "unexpected argument"},
	} {
		t.Setenv("DEPLOYD_SERVER", "")
		t.Setenv("DEPLOYD_TOKEN", "")
		var stdout, stderr authtest.LogBuffer
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		err := runWatch(ctx, tc.args, &stdout, &stderr)
		cancel()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}

func TestWatchEnvironment(t *testing.T) {
	var current atomic.Pointer[watchPlane]
	p := newWatchPlane(t, 1_000_000)
	p.apply(t, "hanzo", "iam", "v1.0.0")
	current.Store(p)
	srv := newWatchServer(t, &current)
	t.Setenv("DEPLOYD_SERVER", srv.URL)
	t.Setenv("DEPLOYD_TOKEN", "admin")
	var stdout, stderr authtest.LogBuffer
	ctx, cancel := context.WithCancel(t.Context())
	ended := make(chan error, 1)
	go func() { ended <- runWatch(ctx, []string{"--name", "iam"}, &stdout, &stderr) }()
	waitWatchOutput(t, &stdout, "the burst", regexp.MustCompile(`ADDED +hanzo/iam `), 1)
	cancel()
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
}

// TestWatchSummary: --summary prints the counts by health and by sync of
// the list the server answers, once, and exits; a refused token is an
// error that says so.
func TestWatchSummary(t *testing.T) {
	p := newWatchPlane(t, 1_000_000)
	p.apply(t, "hanzo", "iam", "v1.0.0")
	p.apply(t, "hanzo", "web", "v2.0.0")
	p.apply(t, "hanzo-testnet", "iam", "v1.1.0")
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/deploy/applications" || r.Header.Get("Authorization") != "Bearer admin" {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"sign in required","message":"sign in required","code":401}`))
			return
		}
		query = r.URL.RawQuery
		var items []projection.Application
		for a := range p.store.Snapshot().Apps() {
			items = append(items, a.Application())
		}
		json.NewEncoder(w).Encode(map[string]any{"items": items})
	}))
	t.Cleanup(srv.Close)

	var want struct{ health, sync map[string]int }
	want.health, want.sync = map[string]int{}, map[string]int{}
	for a := range p.store.Snapshot().Apps() {
		want.health[string(a.Health.Status)]++
		want.sync[string(a.Sync)]++
	}
	var stdout, stderr authtest.LogBuffer
	if err := runWatch(t.Context(), []string{"--server", srv.URL, "--token", "admin", "--project", "default", "--summary"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	wantOut := "3 applications\n" +
		"health: " + counts(summaryHealth, want.health) + "\n" +
		"sync:   " + counts(summarySync, want.sync) + "\n"
	if stdout.String() != wantOut {
		t.Errorf("got\n%s\nwant\n%s", stdout.String(), wantOut)
	}
	if !strings.Contains(stdout.String(), "health: Healthy ") || query != "projects=default" {
		t.Errorf("output %q, query %q: want the health line and the filter passed on", stdout.String(), query)
	}
	err := runWatch(t.Context(), []string{"--server", srv.URL, "--token", "wrong", "--summary"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "401 Unauthorized: sign in required") {
		t.Errorf("refused token: got %v", err)
	}
}
