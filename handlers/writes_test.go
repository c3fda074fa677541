package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/hanzoai/deploy/projection"
)

// fakeWriter applies merge patches to the fleet's live objects and feeds
// the result to the store, as the API server and the watch would.
type fakeWriter struct {
	env *serverEnv

	mu      sync.Mutex
	patches []string
	errs    []error // returned, one per call, before any patch applies
}

func (w *fakeWriter) MergePatch(_ context.Context, kind projection.Kind, ns, name string, patch []byte) (map[string]any, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.patches = append(w.patches, kind.String()+" "+ns+"/"+name+" "+string(patch))
	if len(w.errs) > 0 {
		err := w.errs[0]
		w.errs = w.errs[1:]
		if err != nil {
			return nil, err
		}
	}
	live, err := w.env.live.Get(context.Background(), kind, ns, name)
	if err != nil {
		return nil, err
	}
	var p map[string]any
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, err
	}
	merged := mergeJSON(live, p).(map[string]any)
	md := merged["metadata"].(map[string]any)
	md["resourceVersion"] = md["resourceVersion"].(string) + "1"
	w.env.live.objs[liveKey(kind, ns, name)] = merged
	o, err := projection.Decode(merged)
	if err != nil {
		return nil, err
	}
	if _, err := w.env.store.Apply(projection.Change{Op: projection.Upsert, Object: o}); err != nil {
		return nil, err
	}
	return merged, nil
}

func (w *fakeWriter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.patches)
}

// mergeJSON applies an RFC 7386 merge patch.
func mergeJSON(doc, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	d, ok := doc.(map[string]any)
	out := map[string]any{}
	if ok {
		for k, v := range d {
			out[k] = v
		}
	}
	for k, v := range p {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = mergeJSON(out[k], v)
		}
	}
	return out
}

func newWriteEnv(t *testing.T) (*serverEnv, *fakeWriter) {
	env := newServerEnv(t)
	w := &fakeWriter{env: env}
	env.srv.d.Writer = w
	return env, w
}

func (env *serverEnv) post(t *testing.T, path, token, body string, header ...string) reply {
	t.Helper()
	return env.do(t, http.MethodPost, path, token, []byte(body), append([]string{"Content-Type", "application/json"}, header...)...)
}

// TestWritesRefused: every write × every identity that may not write is
// refused with the right status, before anything is looked up (an app that
// does not exist gets the same answer), and nothing is patched.
func TestWritesRefused(t *testing.T) {
	env, w := newWriteEnv(t)
	writes := []struct{ path, body string }{
		{"/v1/deploy/applications/web/sync", "{}"},
		{"/v1/deploy/applications/web/rollback", `{"id":1}`},
		{"/v1/deploy/web/sync?namespace=tenant-acme", ""},
		{"/v1/deploy/web/rollback?namespace=tenant-acme", `{"tag":"v3.2.1"}`},
		{"/v1/paas/apps/web/deploy?env=main", ""},
		{"/v1/deploy/applications/nosuchapp/sync", "{}"},
		{"/v1/paas/apps/nosuchapp/deploy?env=main", ""},
		{"/api/v1/applications/web/sync", `{"appNamespace":"tenant-acme","prune":false}`},
		{"/api/v1/applications/web/rollback", `{"id":1,"appNamespace":"tenant-acme"}`},
		{"/api/v1/applications/web/resource/actions/v2", `{"appNamespace":"tenant-acme","namespace":"tenant-acme","resourceName":"web","version":"v1","kind":"Deployment","group":"apps","action":"restart"}`},
		{"/api/v1/applications/web/resource/actions?" + webResource, `"restart"`},
		{"/v1/deploy/applications/web/resource/actions/v2", `{"appNamespace":"tenant-acme","namespace":"tenant-acme","resourceName":"web","version":"v1","kind":"Deployment","group":"apps","action":"restart"}`},
	}
	for _, id := range identities[1:] { // all but the SuperAdmin
		want := map[string]int{"acme-member": 403, "globex-orgadmin": 403, "no-org": 403, "anonymous": 401, "expired": 401}[id.name]
		tok := id.token(env, t)
		for _, wr := range writes {
			r := env.post(t, wr.path, tok, wr.body)
			if r.code != want {
				t.Errorf("%s POST %s: got %d, want %d: %s", id.name, wr.path, r.code, want, r.body)
			}
		}
	}
	if n := w.count(); n != 0 {
		t.Fatalf("%d patches were sent for refused writes", n)
	}
	// The audit log recorded the refusals, without tokens.
	logs := env.logs.String()
	if strings.Count(logs, "msg=audit") < len(writes)*5 || strings.Contains(logs, "eyJ") {
		t.Fatalf("audit lines: %d", strings.Count(logs, "msg=audit"))
	}
}

// TestWritesCrossOriginCookie: a cookie-authenticated write from another
// origin is refused; the same with the dashboard's origin passes.
func TestWritesCrossOriginCookie(t *testing.T) {
	env, w := newWriteEnv(t)
	se := &signinEnv{URL: env.URL, m: env.m, a: env.a, clock: env.clock, logs: env.logs}
	c := se.signIn(t, userRoot)
	req := func(origin string) int {
		rq, _ := http.NewRequest(http.MethodPost, env.URL+"/v1/deploy/applications/web/sync", strings.NewReader("{}"))
		rq.Header.Set("Origin", origin)
		resp, err := c.Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := req("https://evil.example"); code != http.StatusForbidden || w.count() != 0 {
		t.Fatalf("foreign origin: %d, %d patches", code, w.count())
	}
	if code := req(env.URL); code != http.StatusOK || w.count() != 1 {
		t.Fatalf("own origin: %d, %d patches", code, w.count())
	}
}

// TestSync: the annotation patch; the answer is the Application with the
// operation: Running for an app not yet rolled out to its declared tag,
// Succeeded at once for one that is.
func TestSync(t *testing.T) {
	env, w := newWriteEnv(t)
	root := env.token(t, userRoot, time.Hour)
	r := env.post(t, "/v1/deploy/applications/web/sync", root, `{"prune":false,"dryRun":false}`)
	var synced uiApplication
	if err := json.Unmarshal([]byte(r.body), &synced); err != nil || synced.Status.OperationState == nil || synced.Status.OperationState.Phase != "Succeeded" {
		t.Fatalf("sync of a synced app: %d %s", r.code, r.body)
	}
	r = env.post(t, "/v1/deploy/applications/iam/sync?appNamespace=hanzo-testnet", root, "")
	if r.code != http.StatusOK {
		t.Fatalf("sync: %d %s", r.code, r.body)
	}
	if !strings.Contains(w.patches[1], `"gitops.hanzo.ai/sync-requested-at":"`+env.clock.Now().UTC().Format(time.RFC3339)+`"`) ||
		!strings.Contains(w.patches[1], `"gitops.hanzo.ai/sync-requested-by":"u-root"`) ||
		!strings.Contains(w.patches[1], `"gitops.hanzo.ai/sync-requested-by-name":"root"`) || !strings.HasPrefix(w.patches[1], "App hanzo-testnet/iam ") {
		t.Fatalf("patch %s", w.patches[1])
	}
	var app uiApplication
	if err := json.Unmarshal([]byte(r.body), &app); err != nil {
		t.Fatal(err)
	}
	if app.Status.OperationState == nil || app.Status.OperationState.Phase != "Running" || app.Status.OperationState.Operation.InitiatedBy.Username != "root" {
		t.Fatalf("operation state %+v", app.Status.OperationState)
	}
	if !strings.Contains(env.logs.String(), "msg=audit") || !strings.Contains(env.logs.String(), "body=sync") {
		t.Fatal("no audit line for the sync")
	}
}

// TestRollbackBodies: each bad body is a 400 that says what to send, and
// changes nothing; good ones patch spec.image.tag.
func TestRollbackBodies(t *testing.T) {
	env, w := newWriteEnv(t)
	root := env.token(t, userRoot, time.Hour)
	bad := []struct{ body, want string }{
		{`not json`, `send {"id": <history id>} or {"tag": "vX.Y.Z"}`},
		{``, `send {"id"`},
		{`{}`, "names no release"},
		{`{"id": 1, "tag": "v1.4.1"}`, "both an id and a tag"},
		{`{"id": 99}`, "has no id 99; its ids are 2, 3"},
		{`{"id": "2"}`, "expected shape"},
		{`{"tag": "latest"}`, "not a release"},
		{`{"tag": "v1.4"}`, "not a release"},
		{`{"tag": "v1.4.1@sha256:abc"}`, "not a release"},
		{`{"tag": "v9.9.9"}`, "was never released"},
		{`{"tag": "v1.4.1", "force": true}`, "expected shape"},
		{`{"tag": "v1.4.1"} {"tag": "v1.3.0"}`, "more than one"},
	}
	for _, b := range bad {
		r := env.post(t, "/v1/deploy/applications/iam/rollback?appNamespace=hanzo", root, b.body)
		if r.code != http.StatusBadRequest || !strings.Contains(errorMessage(t, r), b.want) {
			t.Errorf("rollback %q: %d %s, want 400 saying %q", b.body, r.code, r.body, b.want)
		}
	}
	if w.count() != 0 {
		t.Fatalf("%d patches for bad bodies", w.count())
	}
	// By id (a ReplicaSet revision) and by tag (one known only from the
	// operator's upgradeHistory).
	for _, good := range []struct{ body, tag string }{{`{"id": 2}`, "v1.4.1"}, {`{"tag": "v1.3.0"}`, "v1.3.0"}} {
		r := env.post(t, "/v1/deploy/iam/rollback?namespace=hanzo", root, good.body)
		if r.code != http.StatusOK {
			t.Fatalf("rollback %s: %d %s", good.body, r.code, r.body)
		}
		last := w.patches[len(w.patches)-1]
		if !strings.Contains(last, `"spec":{"image":{"tag":"`+good.tag+`"}}`) {
			t.Fatalf("rollback %s patched %s", good.body, last)
		}
		var app uiApplication
		if err := json.Unmarshal([]byte(r.body), &app); err != nil || app.Status.Sync.Revision != good.tag {
			t.Fatalf("rollback %s answered revision %q", good.body, app.Status.Sync.Revision)
		}
	}
	// A dry run checks and patches nothing.
	n := w.count()
	if r := env.post(t, "/v1/deploy/iam/rollback?namespace=hanzo", root, `{"id": 3, "dryRun": true}`); r.code != http.StatusOK || w.count() != n {
		t.Fatalf("dry run: %d, %d patches", r.code, w.count()-n)
	}
}

// TestRollbackNeedsRepository: an App without spec.image.repository is a
// 422.
func TestRollbackNeedsRepository(t *testing.T) {
	env, _ := newWriteEnv(t)
	o, _ := projection.Decode(map[string]any{"apiVersion": "hanzo.ai/v1", "kind": "App",
		"metadata": map[string]any{"name": "bare", "namespace": "hanzo", "uid": "u-bare"},
		"spec":     map[string]any{"image": map[string]any{"tag": "v1.0.0"}}})
	if _, err := env.store.Apply(projection.Change{Op: projection.Upsert, Object: o}); err != nil {
		t.Fatal(err)
	}
	r := env.post(t, "/v1/deploy/applications/bare/rollback", env.token(t, userRoot, time.Hour), `{"tag":"v1.0.0"}`)
	if r.code != http.StatusUnprocessableEntity || !strings.Contains(errorMessage(t, r), "spec.image.repository") {
		t.Fatalf("rollback without repository: %d %s", r.code, r.body)
	}
}

// TestPaasDeploy: env required; the restart patch on the Deployment; 202.
func TestPaasDeploy(t *testing.T) {
	env, w := newWriteEnv(t)
	root := env.token(t, userRoot, time.Hour)
	for _, c := range []struct {
		path string
		code int
		want string
	}{
		{"/v1/paas/apps/web/deploy", 400, "env is required"},
		{"/v1/paas/apps/web/deploy?env=production", 400, "env must be one of"},
		{"/v1/paas/apps/web/deploy?env=test", 404, "does not run in env test"},
		{"/v1/paas/apps/canary/deploy?env=main", 404, "has no Deployment"},
		{"/v1/paas/apps/docs/deploy?env=main", 404, "does not run"},
	} {
		r := env.post(t, c.path, root, "")
		if r.code != c.code || !strings.Contains(errorMessage(t, r), c.want) {
			t.Errorf("POST %s: %d %s, want %d saying %q", c.path, r.code, r.body, c.code, c.want)
		}
	}
	if w.count() != 0 {
		t.Fatalf("%d patches for refused deploys", w.count())
	}
	r := env.post(t, "/v1/paas/apps/web/deploy?env=main", root, "")
	at := env.clock.Now().UTC().Format(time.RFC3339)
	if r.code != http.StatusAccepted || strings.TrimSpace(r.body) != `{"ok":true,"app":"web","namespace":"tenant-acme","env":"main","restartedAt":"`+at+`"}` {
		t.Fatalf("deploy: %d %s", r.code, r.body)
	}
	if w.patches[0] != `Deployment tenant-acme/web {"spec":{"template":{"metadata":{"annotations":{"hanzo.ai/restartedAt":"`+at+`"}}}}}` {
		t.Fatalf("patch %s", w.patches[0])
	}
}

// TestWriteErrors: Kubernetes errors become safe answers; a conflict is
// retried once.
func TestWriteErrors(t *testing.T) {
	env, w := newWriteEnv(t)
	root := env.token(t, userRoot, time.Hour)
	gr := schema.GroupResource{Group: "hanzo.ai", Resource: "apps"}
	w.errs = []error{apierrors.NewForbidden(gr, "web", nil)}
	r := env.post(t, "/v1/deploy/applications/web/sync", root, "{}")
	if r.code != http.StatusBadGateway || !strings.Contains(errorMessage(t, r), `lacks the "patch" verb`) || strings.Contains(r.body, "forbidden:") {
		t.Fatalf("forbidden: %d %s", r.code, r.body)
	}
	w.errs = []error{apierrors.NewConflict(gr, "web", nil), nil}
	if r = env.post(t, "/v1/deploy/applications/web/sync", root, "{}"); r.code != http.StatusOK {
		t.Fatalf("one conflict: %d %s", r.code, r.body)
	}
	w.errs = []error{apierrors.NewConflict(gr, "web", nil), apierrors.NewConflict(gr, "web", nil)}
	if r = env.post(t, "/v1/deploy/applications/web/sync", root, "{}"); r.code != http.StatusConflict {
		t.Fatalf("two conflicts: %d %s", r.code, r.body)
	}
	w.errs = []error{context.DeadlineExceeded}
	if r = env.post(t, "/v1/deploy/applications/web/sync", root, "{}"); r.code != http.StatusBadGateway || strings.Contains(r.body, "deadline") {
		t.Fatalf("unreachable: %d %s", r.code, r.body)
	}
}

// FuzzRollbackBody: any body is a 400 or a clean tag from the history.
func FuzzRollbackBody(f *testing.F) {
	for _, s := range []string{`{"id":2}`, `{"tag":"v1.4.1"}`, `{"id":-1}`, `{"tag":""}`, `[]`, `null`, `{"id":1e99}`, `{"id":2,"dryRun":true}`} {
		f.Add([]byte(s))
	}
	store := projection.NewStore(projection.DefaultConfig())
	var batch []projection.Change
	for _, m := range fleetObjects(f) {
		o, _ := projection.Decode(m)
		batch = append(batch, projection.Change{Op: projection.Upsert, Object: o})
	}
	if _, err := store.Apply(batch...); err != nil {
		f.Fatal(err)
	}
	app := store.Snapshot().Get("hanzo", "iam")
	f.Fuzz(func(t *testing.T, body []byte) {
		tag, _, err := parseRollback(body, app)
		if err != nil {
			if ae, ok := err.(*apiError); !ok || ae.Code != http.StatusBadRequest {
				t.Fatalf("%q: %v", body, err)
			}
			return
		}
		if !projection.IsSemverTag(tag) || !strings.Contains(historyTags(app), tag) {
			t.Fatalf("%q: rolled back to %q", body, tag)
		}
	})
}

// racingWriter lets another write to the same object land right after each
// of its own: the watch never delivers the version the first patch returned.
type racingWriter struct{ *fakeWriter }

func (w racingWriter) MergePatch(ctx context.Context, kind projection.Kind, ns, name string, patch []byte) (map[string]any, error) {
	stored, err := w.fakeWriter.MergePatch(ctx, kind, ns, name, patch)
	if err != nil {
		return nil, err
	}
	if _, err := w.fakeWriter.MergePatch(ctx, kind, ns, name, []byte(`{"metadata":{"annotations":{"other":"write"}}}`)); err != nil {
		return nil, err
	}
	return stored, nil
}

// TestWriteRacingWrite: when a later write of the object is what the watch
// delivers, the answer is that state, at once, not the state before the
// write after a stall.
func TestWriteRacingWrite(t *testing.T) {
	env, w := newWriteEnv(t)
	env.srv.d.Writer = racingWriter{w}
	root := env.token(t, userRoot, time.Hour)
	for _, path := range []string{"/v1/deploy/applications/web/sync", "/v1/deploy/applications/web/rollback"} {
		body := "{}"
		if strings.HasSuffix(path, "rollback") {
			body = `{"tag":"v3.2.1"}`
		}
		if r := env.post(t, path, root, body); r.code != http.StatusOK {
			t.Fatalf("POST %s: %d %s", path, r.code, r.body)
		}
	}
	if strings.Contains(env.logs.String(), "had not delivered") {
		t.Fatalf("a write waited for a version the watch never delivers:\n%s", env.logs.String())
	}
}

// TestReached: the written version or any later one of an etcd-backed
// server; opaque versions only when equal.
func TestReached(t *testing.T) {
	for _, c := range []struct {
		cur, written string
		want         bool
	}{
		{"100", "100", true}, {"101", "100", true}, {"1000", "999", true}, {"99", "100", false},
		{"abc", "abc", true}, {"abd", "abc", false}, {"0100", "99", false}, {"", "1", false}, {"2", "", false},
	} {
		if got := reached(c.cur, c.written); got != c.want {
			t.Errorf("reached(%q, %q) = %v, want %v", c.cur, c.written, got, c.want)
		}
	}
}
