package stream_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/stream"
	"github.com/hanzoai/deploy/stream/streamtest"
)

// watcher is a live hand-read stream of one identity.
type watcher struct {
	t    *testing.T
	c    *client
	rd   *streamtest.Reader
	stop context.CancelFunc
}

// watch connects an identity to path and reads the initial burst.
func (e *env) watch(t *testing.T, id, path string) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	resp, rd, err := e.dial(ctx, path, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: status %s", id, path, resp.Status)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	w := &watcher{t: t, c: newClient(id, nil), rd: rd, stop: cancel}
	w.c.lenient = strings.Contains(path, "fields=") // trimmed events need not name their namespace
	for w.c.lastID == "" {
		w.next()
	}
	w.c.events = nil
	return w
}

// next reads and applies one frame.
func (w *watcher) next() streamtest.Frame {
	w.t.Helper()
	f, err := w.rd.Next()
	if err != nil {
		w.t.Fatalf("%s: read: %v", w.c.id, err)
	}
	if err := frameApply(w.c, f); err != nil {
		w.t.Fatalf("%s: %v", w.c.id, err)
	}
	return f
}

// read reads until n more events arrived and returns them. Changes are
// applied in the order the test expects them, so an unexpected event shows
// as a difference.
func (w *watcher) read(n int) []event {
	w.t.Helper()
	from := len(w.c.events)
	for len(w.c.events) < from+n {
		w.next()
	}
	return w.c.events[from:]
}

type typeKey struct {
	Type string
	Key  projection.AppKey
}

func typeKeys(evs []event) []typeKey {
	out := make([]typeKey, len(evs))
	for i, ev := range evs {
		out[i] = typeKey{ev.Type, ev.Key}
	}
	return out
}

// TestScopeMoves: changing an App's org label is a DELETED for the tenant
// it leaves (carrying the version it saw, never the new one) and an ADDED
// for the tenant it enters; a SuperAdmin sees MODIFIED; the other tenant
// sees nothing.
func TestScopeMoves(t *testing.T) {
	f := newFleet(5, 2)
	e := newEnv(t, stream.Options{}, f)
	ws := map[string]*watcher{}
	for _, id := range identities {
		ws[id] = e.watch(t, id, "/apps")
	}
	app := func(ns, name string) *appState {
		for _, a := range f.apps {
			if a.ns == ns && a.name == name {
				return a
			}
		}
		t.Fatalf("no app %s/%s", ns, name)
		return nil
	}
	change := func(a *appState, mutate func(*appState)) {
		mutate(a)
		e.apply(projection.Change{Op: projection.Upsert, Object: a.object()})
	}
	acme0, acme1 := app("tenant-acme", "app-00"), app("tenant-acme", "app-01")
	globex0, globex1 := app("tenant-globex", "app-00"), app("tenant-globex", "app-01")
	k := func(a *appState) projection.AppKey { return projection.AppKey{Namespace: a.ns, Name: a.name} }

	change(acme0, func(a *appState) { a.org = "globex" })   // leaves acme; globex does not see tenant-acme
	change(acme0, func(a *appState) { a.org = "acme" })     // back
	change(globex1, func(a *appState) { a.org = "" })       // leaves globex
	change(acme1, func(a *appState) { a.project = "ops" })  // stays
	change(globex1, func(a *appState) { a.org = "globex" }) // back
	change(acme1, func(a *appState) { a.tag = "v9.9.9" })   // markers
	change(globex0, func(a *appState) { a.tag = "v9.9.9" })

	want := map[string][]typeKey{
		"all": {
			{"MODIFIED", k(acme0)}, {"MODIFIED", k(acme0)}, {"MODIFIED", k(globex1)},
			{"MODIFIED", k(acme1)}, {"MODIFIED", k(globex1)}, {"MODIFIED", k(acme1)}, {"MODIFIED", k(globex0)},
		},
		"acme":   {{"DELETED", k(acme0)}, {"ADDED", k(acme0)}, {"MODIFIED", k(acme1)}, {"MODIFIED", k(acme1)}},
		"globex": {{"DELETED", k(globex1)}, {"ADDED", k(globex1)}, {"MODIFIED", k(globex0)}},
	}
	got := map[string][]event{}
	for _, id := range identities {
		got[id] = ws[id].read(len(want[id]))
		if diff := cmp.Diff(want[id], typeKeys(got[id])); diff != "" {
			t.Errorf("%s (-want +got):\n%s", id, diff)
		}
	}
	// The DELETED a tenant gets carries the version it was allowed to see.
	del := got["acme"][0]
	var m wireMeta
	if err := json.Unmarshal([]byte(del.App), &m); err != nil {
		t.Fatal(err)
	}
	if org := m.Metadata.Labels[projection.LabelOrg]; org != "acme" {
		t.Errorf("acme's DELETED carries org %q, want the last version acme saw (acme)", org)
	}
}

// TestFilteredViews: name, projects, selector and appNamespace filters
// apply to every event, and a project move is a DELETED/ADDED for a
// projects view.
func TestFilteredViews(t *testing.T) {
	f := newFleet(6, 3)
	e := newEnv(t, stream.Options{}, f)
	byProject := e.watch(t, "acme", "/apps?projects=shop")
	byName := e.watch(t, "all", "/apps?name=app-01&appNamespace=tenant-acme")
	bySelector := e.watch(t, "all", "/apps?selector=hanzo.ai/org+in+(globex)")
	if got := len(byProject.c.apps); got != 3 {
		t.Errorf("projects=shop burst holds %d apps, want 3", got)
	}
	if got := len(byName.c.apps); got != 1 {
		t.Errorf("name burst holds %d apps, want 1", got)
	}
	if got := len(bySelector.c.apps); got != 3 {
		t.Errorf("selector burst holds %d apps, want 3", got)
	}
	var acme1, globex2 *appState
	for _, a := range f.apps {
		switch {
		case a.ns == "tenant-acme" && a.name == "app-01":
			acme1 = a
		case a.ns == "tenant-globex" && a.name == "app-02":
			globex2 = a
		}
	}
	apply := func(a *appState, mutate func(*appState)) {
		mutate(a)
		e.apply(projection.Change{Op: projection.Upsert, Object: a.object()})
	}
	apply(acme1, func(a *appState) { a.project = "ops" })
	apply(acme1, func(a *appState) { a.project = "shop" })
	apply(globex2, func(a *appState) { a.org = "" })
	apply(globex2, func(a *appState) { a.org = "globex" })
	k1 := projection.AppKey{Namespace: "tenant-acme", Name: "app-01"}
	k2 := projection.AppKey{Namespace: "tenant-globex", Name: "app-02"}
	apply(acme1, func(a *appState) { a.tag = "v2.0.0" }) // a marker every view below sees
	apply(globex2, func(a *appState) { a.tag = "v2.0.0" })
	for _, tc := range []struct {
		name string
		w    *watcher
		want []typeKey
	}{
		{"projects", byProject, []typeKey{{"DELETED", k1}, {"ADDED", k1}, {"MODIFIED", k1}}},
		{"name", byName, []typeKey{{"MODIFIED", k1}, {"MODIFIED", k1}, {"MODIFIED", k1}}},
		{"selector", bySelector, []typeKey{{"DELETED", k2}, {"ADDED", k2}, {"MODIFIED", k2}}},
	} {
		if diff := cmp.Diff(tc.want, typeKeys(tc.w.read(len(tc.want)))); diff != "" {
			t.Errorf("%s view (-want +got):\n%s", tc.name, diff)
		}
	}
}
