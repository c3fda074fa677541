package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// streamRecorder is a script the test runs in the page: an EventSource on
// the applications stream (with the page's session cookie), recording every
// event's id, type and app, the opens, and any reset.
const streamRecorder = `(() => {
  const rec = window.__rec = {events: [], opens: 0, resets: 0, errors: 0};
  const es = new EventSource('/v1/deploy/stream/applications');
  es.onopen = () => { rec.opens++; };
  es.onerror = () => { rec.errors++; };
  es.addEventListener('reset', () => { rec.resets++; });
  es.onmessage = (e) => {
    const r = JSON.parse(e.data).result;
    rec.events.push({id: e.lastEventId, type: r.type, app: r.application.metadata.namespace + '/' + r.application.metadata.name});
  };
  window.__es = es;
  return true;
})()`

type recorded struct {
	Events []struct{ ID, Type, App string }
	Opens  int
	Resets int
	Errors int
}

// TestStreamInBrowser: in real Chromium, a page opens EventSource on the
// stream with its session cookie and receives the burst, then live changes;
// the connection is dropped; the browser reconnects by itself with
// Last-Event-ID and the page reaches every position, in order, that a
// client never cut off reaches, and no other: no gap, no reset.
func TestStreamInBrowser(t *testing.T) {
	w := startWebDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b := newBrowser(t, ctx)
	b.signIn(w.base, demoSuperAdmin)

	// The reference: a client that reads the same stream directly, never cut.
	ref := follow(t, &http.Client{Jar: sessionJar(t, b, w.base)}, w.d.URL+"/v1/deploy/stream/applications", "")
	if !eval[bool](b, streamRecorder) {
		t.Fatal("the recorder did not start")
	}
	b.waitFor("the burst", `window.__rec.events.length > 0 && window.__rec.events[window.__rec.events.length-1].id !== ''`, 20*time.Second)
	rec := eval[recorded](b, `window.__rec`)
	burstEnd, _ := strconv.ParseUint(rec.Events[len(rec.Events)-1].ID, 10, 64)
	burst := len(rec.Events)

	change := func(i int) {
		w.declare(t, "hanzo", "iam", fmt.Sprintf("v9.%d.0", i))
		if err := w.d.env.Sim.Step(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		change(i)
	}
	b.waitFor("live changes", fmt.Sprintf(`window.__rec.events.length > %d`, burst), 20*time.Second)

	// The connection drops; changes happen meanwhile; it comes back.
	w.proxy.Cut()
	b.waitFor("the drop noticed", `window.__rec.errors > 0`, 20*time.Second)
	for i := 3; i < 6; i++ {
		change(i)
	}
	w.proxy.Restore()
	b.waitFor("the reconnection", `window.__rec.opens >= 2`, 30*time.Second)
	change(6)

	// Compare up to the newest change the reference client has: the page
	// must have received exactly the same ids after its burst.
	// Positions are compared, each once: two folds may end at one position
	// (their events share the id), and a batch's events but the last carry
	// none.
	var want []string
	reachedRef := burstEnd
	for _, e := range ref.all() {
		if id, err := strconv.ParseUint(e.ID, 10, 64); err == nil && id > reachedRef {
			reachedRef = id
			want = append(want, e.ID)
		}
	}
	if len(want) < 6 {
		t.Fatalf("the reference saw only %d changes after the burst", len(want))
	}
	last := want[len(want)-1]
	b.waitFor("every change", fmt.Sprintf(`window.__rec.events.some(e => e.id === %q)`, last), 30*time.Second)
	rec = eval[recorded](b, `window.__rec`)
	// An event of a batch other than its last carries no id, and
	// EventSource's lastEventId then repeats the id before it; a resume
	// from inside a batch sends the batch again (stream/doc.go,
	// "Positions"). So the page's ids are read as the positions it reached,
	// each once, in order: every one the uncut client got, no other.
	var got []string
	reached := burstEnd
	for _, e := range rec.Events[burst:] {
		id, err := strconv.ParseUint(e.ID, 10, 64)
		if err != nil {
			t.Fatalf("the page recorded an event with id %q", e.ID)
		}
		if id <= reached {
			continue
		}
		reached = id
		got = append(got, e.ID)
		if e.ID == last {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the page's ids after the burst:\n%v\nthe uncut client's:\n%v", got, want)
	}
	if rec.Resets != 0 || rec.Opens < 2 {
		t.Fatalf("opens %d, resets %d: want a resume, not a reset", rec.Opens, rec.Resets)
	}
	if st := w.d.plane.hub.Stats(); st.Resets != 0 {
		t.Fatalf("the hub reset %d streams", st.Resets)
	}
	t.Logf("burst of %d events to id %d, then %d changes in order across a drop (%d errors seen, %d opens)",
		burst, burstEnd, len(got), rec.Errors, rec.Opens)
}

// sessionJar copies the browser's cookies for base into a cookie jar, so a
// Go client reads the same session (cookies are per host, not per port).
func sessionJar(t *testing.T, b *browser, base string) http.CookieJar {
	t.Helper()
	res, err := chromedp.Run(b.ctx, func(ctx context.Context, tg *chromedp.Target) (network.GetCookiesResult, error) {
		return cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/"}})
	})
	if err != nil {
		t.Fatalf("read the browser's cookies: %v", err)
	}
	jar, _ := cookiejar.New(nil)
	u, _ := url.Parse(base)
	var cookies []*http.Cookie
	for _, c := range res.Cookies {
		cookies = append(cookies, &http.Cookie{Name: c.Name, Value: c.Value, Path: c.Path})
	}
	if len(cookies) == 0 {
		t.Fatal("the browser holds no cookie for the dashboard")
	}
	jar.SetCookies(u, cookies)
	return jar
}
