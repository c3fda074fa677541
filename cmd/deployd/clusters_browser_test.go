package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/hanzoai/deploy/auth/authtest"
	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/cmd/deployd/internal/deploydbin"
)

// sseRecorder runs in every document before the page's scripts: it wraps
// EventSource so that each applications event a stream of the page
// receives is also recorded in window.__sse (the app, its type and sync
// revision), and marks the document so a reload shows.
const sseRecorder = `(() => {
  const Native = window.EventSource;
  window.__sse = [];
  window.__doc = Math.random().toString(36).slice(2);
  window.EventSource = class extends Native {
    constructor(url, init) {
      super(url, init);
      this.addEventListener('message', (e) => {
        let r;
        try { r = JSON.parse(e.data).result; } catch { return; }
        const a = r && r.application;
        if (!a || !a.metadata) return;
        window.__sse.push({app: a.metadata.namespace + '/' + a.metadata.name, type: r.type,
          rev: ((a.status || {}).sync || {}).revision || ''});
      });
    }
  };
})()`

// shotsDir is a folder for a browser test's screenshots, named in the log
// when the test fails and removed when it passes.
func shotsDir(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("screenshots: %s", dir)
		} else {
			os.RemoveAll(dir)
		}
	})
	return dir
}

// pageRow is a row of the page's list as the test reads it.
type pageRow struct {
	Key, Cluster, Cell, Rev string
}

// twoClusterFleet starts two real clusters, home and staging, with the
// same App name (hanzo/iam) in both, an App of acme in each and one of
// globex in staging, and deployd serving both (env: more of its
// environment). The binary builds while the clusters start.
func twoClusterFleet(t *testing.T, env ...string) (home, staging *clustertest.Cluster, m *mockoidc.MockOIDC, d *twoClusterDeployd) {
	t.Helper()
	var bin string
	built := make(chan error, 1)
	go func() {
		var err error
		bin, err = deploydbin.Build()
		built <- err
	}()
	home, staging = clustertest.Start(t), clustertest.Start(t)
	applyApps(t, home, "hanzo/iam", "tenant-acme/web@acme")
	applyApps(t, staging, "hanzo/iam", "tenant-acme/api@acme", "tenant-globex/shop@globex")
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	if err := <-built; err != nil {
		t.Fatal(err)
	}
	d = startClusterDeployd(t, home, "clusters:\n- name: staging\n  kubeconfig: "+staging.Kubeconfig+"\n", m, bin, env...)
	return home, staging, m, d
}

// signInQueued signs u in from the dashboard at base: the page's "Log in",
// through the identity provider (which answers for u at once), and back.
func (b *browser) signInQueued(m *mockoidc.MockOIDC, base string, u authtest.User) {
	b.t.Helper()
	m.QueueUser(u)
	b.do("open the dashboard", chromedp.Navigate(base+"/"))
	b.waitFor("the sign-in button", `!!document.querySelector('#login')`, 20*time.Second)
	b.click("Log in", "#login")
	b.waitFor("the dashboard, signed in as "+u.Subject, fmt.Sprintf(`location.href.startsWith(%q) && !!document.querySelector('#logout')`, base), 20*time.Second)
}

// rows reads the list's rows once it holds n.
func (b *browser) rows(what string, n int) []pageRow {
	b.t.Helper()
	b.waitFor(what, fmt.Sprintf(`document.querySelectorAll('#app-rows tr').length === %d`, n), 20*time.Second)
	if !eval[bool](b, cellsAligned) {
		b.t.Errorf("%s: the rows' cells do not match the columns: %v", what, eval[[]string](b, `[...document.querySelectorAll('#apps tr')].map(tr => [...tr.childNodes].map(n => n.nodeName + ':' + n.textContent).join(' | '))`))
	}
	return eval[[]pageRow](b, `[...document.querySelectorAll('#app-rows tr')].map(tr => ({key: tr.dataset.key, cluster: tr.dataset.cluster,
		cell: tr.querySelector('.c-cluster') ? tr.querySelector('.c-cluster').textContent : '(none)',
		rev: tr.querySelector('.c-rev').textContent}))`)
}

// cellsAligned is a predicate: every row of the list has one cell per
// column of its head, and nothing else.
const cellsAligned = `[...document.querySelectorAll('#app-rows tr')].every(tr => tr.childNodes.length === tr.cells.length && tr.cells.length === document.querySelectorAll('#apps thead th').length)`

// rowClusters maps each row's key to its cluster, as the row's cell shows it.
func rowClusters(rows []pageRow) map[string]string {
	out := map[string]string{}
	for _, r := range rows {
		out[r.Key] = r.Cell
	}
	return out
}

// chooseCluster picks a value of the page's cluster select, as a user
// choosing an option does (the select changes, then fires change).
func (b *browser) chooseCluster(value string) {
	b.t.Helper()
	b.waitFor("the cluster filter", `!!document.querySelector('#f-cluster') && !document.querySelector('#f-cluster').closest('.field').hidden`, 10*time.Second)
	eval[bool](b, fmt.Sprintf(`(() => { const s = document.querySelector('#f-cluster'); s.value = %s; s.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`, js(value)))
}

// TestClustersInBrowser drives the dashboard in Chromium against deployd
// reading two real clusters (each its own kube-apiserver and etcd): the
// same App name in both is two rows, each with its cluster; the cluster
// filter keeps its choice in the URL and a load of that URL restores it;
// a change in the second cluster reaches its row through the page's
// EventSource while the filter is on; an App of the second cluster opens
// with its cluster; the drift board shows each row's cluster and filters
// by it; a member of acme sees acme's Apps of both clusters and
// nothing else; and a user whose Apps are all in one cluster sees the
// list as with one cluster, without the column or the filter.
func TestClustersInBrowser(t *testing.T) {
	requireChromium(t)
	_, staging, m, d := twoClusterFleet(t)
	shots := shotsDir(t, "deployd-clusters-")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	b := newBrowser(t, ctx)
	if _, err := chromedp.Run(b.ctx, func(ctx context.Context, tg *chromedp.Target) (page.AddScriptToEvaluateOnNewDocumentResult, error) {
		return cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: sseRecorder})
	}); err != nil {
		t.Fatalf("install the stream recorder: %v", err)
	}

	// A SuperAdmin: the five Apps of both clusters, iam twice.
	b.signInQueued(m, d.base, admin)
	all := rowClusters(b.rows("the five Apps", 5))
	want := map[string]string{"hanzo/iam": "in-cluster", "hanzo.staging/iam": "staging", "tenant-acme/web": "in-cluster",
		"tenant-acme.staging/api": "staging", "tenant-globex.staging/shop": "staging"}
	if !maps.Equal(all, want) {
		t.Errorf("the SuperAdmin's rows and their Cluster cells: %v, want %v", all, want)
	}
	if head := eval[[]string](b, `[...document.querySelectorAll('#apps thead th')].map(th => th.textContent)`); !slices.Equal(head[:3], []string{"Application", "Cluster", "Health"}) {
		t.Errorf("the table's columns: %v, want Application, Cluster, Health, …", head)
	}
	if opts := eval[[]string](b, `[...document.querySelectorAll('#f-cluster option')].map(o => o.value + '=' + o.textContent)`); !slices.Equal(opts,
		[]string{"=All clusters", "in-cluster=in-cluster (2)", "staging=staging (3)"}) {
		t.Errorf("the cluster filter's options: %v", opts)
	}
	if s := eval[string](b, `document.querySelector('#fleet-summary').textContent`); s != "5 applications in 2 clusters" {
		t.Errorf("the summary: %q", s)
	}
	if l := eval[string](b, `document.querySelector('label[for="f-cluster"]').textContent`); l != "Cluster" {
		t.Errorf("the cluster filter's label: %q", l)
	}
	b.screenshot(shots, "01-all.png")

	// The filter narrows the rows to staging's and is kept in the URL.
	b.chooseCluster("staging")
	rows := rowClusters(b.rows("staging's three Apps", 3))
	for k, c := range rows {
		if c != "staging" {
			t.Errorf("with the filter on staging, %s shows cluster %q", k, c)
		}
	}
	if q := eval[string](b, `location.search`); q != "?cluster=staging" {
		t.Errorf("the URL's query with the filter on: %q, want ?cluster=staging", q)
	}
	if s := eval[string](b, `document.querySelector('#fleet-summary').textContent`); s != "3 of 5 applications match" {
		t.Errorf("the summary with the filter on: %q", s)
	}

	// Loading that URL restores the filter.
	before := eval[string](b, `window.__doc`)
	b.do("load the filtered URL", chromedp.Navigate(d.base+"/?cluster=staging"))
	b.waitFor("the page loaded afresh", fmt.Sprintf(`window.__doc !== %s && !!document.querySelector('#f-cluster')`, js(before)), 20*time.Second)
	rows = rowClusters(b.rows("staging's three Apps, from the URL", 3))
	if _, ok := rows["hanzo.staging/iam"]; !ok || rows["hanzo/iam"] != "" {
		t.Errorf("the rows loaded with ?cluster=staging: %v", rows)
	}
	if v := eval[string](b, `document.querySelector('#f-cluster').value`); v != "staging" {
		t.Errorf("the cluster select after loading ?cluster=staging: %q", v)
	}
	doc := eval[string](b, `window.__doc`)
	b.screenshot(shots, "02-staging.png")

	// A change in staging reaches its row live, through the EventSource,
	// with the filter on; the page is not reloaded.
	setTag(t, staging, "tenant-globex", "shop", "v2.0.0")
	b.waitFor("shop's new tag in its row", `document.querySelector('#app-rows tr[data-key="tenant-globex.staging/shop"] .c-rev')?.textContent === 'v2.0.0'`, 20*time.Second)
	if !eval[bool](b, `window.__sse.some(e => e.app === 'tenant-globex.staging/shop' && e.rev === 'v2.0.0')`) {
		t.Errorf("shop's v2.0.0 did not come through the page's EventSource: %v", eval[any](b, `window.__sse`))
	}
	if now := eval[string](b, `window.__doc`); now != doc {
		t.Error("the page was reloaded to show the change")
	}
	if n := eval[int](b, `document.querySelectorAll('#app-rows tr').length`); n != 3 {
		t.Errorf("after the live change the filtered list holds %d rows, want 3", n)
	}

	// An App of staging opens with its cluster.
	b.click("staging's iam", `#app-rows tr[data-key="hanzo.staging/iam"] a.app-link`)
	b.waitFor("staging's iam with its cluster", `document.querySelector('#app-cluster')?.textContent === 'Cluster staging'`, 20*time.Second)
	if meta := eval[string](b, `document.querySelector('#app-meta').textContent`); !strings.Contains(meta, "Namespace hanzo") {
		t.Errorf("staging's iam's details: %q, want its namespace hanzo", meta)
	}
	b.screenshot(shots, "03-detail.png")
	// Back to the list: the filter is still on.
	b.click("back to the list", ".crumb-back")
	b.rows("staging's three Apps, back from the App", 3)
	if v := eval[string](b, `document.querySelector('#f-cluster').value`); v != "staging" {
		t.Errorf("the cluster select back from the App: %q", v)
	}

	// The drift board: a Cluster column, each row its App's cluster, and
	// a cluster filter kept in the URL.
	b.click("the drift board", "#board-link")
	b.waitFor("the board's five rows", `document.querySelectorAll('#board-rows tr').length === 5`, 20*time.Second)
	if head := eval[[]string](b, `[...document.querySelectorAll('#board thead th')].map(th => th.textContent)`); len(head) < 2 || head[1] != "Cluster" {
		t.Errorf("the board's columns: %v, want Application, Cluster, …", head)
	}
	board := eval[map[string]string](b, `Object.fromEntries([...document.querySelectorAll('#board-rows tr')].map(tr => [tr.dataset.namespace + '/' + tr.querySelector('.app-name').textContent, tr.querySelector('.c-cluster')?.textContent || '']))`)
	if !maps.Equal(board, want) {
		t.Errorf("the board's rows and their clusters: %v, want %v", board, want)
	}
	eval[bool](b, `(s => { s.value = 'staging'; return s.dispatchEvent(new Event('change')); })(document.querySelector('#board-cluster'))`)
	b.waitFor("staging's three board rows", `document.querySelectorAll('#board-rows tr').length === 3 && [...document.querySelectorAll('#board-rows tr')].every(tr => tr.dataset.cluster === 'staging') && new URLSearchParams(location.search).get('cluster') === 'staging'`, 20*time.Second)
	b.screenshot(shots, "03b-board.png")
	b.click("Log out", "#logout")
	b.waitFor("signed out", `!!document.querySelector('#login')`, 20*time.Second)

	// A member of acme: acme's App in each cluster, no other.
	b.signInQueued(m, d.base, acmeMember)
	rows = rowClusters(b.rows("acme's two Apps", 2))
	if !maps.Equal(rows, map[string]string{"tenant-acme/web": "in-cluster", "tenant-acme.staging/api": "staging"}) {
		t.Errorf("acme's rows: %v", rows)
	}
	b.chooseCluster("staging")
	rows = rowClusters(b.rows("acme's App in staging", 1))
	if rows["tenant-acme.staging/api"] != "staging" {
		t.Errorf("acme's rows in staging: %v", rows)
	}
	setTag(t, staging, "tenant-acme", "api", "v2.1.0")
	b.waitFor("acme's api's new tag in its row", `document.querySelector('#app-rows tr[data-key="tenant-acme.staging/api"] .c-rev')?.textContent === 'v2.1.0'`, 20*time.Second)
	if !eval[bool](b, `window.__sse.some(e => e.app === 'tenant-acme.staging/api' && e.rev === 'v2.1.0')`) {
		t.Error("acme's api's v2.1.0 did not come through the page's EventSource")
	}
	// A change to another org's App in the same cluster never reaches it.
	setTag(t, staging, "tenant-globex", "shop", "v2.2.0")
	setTag(t, staging, "tenant-acme", "api", "v2.2.0")
	b.waitFor("acme's api's next tag", `document.querySelector('#app-rows tr[data-key="tenant-acme.staging/api"] .c-rev')?.textContent === 'v2.2.0'`, 20*time.Second)
	if leaked := eval[[]string](b, `window.__sse.filter(e => !e.app.startsWith('tenant-acme')).map(e => e.app)`); len(leaked) > 0 {
		t.Errorf("acme's page received events of %v", leaked)
	}
	b.screenshot(shots, "04-acme.png")
	b.click("Log out", "#logout")
	b.waitFor("signed out", `!!document.querySelector('#login')`, 20*time.Second)

	// An admin of globex, whose Apps are all in staging: the list as with
	// one cluster, without the column or the filter.
	b.signInQueued(m, d.base, globexAdmin)
	rows = rowClusters(b.rows("globex's App", 1))
	if rows["tenant-globex.staging/shop"] != "(none)" {
		t.Errorf("globex's rows: %v, want shop without a Cluster cell", rows)
	}
	if eval[bool](b, `!!document.querySelector('#col-cluster') || !document.querySelector('#f-cluster').closest('.field').hidden`) {
		t.Error("with every App in one cluster, the Cluster column or filter shows")
	}
	if s := eval[string](b, `document.querySelector('#fleet-summary').textContent`); s != "1 application" {
		t.Errorf("globex's summary: %q", s)
	}
	b.screenshot(shots, "05-globex.png")
	b.checkConsole()
}
