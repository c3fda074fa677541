package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/cluster/release"
	"github.com/hanzoai/deploy/projection"
)

// applyReleaseApp creates the App "api" in namespace hanzo (main)
// declaring tag of the image repository.
func applyReleaseApp(t *testing.T, c *clustertest.Cluster, repository, tag string) {
	t.Helper()
	c.Apply(t,
		clustertest.Object(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: hanzo}\n"),
		clustertest.Object(t, fmt.Sprintf(`
apiVersion: hanzo.ai/v1
kind: App
metadata: {name: api, namespace: hanzo}
spec:
  image: {repository: %q, tag: %s}
  replicas: 1
  role: service
`, repository, tag)))
}

// boardRow reads one row of the board, failing on anything but a 200.
func boardRow(t *testing.T, env *planeEnv, c *http.Client, token string) projection.AppView {
	t.Helper()
	r := env.send(t, c, http.MethodGet, "/v1/paas/apps/api?env=main", token, "")
	if r.code != http.StatusOK {
		t.Fatalf("board row: %d %s", r.code, r.body)
	}
	var v projection.AppView
	if err := json.Unmarshal([]byte(r.body), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func waitRow(t *testing.T, env *planeEnv, token, what string, cond func(projection.AppView) bool) projection.AppView {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v := boardRow(t, env, nil, token)
		if cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; the row is %+v", what, v)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDriftBoardFromARealRegistry: distribution's registry on loopback
// holds v1.0.0, v1.2.0, v1.10.0, latest and v2.0.0-rc.1; the board's
// latestTag is v1.10.0 and the App declaring v1.2.0 is stale. Pushing
// v1.11.0 moves the row on the next refresh, and the board stream sends
// it as a MODIFIED; the page's board shows the flag's message and follows.
func TestDriftBoardFromARealRegistry(t *testing.T) {
	reg := clustertest.StartRegistry(t)
	repo := reg.Host + "/acme/api"
	for _, tag := range []string{"v1.0.0", "v1.2.0", "v1.10.0", "latest", "v2.0.0-rc.1"} {
		clustertest.PushImage(t, repo, tag)
	}
	c := clustertest.Start(t)
	applyReleaseApp(t, c, repo, "v1.2.0")
	env := startPlaneWith(t, c.Config, func(pc *planeConfig) {
		pc.Releases = release.Config{Registry: true, Refresh: 500 * time.Millisecond}
	})
	env.waitReady(t, 30*time.Second)
	root := env.token(t, admin, time.Hour)

	v := waitRow(t, env, root, "the first refresh", func(v projection.AppView) bool { return v.Source == "ok" })
	if v.LatestTag != "v1.10.0" || v.Drift.Severity != projection.SeverityYellow || len(v.Drift.Flags) != 1 ||
		v.Drift.Flags[0].Kind != projection.DriftStale || v.Drift.Flags[0].Message != "a newer release v1.10.0 exists; v1.2.0 is declared" {
		t.Fatalf("row: latest %q drift %+v, want v1.10.0 and stale only", v.LatestTag, v.Drift)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, env.URL+"/v1/paas/stream/apps", nil)
	req.Header.Set("Authorization", "Bearer "+root)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("board stream: %v %v", err, resp)
	}
	defer resp.Body.Close()
	events := make(chan string, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- data
			}
		}
	}()
	next := func() (string, projection.AppView) {
		t.Helper()
		select {
		case data, ok := <-events:
			if !ok {
				t.Fatal("the board stream ended")
			}
			var ev struct {
				Result struct {
					Type string
					App  projection.AppView
				}
			}
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("event %s: %v", data, err)
			}
			return ev.Result.Type, ev.Result.App
		case <-time.After(30 * time.Second):
			t.Fatal("no board event within 30s")
		}
		return "", projection.AppView{}
	}
	if typ, v := next(); typ != "ADDED" || v.LatestTag != "v1.10.0" {
		t.Fatalf("first event: %s latest %q, want ADDED v1.10.0", typ, v.LatestTag)
	}

	// The page's board shows the row, its flag and message.
	bctx, bcancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer bcancel()
	b := newBrowser(t, bctx)
	env.m.QueueUser(admin)
	b.do("sign in to the board", chromedp.Navigate(env.URL+"/v1/deploy/login?returnTo="+url.QueryEscape("/?board=1")))
	row := `document.querySelector('#board-rows tr[data-id="acme/api/main"]')`
	b.waitFor("the board's row", fmt.Sprintf(`(r => r && r.querySelector('.c-latest').textContent === 'v1.10.0' && r.dataset.severity === 'yellow')(%s)`, row), 30*time.Second)
	if msg := eval[string](b, row+`.querySelector('.flag[data-kind="stale"] .flag-msg').textContent`); msg != "a newer release v1.10.0 exists; v1.2.0 is declared" {
		t.Errorf("the page's stale message: %q", msg)
	}
	if src := eval[string](b, row+`.querySelector('.c-source').textContent`); src != "answered" {
		t.Errorf("the page's release source cell: %q, want answered", src)
	}
	b.waitFor("the board's live indicator", `document.querySelector('#conn').dataset.state === 'live'`, 10*time.Second)

	clustertest.PushImage(t, repo, "v1.11.0")
	typ, v := next()
	if typ != "MODIFIED" || v.ID != "acme/api/main" || v.LatestTag != "v1.11.0" ||
		len(v.Drift.Flags) != 1 || v.Drift.Flags[0].Message != "a newer release v1.11.0 exists; v1.2.0 is declared" {
		t.Fatalf("after the push: %s %+v, want MODIFIED acme/api/main at v1.11.0", typ, v)
	}
	b.waitFor("the board's row after the push", fmt.Sprintf(`(r => r && r.querySelector('.c-latest').textContent === 'v1.11.0' && r.querySelector('.flag-msg').textContent === 'a newer release v1.11.0 exists; v1.2.0 is declared')(%s)`, row), 30*time.Second)
	b.checkConsole()
	if st := env.p.releases.Stats(); st.Refreshes < 2 || st.Failures != 0 || st.Generation < 2 {
		t.Errorf("release stats: %+v, want at least two refreshes and two changes, no failure", st)
	}
}

// TestDriftBoardWhileTheRegistryHangs: a board request completes while
// the registry holds the refresher's request (it never waits on it), the
// row says pending; once the fetch times out it says "error (registry
// timed out)" with no release flag, and no answer is a 5xx.
func TestDriftBoardWhileTheRegistryHangs(t *testing.T) {
	var inside atomic.Int64
	entered := make(chan struct{}, 1)
	unblock := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside.Add(1)
		defer inside.Add(-1)
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-unblock:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(unblock); hang.Close() })
	repo := strings.TrimPrefix(hang.URL, "http://") + "/acme/api"

	c := clustertest.Start(t)
	applyReleaseApp(t, c, repo, "v1.2.0")
	const fetchTimeout = 6 * time.Second
	env := startPlaneWith(t, c.Config, func(pc *planeConfig) {
		pc.Releases = release.Config{Registry: true, Refresh: time.Hour, Timeout: fetchTimeout}
	})
	env.waitReady(t, 30*time.Second)
	root := env.token(t, admin, time.Hour)

	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the refresher never reached the registry")
	}
	// The registry holds the fetch for up to fetchTimeout. A request with
	// a third of that as its deadline completes, as the fetch is still held.
	quick := &http.Client{Timeout: fetchTimeout / 3}
	for range 5 {
		v := boardRow(t, env, quick, root)
		if v.Source != "pending" || len(v.Drift.Flags) != 0 {
			t.Fatalf("while the registry hangs: source %q flags %+v, want pending and no flag", v.Source, v.Drift.Flags)
		}
		if r := env.send(t, quick, http.MethodGet, "/v1/paas/apps", root, ""); r.code != http.StatusOK {
			t.Fatalf("board while the registry hangs: %d %s", r.code, r.body)
		}
	}
	if inside.Load() == 0 {
		t.Fatal("the registry let the fetch go before the requests were measured: the test proved nothing")
	}

	v := waitRow(t, env, root, "the fetch to time out", func(v projection.AppView) bool { return v.Source != "pending" })
	if v.Source != "error (registry timed out)" || len(v.Drift.Flags) != 0 || v.Drift.Severity != projection.SeverityOK {
		t.Fatalf("after the timeout: source %q drift %+v, want error (registry timed out) and no flag", v.Source, v.Drift)
	}
	if st := env.p.releases.Stats(); st.Failures != 1 {
		t.Errorf("failures: got %d, want 1", st.Failures)
	}
}
