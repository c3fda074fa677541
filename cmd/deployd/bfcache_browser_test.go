package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// frameSampler runs in every document the tab loads, before the page's own
// scripts: from each pageshow on (a fresh load or a restore from the
// back/forward cache) it samples, on every animation frame for two
// seconds, whether the page shows a signed-in user's name or app rows, and
// keeps the samples in sessionStorage (which outlives the documents).
const frameSampler = `(() => {
  const sample = (why) => {
    let store;
    try { store = window.sessionStorage; } catch { return; } // about:blank
    if (store.getItem('__sampling') !== '1') return;
    const name = document.getElementById('username');
    const a = JSON.parse(store.getItem('__frames') || '[]');
    a.push({why, href: location.href, persisted: !!window.__persisted,
      name: name ? name.textContent : '', rows: document.querySelectorAll('#app-rows tr').length});
    store.setItem('__frames', JSON.stringify(a));
  };
  window.__sample = sample;
  window.addEventListener('pageshow', (ev) => {
    window.__persisted = ev.persisted;
    sample('pageshow');
    const until = performance.now() + 2000;
    const frame = () => { sample('frame'); if (performance.now() < until) requestAnimationFrame(frame); };
    requestAnimationFrame(frame);
  }, true);
})()`

// evalRestored evaluates an expression in a page that may have come back
// from the back/forward cache: an evaluation sent while it does may never
// be answered, so each try has its own short deadline.
func evalRestored[T any](b *browser, expr string) T {
	b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
		v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
		cancel()
		if err == nil {
			return v
		}
		if time.Now().After(deadline) || b.ctx.Err() != nil {
			b.t.Fatalf("evaluate %s: %v", expr, err)
		}
	}
}

// waitRestored waits until a predicate holds, in a page that may have come
// back from the back/forward cache.
func waitRestored(b *browser, what, predicate string) {
	b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !evalRestored[bool](b, predicate) {
		if time.Now().After(deadline) {
			b.t.Fatalf("waiting for %s (%s): timed out", what, predicate)
		}
	}
}

type frameSample struct {
	Why, Href, Name string
	Persisted       bool
	Rows            int
}

// historyIndex is the tab's current entry in its session history and the
// number of entries (an error while the tab is between two documents).
func (b *browser) historyIndex() (int64, int, error) {
	res, err := chromedp.Run(b.ctx, func(ctx context.Context, tg *chromedp.Target) (page.GetNavigationHistoryResult, error) {
		return cdp.Call(ctx, tg, page.GetNavigationHistory, cdp.Empty{})
	})
	return res.CurrentIndex, len(res.Entries), err
}

// TestBackAfterSignOut: in Chromium, a member signs in, opens an app, goes
// back to the list and signs out; then Back and Forward through the whole
// history never show a frame with the member's name or rows (sampled from
// every pageshow on), and the page and the API answers carry
// Cache-Control: no-store.
func TestBackAfterSignOut(t *testing.T) {
	w := startWebDemo(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	b := newBrowser(t, ctx)
	if _, err := chromedp.Run(b.ctx, func(ctx context.Context, tg *chromedp.Target) (page.AddScriptToEvaluateOnNewDocumentResult, error) {
		return cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: frameSampler})
	}); err != nil {
		t.Fatalf("install the frame sampler: %v", err)
	}
	b.signIn(w.base, demoAcmeMember)
	b.waitFor("the acme rows", `document.querySelectorAll('#app-rows tr').length > 0`, 20*time.Second)
	name := eval[string](b, `document.querySelector('#username').textContent`)
	if name == "" {
		t.Fatal("the signed-in member's name is not shown")
	}
	for _, path := range []string{"/", "/?app=x/y", "/v1/deploy/applications", "/v1/deploy/session/userinfo", "/v1/deploy/settings"} {
		cc := eval[string](b, fmt.Sprintf(`fetch(%s, {credentials: 'same-origin'}).then(r => r.headers.get('cache-control') || '')`, js(path)))
		if cc != "no-store" {
			t.Errorf("GET %s in the browser: Cache-Control %q, want no-store", path, cc)
		}
	}

	// Open an app as a new document (a link opened from elsewhere, a
	// reload), back to the list, sign out there: the app's document is
	// then a Forward away, and the list's own earlier entries a Back away.
	key := eval[string](b, `document.querySelector('#app-rows tr').dataset.key`)
	b.do("open "+key, chromedp.Navigate(w.base+"/?app="+key))
	b.waitFor("the app's page", `!!document.querySelector('#app-title') && !!document.querySelector('#username')`, 20*time.Second)
	eval[bool](b, `(setTimeout(() => history.back(), 0), true)`)
	// The list may come back from the back/forward cache: from here on the
	// page is driven by short evaluations only.
	waitRestored(b, "the list again", `!location.search.includes('app=') && document.querySelectorAll('#app-rows tr').length > 0`)
	waitRestored(b, "Log out clicked", `(b => !!b && (b.click(), true))(document.querySelector('#logout'))`)
	waitRestored(b, "the signed-out page", `!!document.querySelector('#login') && !document.querySelector('#username')`)
	evalRestored[bool](b, `(sessionStorage.setItem('__frames', '[]'), sessionStorage.setItem('__sampling', '1'), true)`)

	// Back to the first entry, then Forward to the last (where a page kept
	// in the back/forward cache comes back as it was), one step at a time,
	// each step waiting for the page to settle.
	settled := `document.readyState === 'complete' && !document.querySelector('p.boot')`
	step := func(dir string, want int64) {
		t.Helper()
		eval[bool](b, fmt.Sprintf(`(setTimeout(() => history.%s(), 0), true)`, dir))
		deadline := time.Now().Add(20 * time.Second)
		for {
			if cur, _, err := b.historyIndex(); err == nil && cur == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("history.%s() did not reach entry %d\n%s", dir, want, b.describe())
			}
			if err := b.poll(`true`, time.Second); err != nil {
				t.Fatal(err)
			}
		}
		waitRestored(b, fmt.Sprintf("entry %d settled", want), `(`+settled+`) && (window.__sample && window.__sample('settled'), true)`)
	}
	cur, n, err := b.historyIndex()
	if err != nil || n < 3 {
		t.Fatalf("the history holds %d entries (%v)", n, err)
	}
	if res, err := chromedp.Run(b.ctx, func(ctx context.Context, tg *chromedp.Target) (page.GetNavigationHistoryResult, error) {
		return cdp.Call(ctx, tg, page.GetNavigationHistory, cdp.Empty{})
	}); err == nil {
		for _, e := range res.Entries {
			t.Logf("history entry %s %s", e.URL, e.TransitionType)
		}
	}
	for i := cur - 1; i >= 0; i-- {
		step("back", i)
	}
	for i := int64(1); i < int64(n); i++ {
		step("forward", i)
	}

	// The last entry is the dashboard's: its sessionStorage holds the
	// samples of every dashboard document the tab showed.
	frames := evalRestored[[]frameSample](b, `JSON.parse(sessionStorage.getItem('__frames') || '[]')`)
	shows, restored := 0, 0
	for _, f := range frames {
		if f.Persisted {
			restored++
		}
		if f.Why == "pageshow" || f.Why == "settled" {
			shows++
		}
		if f.Name != "" || f.Rows > 0 {
			t.Errorf("after signing out, a frame showed %q with %d rows (%s at %s, restored from the cache: %v)", f.Name, f.Rows, f.Why, f.Href, f.Persisted)
		}
	}
	if shows < 2 {
		t.Fatalf("only %d pageshows of the dashboard were sampled: %v", shows, frames)
	}
	t.Logf("%d frames sampled over %d pageshows and settles of the dashboard; %d in a page restored from the back/forward cache", len(frames), shows, restored)
	b.checkConsole()
}
