package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/auth/authtest"
	"github.com/hanzoai/deploy/metrics"
	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/web"
)

// fleetFile is the golden fleet of the projection's tests.
const fleetFile = "../projection/testdata/fleet.yaml"

// fleetObjects reads the golden fleet as unstructured maps.
func fleetObjects(t testing.TB) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(fleetFile)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatal(err)
		}
		if m != nil {
			out = append(out, m)
		}
	}
	return out
}

// testEngineSource is the engine's configured source in the tests.
var testEngineSource = projection.EngineSource{Repo: "https://git.example/hanzoai/universe", Ref: "main", Path: "infra/k8s/operator/crs"}

// testProjectionConfig is the default configuration with the engine's
// source and instance configured.
func testProjectionConfig() projection.Config {
	cfg := projection.DefaultConfig()
	src := testEngineSource
	cfg.Engine, cfg.EngineInstance = &src, "universe"
	return cfg
}

// fakeLive serves the fleet's objects as the API server would.
type fakeLive struct {
	objs map[string]map[string]any
	err  error
}

func liveKey(k projection.Kind, ns, name string) string { return k.String() + "/" + ns + "/" + name }

func newFakeLive(objs []map[string]any) *fakeLive {
	l := &fakeLive{objs: map[string]map[string]any{}}
	for _, m := range objs {
		o, err := projection.Decode(m)
		if err != nil {
			continue
		}
		l.objs[liveKey(o.Kind, o.Namespace, o.Name)] = m
	}
	return l
}

func (l *fakeLive) Get(_ context.Context, k projection.Kind, ns, name string) (map[string]any, error) {
	if l.err != nil {
		return nil, l.err
	}
	if m, ok := l.objs[liveKey(k, ns, name)]; ok {
		return m, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: k.Info().Resource}, name)
}

// fakeLogs answers every pod with the same lines, or an error.
type fakeLogs struct {
	mu   sync.Mutex
	text string
	err  error
	last LogRequest
}

func (l *fakeLogs) Logs(_ context.Context, r LogRequest) (io.ReadCloser, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = r
	if l.err != nil {
		return nil, l.err
	}
	return io.NopCloser(strings.NewReader(l.text)), nil
}

// fakeEvents serves Events as the API server lists them: by namespace, and
// by involvedObject.uid when one is given.
type fakeEvents struct {
	items []map[string]any
	err   error
}

func (f *fakeEvents) Events(_ context.Context, ns, uid string) ([]map[string]any, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []map[string]any
	for _, e := range f.items {
		md := e["metadata"].(map[string]any)
		io := e["involvedObject"].(map[string]any)
		if md["namespace"] == ns && (uid == "" || io["uid"] == uid) {
			out = append(out, e)
		}
	}
	return out, nil
}

// fleetEvent is an Event about one object of the golden fleet.
func fleetEvent(ns, name, kind, objName, uid, reason, at string) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "Event",
		"metadata": map[string]any{"name": name, "namespace": ns, "uid": "e-" + name, "resourceVersion": "7", "creationTimestamp": at,
			"managedFields": []any{map[string]any{"manager": "kubelet"}}},
		"involvedObject": map[string]any{"kind": kind, "namespace": ns, "name": objName, "uid": uid, "apiVersion": "v1"},
		"reason":         reason, "message": reason + " of " + objName, "type": "Normal", "count": int64(1),
		"firstTimestamp": at, "lastTimestamp": at, "source": map[string]any{"component": "kubelet"},
	}
}

// fleetEvents: two of web's objects, one of worker's (same namespace,
// another app), one of globex's api, and one of a pod that is gone.
func fleetEvents() *fakeEvents {
	return &fakeEvents{items: []map[string]any{
		fleetEvent("tenant-acme", "web-pod.1", "Pod", "web-55d6c7-x2x2x", "40000000-0000-0000-0000-000000000004", "Pulled", "2026-11-30T10:00:02Z"),
		fleetEvent("tenant-acme", "web-deploy.1", "Deployment", "web", "40000000-0000-0000-0000-000000000002", "ScalingReplicaSet", "2026-11-30T10:00:01Z"),
		fleetEvent("tenant-acme", "worker-deploy.1", "Deployment", "worker", "50000000-0000-0000-0000-000000000002", "ScalingReplicaSet", "2026-11-30T10:00:03Z"),
		fleetEvent("tenant-globex", "api-deploy.1", "Deployment", "api", "60000000-0000-0000-0000-000000000002", "ScalingReplicaSet", "2026-11-30T10:00:04Z"),
		fleetEvent("tenant-acme", "gone-pod.1", "Pod", "web-55d6c7-gone", "40000000-0000-0000-0000-0000000000ff", "Killing", "2026-11-30T09:00:00Z"),
	}}
}

// serverEnv is the whole HTTP surface over the golden fleet, with sign-in
// against an in-process mockoidc provider.
type serverEnv struct {
	URL    string
	m      *mockoidc.MockOIDC
	a      *auth.Authenticator
	clock  *signinClock
	logs   *authtest.LogBuffer
	store  *projection.Store
	live   *fakeLive
	pods   *fakeLogs
	events *fakeEvents
	// metrics records what the server does (served by no listener here).
	metrics *metrics.Metrics
	mu      sync.Mutex
	status  ClusterStatus
	srv     *Server
}

func (env *serverEnv) setStatus(st ClusterStatus) {
	env.mu.Lock()
	env.status = st
	env.mu.Unlock()
}

var readyCluster = ClusterStatus{Configured: true, Reachable: true, AppCRD: true, CDCRD: true, Ready: true}

func newServerEnv(t testing.TB) *serverEnv {
	t.Helper()
	return newServerEnvWith(t, nil)
}

// newServerEnvWith is newServerEnv with deps changed by with before the
// server is built.
func newServerEnvWith(t testing.TB, with func(*Deps)) *serverEnv {
	t.Helper()
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	objs := fleetObjects(t)
	env := &serverEnv{
		URL:    "http://" + l.Addr().String(),
		m:      m,
		clock:  &signinClock{t: time.Now().Truncate(time.Second)},
		logs:   &authtest.LogBuffer{},
		store:  projection.NewStore(testProjectionConfig()),
		live:   newFakeLive(objs),
		pods:   &fakeLogs{text: "listening on :8000\nready\n"},
		events: fleetEvents(),
		status: readyCluster,
	}
	var batch []projection.Change
	for _, o := range objs {
		d, err := projection.Decode(o)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, projection.Change{Op: projection.Upsert, Object: d})
	}
	if _, err := env.store.Apply(batch...); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(env.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	env.a = auth.New(context.Background(), auth.Config{
		Issuer: m.Issuer(), ClientID: m.ClientID, ClientSecret: m.ClientSecret,
		PublicURL: env.URL, CookieKey: bytes.Repeat([]byte{7}, 32), Now: env.clock.Now,
	}, log)
	t.Cleanup(env.a.Close)
	env.metrics = metrics.New(metrics.Sources{Snapshot: env.store.Snapshot})
	deps := Deps{
		Metrics: env.metrics,
		Log:     log, Snapshots: env.store, Projection: testProjectionConfig(),
		Cluster: func() ClusterStatus { env.mu.Lock(); defer env.mu.Unlock(); return env.status },
		Live:    env.live, Logs: env.pods, Events: env.events, Auth: env.a, PublicURL: env.URL, ClusterName: "in-cluster",
		Version: Version{Version: "v0.1.0", BuildDate: "2026-11-01T00:00:00Z", GitCommit: "abc1234"},
		Now:     env.clock.Now, Web: web.Handler(),
	}
	if with != nil {
		with(&deps)
	}
	env.srv = New(deps)
	srv := httptest.NewUnstartedServer(env.srv.Handler())
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return env
}

// identity is one caller of the isolation matrix.
type identity struct {
	name  string
	token func(env *serverEnv, t *testing.T) string // "" for anonymous
}

var (
	userGlobexAdmin = authtest.User{Subject: "u-gina", Extra: map[string]any{"preferred_username": "gina", "owner": "globex", "isAdmin": true}}

	identities = []identity{
		{"superadmin", func(env *serverEnv, t *testing.T) string { return env.token(t, userRoot, time.Hour) }},
		{"acme-member", func(env *serverEnv, t *testing.T) string { return env.token(t, userAlice, time.Hour) }},
		{"globex-orgadmin", func(env *serverEnv, t *testing.T) string { return env.token(t, userGlobexAdmin, time.Hour) }},
		{"no-org", func(env *serverEnv, t *testing.T) string { return env.token(t, userNobody, time.Hour) }},
		{"anonymous", func(*serverEnv, *testing.T) string { return "" }},
		{"expired", func(env *serverEnv, t *testing.T) string { return env.token(t, userAlice, -time.Minute) }},
	}
)

// token is an ID token for user, as the provider would issue it.
func (env *serverEnv) token(t testing.TB, user authtest.User, ttl time.Duration) string {
	t.Helper()
	se := &signinEnv{m: env.m, clock: env.clock}
	return se.idToken(t, user, ttl)
}

type reply struct {
	code   int
	body   string
	header http.Header
}

// get sends a GET as an API client (no browser headers).
func (env *serverEnv) get(t *testing.T, path, token string, header ...string) reply {
	t.Helper()
	return env.do(t, http.MethodGet, path, token, nil, header...)
}

func (env *serverEnv) do(t *testing.T, method, path, token string, body []byte, header ...string) reply {
	t.Helper()
	req, err := http.NewRequest(method, env.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{code: resp.StatusCode, body: string(b), header: resp.Header}
}

// errorMessage decodes the error body and checks its shape.
func errorMessage(t *testing.T, r reply) string {
	t.Helper()
	var eb errorBody
	dec := json.NewDecoder(strings.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&eb); err != nil {
		t.Fatalf("error body %q: %v", r.body, err)
	}
	if eb.Code != r.code || eb.Error != eb.Message || eb.Message == "" {
		t.Fatalf("error body %q does not match status %d", r.body, r.code)
	}
	return eb.Message
}

// golden compares got with testdata/wire/name; with -update it rewrites.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	var v any
	if err := json.Unmarshal(got, &v); err != nil {
		t.Fatalf("%s: not JSON: %v\n%s", name, err, got)
	}
	pretty, _ := json.MarshalIndent(v, "", "  ")
	pretty = append(pretty, '\n')
	path := filepath.Join("testdata", "wire", name)
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, pretty, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s (go test -update writes it): %v", path, err)
	}
	if !bytes.Equal(want, pretty) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n%s", path, firstDifference(string(want), string(pretty)))
	}
}

func firstDifference(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return "line " + strings.TrimSpace(strings.Repeat(" ", 1)) + itoa(uint64(i+1)) + ":\n  want: " + a + "\n  got:  " + b
		}
	}
	return ""
}

func itoa(v uint64) string { return uintString(v) }

var errBoom = errors.New("dial tcp 10.0.0.9:10250: connect: connection refused")
