package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hanzoai/deploy/auth/authtest"
	"github.com/hanzoai/deploy/fleet"
	"github.com/hanzoai/deploy/projection"
)

// The demo users (demo/idp) by subject.
const (
	demoSuperAdmin = "demo-superadmin"  // ada
	demoAcmeMember = "demo-acme-member" // ari
)

const (
	webSeed = 1
	webApps = 30
)

// webDemo is `deployd demo` with its simulator stepped by the test, served
// to the browser through a proxy the test can cut.
type webDemo struct {
	d     *demoServer
	proxy *cutProxy
	base  string // the URL the browser uses (the proxy's)
	logs  *authtest.LogBuffer
}

func startWebDemo(t *testing.T, options ...func(*demoOptions)) *webDemo {
	t.Helper()
	requireChromium(t)
	proxy := listenCutProxy(t)
	logs := &authtest.LogBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	o := demoOptions{
		Listen: "127.0.0.1:0", Seed: webSeed, Apps: webApps, Pace: 0,
		Log:       slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		PublicURL: proxy.URL(),
	}
	for _, opt := range options {
		opt(&o)
	}
	d, err := startDemo(ctx, o)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("demo server: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("the demo server did not stop within 30s")
		}
		d.close()
		if t.Failed() {
			t.Logf("server log (last lines):\n%s", lastLines(logs.String(), 40))
		}
	})
	proxy.forward(d.ln.Addr().String())
	w := &webDemo{d: d, proxy: proxy, base: d.URL, logs: logs}
	w.waitHealthy(t)
	return w
}

// waitHealthy waits until the server answers its health route with 200.
func (w *webDemo) waitHealthy(t *testing.T) {
	t.Helper()
	waitHealthy(t, w.base, 30*time.Second)
}

// declare patches an App's spec.image.tag, as a release pipeline would.
func (w *webDemo) declare(t *testing.T, namespace, name, tag string) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"image":{"tag":%q}}}`, tag)
	_, err := w.d.env.Cluster.Dynamic().Resource(projection.KindApp.GVR()).Namespace(namespace).
		Patch(t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("declare %s/%s %s: %v", namespace, name, tag, err)
	}
}

// stepUntil steps the simulator until the page shows what predicate
// describes, polling the page after each step; it answers the steps taken.
func (w *webDemo) stepUntil(t *testing.T, b *browser, what, predicate string, maxSteps int) int {
	t.Helper()
	for i := 1; i <= maxSteps; i++ {
		if err := w.d.env.Sim.Step(t.Context()); err != nil {
			t.Fatalf("simulator step %d: %v", i, err)
		}
		if err := b.poll(predicate, 750*time.Millisecond); err == nil {
			return i
		}
	}
	t.Fatalf("%s: not shown after %d simulator steps (%s)\n%s", what, maxSteps, predicate, b.describe())
	return 0
}

// acmeRows are the rows a member of acme may see: the fleet's entries in
// tenant-acme labelled with the org (Apps and the static site).
func acmeRows() []string {
	var keys []string
	for _, a := range fleet.Generate(webSeed, webApps) {
		if (a.Kind == fleet.KindApp || a.Kind == fleet.KindSite) && a.Namespace == fleet.NamespaceAcme && a.Org == "acme" {
			keys = append(keys, a.Namespace+"/"+a.Name)
		}
	}
	slices.Sort(keys)
	return keys
}

// steadyAcmeApp is an acme App that rolls out cleanly: no fault, replicas.
func steadyAcmeApp(t *testing.T) fleet.App {
	t.Helper()
	for _, a := range fleet.Generate(webSeed, webApps) {
		if a.Kind == fleet.KindApp && a.Namespace == fleet.NamespaceAcme && a.Fault == fleet.FaultNone && a.Replicas > 0 && len(a.Releases) >= 2 {
			return a
		}
	}
	t.Fatal("the demo fleet has no steady acme App with a release history")
	return fleet.App{}
}

// nextPatchTag is v1.2.4 for v1.2.3.
func nextPatchTag(t *testing.T, tag string) string {
	t.Helper()
	i := strings.LastIndex(tag, ".")
	n, err := strconv.Atoi(tag[i+1:])
	if i < 0 || err != nil {
		t.Fatalf("tag %q is not vX.Y.Z", tag)
	}
	return tag[:i+1] + strconv.Itoa(n+1)
}

func rowSel(key string) string { return fmt.Sprintf(`#app-rows tr[data-key=%q]`, key) }

func js(s string) string { return strconv.Quote(s) }

// TestWebDashboard drives the dashboard in Chromium against `deployd demo`:
// a member of acme sees acme's apps only, live, with no write button; a
// change in the cluster reaches its row without a reload; an app's tree,
// manifest and logs render; a SuperAdmin rolls an app back from its
// history and the page follows the rollout.
func TestWebDashboard(t *testing.T) {
	w := startWebDemo(t)
	shots, err := os.MkdirTemp("", "deployd-web-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	b := newBrowser(t, ctx)

	// A member of acme: only acme's rows.
	b.signIn(w.base, demoAcmeMember)
	want := acmeRows()
	b.waitFor("the acme rows", fmt.Sprintf(`document.querySelectorAll('#app-rows tr').length === %d`, len(want)), 20*time.Second)
	got := eval[[]string](b, `[...document.querySelectorAll('#app-rows tr')].map(tr => tr.dataset.key)`)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("rows shown to ari (-want +got):\n%s", diff)
	}
	if orgs := eval[[]string](b, `[...new Set([...document.querySelectorAll('#app-rows tr')].map(tr => tr.dataset.org))]`); !slices.Equal(orgs, []string{"acme"}) {
		t.Fatalf("orgs of the rows shown to ari: %v, want [acme]", orgs)
	}
	if role := eval[string](b, `document.querySelector('#user-role').textContent`); role != "Member · acme" {
		t.Errorf("role shown: %q, want %q", role, "Member · acme")
	}
	if live := eval[string](b, `document.querySelector('#conn').getAttribute('aria-live')`); live != "polite" {
		t.Errorf("the connection status has aria-live=%q, want polite", live)
	}
	b.waitFor("the live indicator", `document.querySelector('#conn').dataset.state === 'live'`, 10*time.Second)

	// A change in the cluster reaches the row, in place, without a reload.
	app := steadyAcmeApp(t)
	key := app.Namespace + "/" + app.Name
	released := nextPatchTag(t, app.Tag)
	eval[bool](b, `(window.__kept = 'no reload', document.querySelectorAll('#app-rows tr').forEach(tr => tr.__same = true), true)`)
	b.waitFor("the steady app row at rest", fmt.Sprintf(`(r => r && r.dataset.sync === 'Synced' && r.dataset.health === 'Healthy')(document.querySelector(%s))`, js(rowSel(key))), 10*time.Second)
	w.declare(t, app.Namespace, app.Name, released)
	b.waitFor("the row turning OutOfSync on the new declared tag",
		fmt.Sprintf(`(r => r && r.dataset.sync === 'OutOfSync' && r.querySelector('.c-rev').textContent === %s)(document.querySelector(%s))`, js(released), js(rowSel(key))), 20*time.Second)
	w.stepUntil(t, b, "the rollout of "+released+" in the list",
		fmt.Sprintf(`(r => r && r.dataset.sync === 'Synced' && r.dataset.health === 'Healthy')(document.querySelector(%s))`, js(rowSel(key))), 30)
	if !eval[bool](b, `window.__kept === 'no reload'`) {
		t.Fatal("the page reloaded: the marker set before the change is gone")
	}
	if n := eval[int](b, `[...document.querySelectorAll('#app-rows tr')].filter(tr => !tr.__same).length`); n != 0 {
		t.Errorf("%d rows were rebuilt; a change should update its row in place", n)
	}
	// The counts per status are those of the rows.
	if !eval[bool](b, `[...document.querySelectorAll('.chip')].every(c => {
		const attr = c.dataset.facet === 'health' ? 'health' : 'sync';
		const rows = [...document.querySelectorAll('#app-rows tr')].filter(tr => tr.dataset[attr] === c.dataset.value).length;
		return Number(c.querySelector('.chip-count').textContent) === rows;
	})`) {
		t.Errorf("the health and sync counts do not match the rows: %v", eval[[]string](b, `[...document.querySelectorAll('.chip')].map(c => c.textContent)`))
	}
	t.Logf("screenshot of the list: %s", b.screenshot(shots, "list-ari.png"))

	// Open the app from its row: its tree renders, and no write button
	// exists for a member.
	b.click("open "+key, rowSel(key)+" a.app-link")
	b.waitFor("the app page", fmt.Sprintf(`location.search === %s && !!document.querySelector('#app-title')`, js("?app="+key)), 10*time.Second)
	b.waitFor("the resource tree", `['App','Deployment','ReplicaSet','Pod','Service'].every(k => document.querySelector('#tree .node[data-kind="' + k + '"]'))`, 20*time.Second)
	nodes := eval[[]string](b, `[...document.querySelectorAll('#tree .node')].map(n => n.dataset.kind + '/' + n.dataset.name)`)
	for _, n := range []string{"App/" + app.Name, "Deployment/" + app.Name, "Service/" + app.Name} {
		if !slices.Contains(nodes, n) {
			t.Errorf("tree nodes %v lack %s", nodes, n)
		}
	}
	// Parent and child: the Deployment's list holds the ReplicaSets, theirs the Pods.
	if !eval[bool](b, fmt.Sprintf(`(d => !!d && !!d.closest('li').querySelector(':scope > ul > li > .node[data-kind="ReplicaSet"]') && !!document.querySelector('.node[data-kind="ReplicaSet"]').closest('li').querySelector(':scope > ul > li > .node[data-kind="Pod"]'))(document.querySelector('#tree .node[data-kind="Deployment"][data-name=%q]'))`, app.Name)) {
		t.Errorf("the tree does not lay the ReplicaSets out under the Deployment and the Pods under a ReplicaSet")
	}
	if !eval[bool](b, `[...document.querySelectorAll('#tree .node')].every(n => !n.dataset.health || n.querySelector('.badge-text').textContent === n.dataset.health)`) {
		t.Error("a node's health is not told in text")
	}
	if !eval[bool](b, `window.__kept === 'no reload'`) {
		t.Fatal("opening an app reloaded the page")
	}
	b.waitFor("the write check", `!!document.querySelector('#app-actions[data-can-write]')`, 10*time.Second)
	if n := eval[int](b, `document.querySelectorAll('[data-write]').length + [...document.querySelectorAll('button')].filter(x => /^(Sync|Roll back|Rolling restart)$/.test(x.textContent.trim())).length`); n != 0 {
		t.Fatalf("a member of acme sees %d write buttons, want none", n)
	}
	b.click("select the Deployment", fmt.Sprintf(`#tree .node[data-kind="Deployment"][data-name=%q]`, app.Name))
	b.waitFor("the live manifest", `(m => !!m && m.textContent.includes('kind: Deployment'))(document.querySelector('#live-manifest'))`, 10*time.Second)
	b.click("show the diff", "#tab-diff")
	b.waitFor("the diff", `!!document.querySelector('#diff .note')`, 10*time.Second)
	b.waitFor("the log tail", `document.querySelector('#log').textContent.includes('[simulated]')`, 10*time.Second)
	// Following the log streams its lines; the demo's log ends, and says so.
	b.click("Follow", "#log-follow")
	b.waitFor("the followed log", `document.querySelector('#log').textContent.includes('[simulated]') && document.querySelector('#log-meta').textContent.includes('ended') && document.querySelector('#log-follow').getAttribute('aria-pressed') === 'false'`, 10*time.Second)
	t.Logf("screenshot of an app (member): %s", b.screenshot(shots, "app-ari.png"))

	// A SuperAdmin rolls the app back to the tag it ran before.
	b.click("log out", "#logout")
	b.waitFor("the signed-out page", `!!document.querySelector('#login') && !document.querySelector('#logout')`, 10*time.Second)
	b.signIn(w.base, demoSuperAdmin)
	b.do("open "+key, chromedp.Navigate(w.base+"/?app="+key))
	b.waitFor("the write buttons", `document.querySelector('#app-actions')?.dataset.canWrite === 'yes' && !!document.querySelector('[data-write="sync"]')`, 20*time.Second)
	// The fleet-wide list, as the browser takes it (gzip, spliced from
	// per-namespace runs), decodes to every namespace's rows.
	listed := eval[[]string](b, `fetch('/v1/deploy/applications').then(async r => [r.status + ' ' + (r.headers.get('content-encoding') || 'identity'),
		...(await r.json()).items.map(i => i.metadata.namespace + '/' + i.metadata.name)])`)
	if listed[0] != "200 gzip" {
		t.Fatalf("the fleet-wide list reached the browser as %q, want 200 gzip", listed[0])
	}
	for _, k := range append(acmeRows(), key) {
		if !slices.Contains(listed[1:], k) {
			t.Fatalf("the fleet-wide list decoded by the browser lacks %s (%d rows)", k, len(listed)-1)
		}
	}
	rollback := fmt.Sprintf(`#history tr[data-revision=%q] button[data-write="rollback"]`, app.Tag)
	b.waitFor("the rollback button of "+app.Tag, fmt.Sprintf(`!!document.querySelector(%s)`, js(rollback)), 10*time.Second)
	b.waitFor("the running tag", fmt.Sprintf(`document.querySelector('#app-running')?.textContent === %s`, js(released)), 10*time.Second)
	// Record every health/sync the page shows from now on.
	eval[bool](b, `(() => {
		window.__seen = [];
		const rec = () => {
			const h = document.querySelector('#app-health'), s = document.querySelector('#app-sync');
			const cur = (h ? h.dataset.health : '?') + '/' + (s ? s.dataset.sync : '?');
			if (window.__seen[window.__seen.length - 1] !== cur) window.__seen.push(cur);
		};
		new MutationObserver(rec).observe(document.querySelector('#app-status'), {subtree: true, childList: true, attributes: true});
		rec();
		return true;
	})()`)
	b.click("click Roll back", rollback)
	b.waitFor("the confirmation naming the tag", fmt.Sprintf(`document.querySelector('#confirm-dialog').open && document.querySelector('#confirm-title').textContent.includes(%s) && document.querySelector('#confirm-ok').textContent.includes(%s)`, js(app.Tag), js(app.Tag)), 10*time.Second)
	t.Logf("screenshot of the rollback confirmation: %s", b.viewportShot(shots, "rollback-confirm.png"))
	b.click("confirm", "#confirm-ok")
	b.waitFor("the rollback declared", fmt.Sprintf(`document.querySelector('#app-declared')?.textContent === %s && document.querySelector('#app-sync')?.dataset.sync === 'OutOfSync'`, js(app.Tag)), 20*time.Second)
	steps := w.stepUntil(t, b, "the rollout back to "+app.Tag,
		fmt.Sprintf(`document.querySelector('#app-sync')?.dataset.sync === 'Synced' && document.querySelector('#app-health')?.dataset.health === 'Healthy' && document.querySelector('#app-running')?.textContent === %s`, js(app.Tag)), 30)
	seen := eval[[]string](b, `window.__seen`)
	t.Logf("the page followed the rollback in %d steps: %s", steps, strings.Join(seen, " → "))
	if !slices.ContainsFunc(seen, func(s string) bool { return strings.HasSuffix(s, "/OutOfSync") }) ||
		!slices.ContainsFunc(seen, func(s string) bool { return strings.HasPrefix(s, "Progressing/") }) ||
		seen[len(seen)-1] != "Healthy/Synced" {
		t.Errorf("health/sync shown during the rollback: %v; want OutOfSync, then Progressing, ending Healthy/Synced", seen)
	}
	b.waitFor("the rollback on top of the history", fmt.Sprintf(`document.querySelector('#history tbody tr')?.dataset.revision === %s`, js(app.Tag)), 10*time.Second)
	t.Logf("screenshot of an app (SuperAdmin): %s", b.screenshot(shots, "app-ada.png"))

	// Sync, and a rolling restart after its confirmation.
	b.click("Sync", `[data-write="sync"]`)
	b.waitFor("the sync answer", `[...document.querySelectorAll('.toast')].some(t => t.textContent.includes('Sync of'))`, 10*time.Second)
	b.click("Rolling restart", `[data-write="restart"]`)
	b.waitFor("the restart confirmation", `document.querySelector('#confirm-dialog').open && document.querySelector('#confirm-title').textContent.startsWith('Restart')`, 10*time.Second)
	b.click("confirm", "#confirm-ok")
	b.waitFor("the restart answer", `[...document.querySelectorAll('.toast')].some(t => t.textContent.includes('Rolling restart of'))`, 10*time.Second)
	if errs := eval[[]string](b, `[...document.querySelectorAll('.toast-error')].map(t => t.textContent)`); len(errs) > 0 {
		t.Errorf("write errors shown: %v", errs)
	}
	b.checkConsole()
}

// TestWebReconnect: when the connection drops, the page says it is
// reconnecting, then resumes by itself and shows what changed meanwhile,
// without a reload.
func TestWebReconnect(t *testing.T) {
	w := startWebDemo(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	b := newBrowser(t, ctx)
	b.signIn(w.base, demoAcmeMember)
	want := acmeRows()
	b.waitFor("the acme rows", fmt.Sprintf(`document.querySelectorAll('#app-rows tr').length === %d`, len(want)), 20*time.Second)
	b.waitFor("the live indicator", `document.querySelector('#conn').dataset.state === 'live'`, 10*time.Second)
	eval[bool](b, `(window.__kept = 'no reload', true)`)

	w.proxy.Cut()
	b.waitFor("the reconnecting indicator", `document.querySelector('#conn').dataset.state === 'reconnecting' && document.querySelector('#conn').textContent.includes('Reconnecting')`, 20*time.Second)

	// A change made while the page is cut off.
	app := steadyAcmeApp(t)
	key := app.Namespace + "/" + app.Name
	released := nextPatchTag(t, app.Tag)
	w.declare(t, app.Namespace, app.Name, released)

	w.proxy.Restore()
	b.waitFor("the stream back", `document.querySelector('#conn').dataset.state === 'live' && document.querySelector('#conn').textContent === 'Live'`, 30*time.Second)
	b.waitFor("the change made during the cut",
		fmt.Sprintf(`(r => r && r.dataset.sync === 'OutOfSync' && r.querySelector('.c-rev').textContent === %s)(document.querySelector(%s))`, js(released), js(rowSel(key))), 20*time.Second)
	if !eval[bool](b, `window.__kept === 'no reload'`) {
		t.Fatal("the page reloaded to recover")
	}
	if n := eval[int](b, `document.querySelectorAll('#app-rows tr').length`); n != len(want) {
		t.Errorf("%d rows after the reconnect, want %d", n, len(want))
	}

	// Filters live in the query string and come back with the page.
	b.do("type a name", chromedp.SendKeys(chromedp.CSS("#f-q"), app.Name))
	b.click("the OutOfSync count", `.chip[data-facet="sync"][data-value="OutOfSync"]`)
	filtered := fmt.Sprintf(`location.search.includes('q=%s') && location.search.includes('sync=OutOfSync') && [...document.querySelectorAll('#app-rows tr')].map(tr => tr.dataset.key).join() === %s`, app.Name, js(key))
	b.waitFor("the filtered list", filtered, 10*time.Second)
	b.do("reload", chromedp.Reload())
	b.waitFor("the filters restored", filtered+fmt.Sprintf(` && document.querySelector('#f-q').value === %s && document.querySelector('.chip[data-value="OutOfSync"]').getAttribute('aria-pressed') === 'true'`, js(app.Name)), 20*time.Second)
	b.checkConsole()
}

// lastLines is the end of a log.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
