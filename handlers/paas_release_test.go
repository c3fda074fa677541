package handlers

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hanzoai/deploy/projection"
)

// fakeReleases is a release source held in memory: a repository without
// facts is pending. set announces a change as the real source does.
type fakeReleases struct {
	mu      sync.Mutex
	facts   map[string]projection.Release
	gen     uint64
	changed chan struct{}
}

func newFakeReleases() *fakeReleases {
	return &fakeReleases{facts: map[string]projection.Release{}, changed: make(chan struct{})}
}

func (f *fakeReleases) Release(repository, _ string) *projection.Release {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.facts[repository]
	if !ok {
		return &projection.Release{Status: "pending"}
	}
	return &r
}

func (f *fakeReleases) Changes() (uint64, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gen, f.changed
}

func (f *fakeReleases) set(repository string, r projection.Release) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.facts[repository] = r
	f.gen++
	close(f.changed)
	f.changed = make(chan struct{})
}

func newReleaseEnv(t *testing.T) (*serverEnv, *fakeReleases) {
	t.Helper()
	rel := newFakeReleases()
	env := newServerEnvWith(t, func(d *Deps) { d.Releases, d.ReleaseChanges = rel.Release, rel.Changes })
	return env, rel
}

func boardRows(t *testing.T, body string) (map[string]projection.AppView, paasSummary) {
	t.Helper()
	var out struct {
		Apps    []projection.AppView
		Summary paasSummary
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("board: %v in %s", err, body)
	}
	rows := map[string]projection.AppView{}
	for _, v := range out.Apps {
		rows[v.ID] = v
	}
	return rows, out.Summary
}

func kinds(v projection.AppView) string {
	var k []string
	for _, f := range v.Drift.Flags {
		k = append(k, string(f.Kind))
	}
	return strings.Join(k, ",")
}

// TestPaaSBoardReleaseSource: rows not yet fetched say pending and carry no
// release flag; answered rows carry stale, zero-assets with their
// messages; a failed fetch shows its safe reason, never red; the answer's
// ETag moves with the release facts though the cluster did not change.
func TestPaaSBoardReleaseSource(t *testing.T) {
	env, rel := newReleaseEnv(t)
	root := env.token(t, userRoot, time.Hour)

	r := env.get(t, "/v1/paas/apps", root)
	rows, sum := boardRows(t, r.body)
	if r.code != http.StatusOK || len(rows) != 7 {
		t.Fatalf("board: %d %s", r.code, r.body)
	}
	for id, v := range rows {
		if v.Source != "pending" || strings.Contains(kinds(v), "stale") || strings.Contains(kinds(v), "release") || strings.Contains(kinds(v), "assets") {
			t.Errorf("%s before any fetch: source %q flags %q, want pending without release flags", id, v.Source, kinds(v))
		}
	}
	if sum.ByDrift["red"] != 1 || sum.ByDrift["yellow"] != 1 || sum.ByDrift["ok"] != 5 {
		t.Errorf("summary while pending: got %v, want the cluster-only verdicts (ok 5, yellow 1, red 1)", sum.ByDrift)
	}
	etag := r.header.Get("ETag")

	rel.set("ghcr.io/hanzoai/iam", projection.Release{LatestTag: "v1.5.0", DeclaredURL: "https://github.com/hanzoai/iam/releases/tag/v1.4.2"})
	rel.set("registry.acme.dev/acme/web", projection.Release{Status: "error (registry unreachable)"})
	r = env.get(t, "/v1/paas/apps", root, "If-None-Match", etag)
	if r.code != http.StatusOK || r.header.Get("ETag") == etag {
		t.Fatalf("after a refresh: %d, ETag %q (was %q): a client holding the old board must get the new one", r.code, r.header.Get("ETag"), etag)
	}
	rows, _ = boardRows(t, r.body)
	iam := rows["hanzoai/iam/main"]
	if iam.Source != "ok" || iam.LatestTag != "v1.5.0" || kinds(iam) != "stale,zero-assets" || iam.Drift.Severity != "red" {
		t.Errorf("iam main: source %q latest %q flags %q severity %s, want ok, v1.5.0, stale,zero-assets, red", iam.Source, iam.LatestTag, kinds(iam), iam.Drift.Severity)
	}
	msgs := map[projection.DriftKind]string{}
	for _, f := range iam.Drift.Flags {
		msgs[f.Kind] = f.Message
	}
	if msgs["stale"] != "a newer release v1.5.0 exists; v1.4.2 is declared" || msgs["zero-assets"] != "the release of v1.4.2 has no assets" {
		t.Errorf("messages: got %q", msgs)
	}
	if web := rows["acme/web/main"]; web.Source != "error (registry unreachable)" || len(web.Drift.Flags) != 0 || web.Drift.Severity != "ok" {
		t.Errorf("acme web: source %q flags %q, want the error and no flag", web.Source, kinds(web))
	}
	r = env.get(t, "/v1/paas/apps/web?env=main", root)
	if r.code != http.StatusOK || !strings.Contains(r.body, `"source":"error (registry unreachable)"`) {
		t.Errorf("one app: %d %s", r.code, r.body)
	}
}

// boardStream reads the drift board's stream.
type boardStream struct {
	events chan boardEventT
}

type boardEventT struct {
	Type string
	App  projection.AppView
}

func openBoard(t *testing.T, env *serverEnv, token string) *boardStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, env.URL+"/v1/paas/stream/apps", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		t.Fatalf("board stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	bs := &boardStream{events: make(chan boardEventT, 64)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(bs.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev struct{ Result boardEventT }
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Errorf("event %s: %v", data, err)
				return
			}
			bs.events <- ev.Result
		}
	}()
	t.Cleanup(func() { cancel(); resp.Body.Close(); <-done })
	return bs
}

func (bs *boardStream) next(t *testing.T) boardEventT {
	t.Helper()
	select {
	case ev, ok := <-bs.events:
		if !ok {
			t.Fatal("the board stream ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no board event within 10s")
	}
	return boardEventT{}
}

// TestPaaSStreamModifiedOnRefresh: a refresh that changes a row's verdict
// is a MODIFIED on the board stream of whoever sees that app, and of no
// one else; rows whose view did not change send nothing.
func TestPaaSStreamModifiedOnRefresh(t *testing.T) {
	env, rel := newReleaseEnv(t)
	root := openBoard(t, env, env.token(t, userRoot, time.Hour))
	globex := openBoard(t, env, env.token(t, userGlobexAdmin, time.Hour))
	for range 7 {
		if ev := root.next(t); ev.Type != "ADDED" || ev.App.Source != "pending" {
			t.Fatalf("root burst: got %s %s (source %q), want ADDED pending", ev.Type, ev.App.ID, ev.App.Source)
		}
	}
	for range 2 {
		if ev := globex.next(t); ev.Type != "ADDED" || ev.App.Org != "globex" {
			t.Fatalf("globex burst: got %s %s, want ADDED of a globex row", ev.Type, ev.App.ID)
		}
	}

	rel.set("ghcr.io/hanzoai/iam", projection.Release{LatestTag: "v1.5.0", DeclaredURL: "u", DeclaredAssets: 2})
	got := map[string]string{}
	for range 2 {
		ev := root.next(t)
		got[ev.App.ID] = ev.Type + " " + ev.App.Source + " " + kinds(ev.App)
	}
	want := map[string]string{"hanzoai/iam/main": "MODIFIED ok stale", "hanzoai/iam/test": "MODIFIED ok un-rolled"}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: got %q, want %q", id, got[id], w)
		}
	}

	// The same answer again changes no verdict: nothing is sent. The next
	// event anyone sees is the globex row's.
	rel.set("ghcr.io/hanzoai/iam", projection.Release{LatestTag: "v1.5.0", DeclaredURL: "u", DeclaredAssets: 2})
	rel.set("ghcr.io/globex/api", projection.Release{LatestTag: "v3.2.0", DeclaredURL: "u", DeclaredAssets: 1})
	for _, bs := range []*boardStream{root, globex} {
		if ev := bs.next(t); ev.Type != "MODIFIED" || ev.App.ID != "globex/api/main" || kinds(ev.App) != "stale" {
			t.Errorf("got %s %s %q, want MODIFIED globex/api/main stale", ev.Type, ev.App.ID, kinds(ev.App))
		}
	}
}

func TestPaaSStreamRefusals(t *testing.T) {
	env, _ := newReleaseEnv(t)
	for _, tc := range []struct {
		path, token string
		code        int
		want        string
	}{
		{"/v1/paas/stream/apps?drift=green", env.token(t, userRoot, time.Hour), 400, "drift must be one of"},
		{"/v1/paas/stream/apps?colour=red", env.token(t, userRoot, time.Hour), 400, "colour"},
		{"/v1/paas/stream/apps", env.token(t, userAlice, time.Hour), 403, ""},
		{"/v1/paas/stream/apps", "", 401, ""},
	} {
		r := env.get(t, tc.path, tc.token)
		if r.code != tc.code || !strings.Contains(r.body, tc.want) || !strings.Contains(r.body, `"code":`) {
			t.Errorf("GET %s: %d %s, want %d with %q", tc.path, r.code, r.body, tc.code, tc.want)
		}
	}
}

// TestPaaSStreamFollowsTheCluster: the board stream also follows the
// cluster: a new App is an ADDED, a deleted one a DELETED.
func TestPaaSStreamFollowsTheCluster(t *testing.T) {
	env, _ := newReleaseEnv(t)
	root := openBoard(t, env, env.token(t, userRoot, time.Hour))
	for range 7 {
		root.next(t)
	}
	o, _ := projection.Decode(map[string]any{"apiVersion": "hanzo.ai/v1", "kind": "App",
		"metadata": map[string]any{"name": "new", "namespace": "hanzo", "uid": "u-new"},
		"spec":     map[string]any{"image": map[string]any{"repository": "ghcr.io/hanzoai/new", "tag": "v1.0.0"}}})
	if _, err := env.store.Apply(projection.Change{Op: projection.Upsert, Object: o}); err != nil {
		t.Fatal(err)
	}
	if ev := root.next(t); ev.Type != "ADDED" || ev.App.ID != "hanzoai/new/main" || ev.App.Source != "pending" {
		t.Fatalf("after a new App: got %s %s (source %q), want ADDED hanzoai/new/main pending", ev.Type, ev.App.ID, ev.App.Source)
	}
	if _, err := env.store.Apply(projection.Change{Op: projection.Delete, Object: o}); err != nil {
		t.Fatal(err)
	}
	if ev := root.next(t); ev.Type != "DELETED" || ev.App.ID != "hanzoai/new/main" {
		t.Fatalf("after the App's deletion: got %s %s, want DELETED hanzoai/new/main", ev.Type, ev.App.ID)
	}
}
