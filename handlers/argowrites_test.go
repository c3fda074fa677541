package handlers

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hanzoai/deploy/projection"
)

// TestArgoSyncBodies: Argo CD's SyncRequest as its UI sends it is a sync;
// each option deployd cannot honour is a 400 naming it, and nothing is
// patched; a dry run patches nothing.
func TestArgoSyncBodies(t *testing.T) {
	env, w := newWriteEnv(t)
	root := env.token(t, userRoot, time.Hour)
	const path = "/api/v1/applications/web/sync"
	bad := []struct{ body, want string }{
		{`{"prune":true}`, "prune is not supported"},
		{`{"resources":[{"group":"apps","kind":"Deployment","name":"web"}]}`, "resources is not supported"},
		{`{"strategy":{"apply":{"force":false}}}`, "strategy.apply is not supported"},
		{`{"strategy":{"hook":{"force":true}}}`, "strategy.hook.force is not supported"},
		{`{"syncOptions":{"items":["Replace=true"]}}`, "syncOptions is not supported"},
		{`{"retryStrategy":{"limit":2}}`, "retryStrategy is not supported"},
		{`{"manifests":["{}"]}`, "manifests is not supported"},
		{`{"infos":[{"name":"a","value":"b"}]}`, "infos is not supported"},
		{`{"revision":"v1.0.0"}`, "cannot be synced"},
		{`{"revisions":["v1.0.0"]}`, "cannot be synced"},
		{`{"sourcePositions":[2]}`, "one source"},
		{`{"name":"worker"}`, "the body names application"},
		{`{"project":"default"}`, "belongs to project"},
		{`{"force":true}`, `field "force"`},
		{`[]`, "expected shape"},
		{`{} {}`, "more than one"},
	}
	for _, b := range bad {
		r := env.post(t, path, root, b.body)
		if r.code != http.StatusBadRequest || !strings.Contains(errorMessage(t, r), b.want) {
			t.Errorf("sync %s: %d %s, want 400 saying %q", b.body, r.code, r.body, b.want)
		}
	}
	// The body's appNamespace locates the app when the query names none
	// (a name may be in several clusters): another namespace's app is not
	// found; with the query naming one, a body naming another is refused.
	if r := env.post(t, path, root, `{"appNamespace":"tenant-globex"}`); r.code != http.StatusNotFound {
		t.Errorf("sync naming another namespace in the body: %d %s, want 404", r.code, r.body)
	}
	if r := env.post(t, path+"?appNamespace=tenant-acme", root, `{"appNamespace":"tenant-globex"}`); r.code != http.StatusBadRequest || !strings.Contains(errorMessage(t, r), "appNamespace") {
		t.Errorf("sync whose body contradicts the query: %d %s, want 400 saying appNamespace", r.code, r.body)
	}
	if w.count() != 0 {
		t.Fatalf("%d patches for refused syncs", w.count())
	}
	// What the stock UI sends on SYNCHRONIZE with the defaults.
	ui := `{"appNamespace":"tenant-acme","revision":"HEAD","prune":false,"dryRun":false,"strategy":{"hook":{"force":false}},"resources":null,"syncOptions":{"items":[]},"retryStrategy":null}`
	if r := env.post(t, path, root, ui); r.code != http.StatusOK || w.count() != 1 || !strings.Contains(w.patches[0], "sync-requested-at") {
		t.Fatalf("the UI's sync: %d %s, patches %v", r.code, r.body, w.patches)
	}
	for _, body := range []string{`{"revision":"v3.2.1","name":"web","project":"storefront"}`, `{}`, ``} {
		if r := env.post(t, path, root, body); r.code != http.StatusOK {
			t.Fatalf("sync %q: %d %s", body, r.code, r.body)
		}
	}
	n := w.count()
	r := env.post(t, path, root, `{"dryRun":true}`)
	var app uiApplication
	if r.code != http.StatusOK || json.Unmarshal([]byte(r.body), &app) != nil || app.Metadata.Name != "web" || w.count() != n {
		t.Fatalf("dry run: %d, %d patches", r.code, w.count()-n)
	}
}

// TestArgoRollbackBody: Argo CD's ApplicationRollbackRequest rolls back by
// history id; prune is refused by name.
func TestArgoRollbackBody(t *testing.T) {
	env, w := newWriteEnv(t)
	root := env.token(t, userRoot, time.Hour)
	const path = "/api/v1/applications/iam/rollback"
	for _, b := range []struct{ body, want string }{
		{`{"id":2,"appNamespace":"hanzo","prune":true}`, "prune is not supported"},
		{`{"id":2,"appNamespace":"hanzo","name":"gateway"}`, "the body names application"},
		{`{"id":2,"appNamespace":"hanzo","project":"default"}`, "belongs to project"},
	} {
		r := env.post(t, path+"?appNamespace=hanzo", root, b.body)
		if r.code != http.StatusBadRequest || !strings.Contains(errorMessage(t, r), b.want) {
			t.Errorf("rollback %s: %d %s, want 400 saying %q", b.body, r.code, r.body, b.want)
		}
	}
	if w.count() != 0 {
		t.Fatalf("%d patches for refused rollbacks", w.count())
	}
	r := env.post(t, path+"?appNamespace=hanzo", root, `{"id":2,"appNamespace":"hanzo","prune":false}`)
	if r.code != http.StatusOK || w.count() != 1 || !strings.Contains(w.patches[0], `"spec":{"image":{"tag":"v1.4.1"}}`) {
		t.Fatalf("rollback by id: %d %s, patches %v", r.code, r.body, w.patches)
	}
}

// TestRestartAction: the restart action patches the Deployment's template
// (a rolling restart), through both of Argo CD's forms; anything else is a
// 400 and patches nothing; every run is audited.
func TestRestartAction(t *testing.T) {
	env, w := newWriteEnv(t)
	root := env.token(t, userRoot, time.Hour)
	v2 := func(fields string) string {
		return `{"appNamespace":"tenant-acme","namespace":"tenant-acme","version":"v1",` + fields + `}`
	}
	for _, b := range []struct{ path, body, want string }{
		{"/api/v1/applications/web/resource/actions/v2", v2(`"resourceName":"web","kind":"Deployment","group":"apps","action":"scale"`), "is not one deployd runs"},
		{"/api/v1/applications/web/resource/actions/v2", v2(`"resourceName":"web-55d6c7-x2x2x","kind":"Pod","group":"","action":"restart"`), "restart runs on a Deployment"},
		{"/api/v1/applications/web/resource/actions/v2", v2(`"resourceName":"web","kind":"Deployment","group":"apps","action":"restart","resourceActionParameters":[{"name":"x","value":"1"}]`), "takes none"},
		{"/api/v1/applications/web/resource/actions/v2", v2(`"resourceName":"web","kind":"Deployment","group":"apps","action":"restart","force":true`), `field "force"`},
		{"/api/v1/applications/web/resource/actions/v2?resourceName=worker", v2(`"resourceName":"web","kind":"Deployment","group":"apps","action":"restart"`), "contradicts the query"},
		{"/api/v1/applications/web/resource/actions/v2", v2(`"resourceName":"web","kind":"Secret","group":"","action":"restart"`), "is not one deployd reads"},
		{"/api/v1/applications/web/resource/actions?" + webResource, `{"action":"restart"}`, "as a JSON string"},
	} {
		r := env.post(t, b.path, root, b.body)
		if r.code != http.StatusBadRequest || !strings.Contains(errorMessage(t, r), b.want) {
			t.Errorf("POST %s %s: %d %s, want 400 saying %q", b.path, b.body, r.code, r.body, b.want)
		}
	}
	if r := env.post(t, "/api/v1/applications/web/resource/actions/v2", root, v2(`"resourceName":"worker","kind":"Deployment","group":"apps","action":"restart"`)); r.code != http.StatusNotFound {
		t.Errorf("restart of another app's Deployment: %d %s", r.code, r.body)
	}
	if w.count() != 0 {
		t.Fatalf("%d patches for refused actions", w.count())
	}
	want := `Deployment tenant-acme/web {"spec":{"template":{"metadata":{"annotations":{"hanzo.ai/restartedAt":"` + env.clock.Now().UTC().Format(time.RFC3339) + `"}}}}}`
	for i, p := range []struct{ path, body string }{
		{"/api/v1/applications/web/resource/actions/v2", v2(`"resourceName":"web","kind":"Deployment","group":"apps","action":"restart"`)},
		{"/api/v1/applications/web/resource/actions?" + webResource, `"restart"`},
	} {
		r := env.post(t, p.path, root, p.body)
		if r.code != http.StatusOK || strings.TrimSpace(r.body) != `{}` || w.count() != i+1 || w.patches[i] != want {
			t.Fatalf("POST %s: %d %s, patches %v", p.path, r.code, r.body, w.patches)
		}
	}
	if n := strings.Count(env.logs.String(), "body=\"action restart Deployment tenant-acme/web at "); n != 2 {
		t.Fatalf("%d audit lines of the restarts:\n%s", n, env.logs.String())
	}
}

func FuzzSyncBody(f *testing.F) {
	for _, s := range []string{`{}`, `{"prune":true}`, `{"strategy":{"hook":{"force":false}}}`, `{"syncOptions":{"items":[]}}`,
		`{"revision":"HEAD","dryRun":true}`, `{"resources":null}`, `{"retryStrategy":null}`, `null`, `[]`, `{"sourcePositions":[1]}`} {
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
	app := store.Snapshot().Get("tenant-acme", "web")
	f.Fuzz(func(t *testing.T, body []byte) {
		_, err := parseSync(body, app)
		if err == nil {
			return
		}
		ae, ok := err.(*apiError)
		if !ok || ae.Code != http.StatusBadRequest || ae.Message == "" {
			t.Fatalf("%q: %v", body, err)
		}
		// What a client is told is deployd's words, never its body echoed
		// beyond a short quote.
		if len(ae.Message) > 400 {
			t.Fatalf("%q: a %d-byte message", body, len(ae.Message))
		}
	})
}
