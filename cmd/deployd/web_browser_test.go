package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's Chromium, installed by hack/install-packages.sh.
const chromiumPath = "/usr/bin/chromium"

// requireChromium returns the browser's path, or skips (fails when
// DEPLOYD_REQUIRE_TOOLS=1, as make test sets) when it is not installed.
func requireChromium(t *testing.T) string {
	t.Helper()
	if fi, err := os.Stat(chromiumPath); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
		return chromiumPath
	}
	missingTool(t, chromiumPath+" not found", "install it with hack/install-packages.sh")
	return ""
}

// missingTool skips the test for a real component that is not there, or
// fails it when DEPLOYD_REQUIRE_TOOLS=1 (as make test sets), saying how
// to get it.
func missingTool(t *testing.T, what, how string) {
	t.Helper()
	if os.Getenv("DEPLOYD_REQUIRE_TOOLS") == "1" {
		t.Fatalf("%s (DEPLOYD_REQUIRE_TOOLS=1): %s", what, how)
	}
	t.Skipf("%s: run make test (it installs and builds the real components)", what)
}

// browser is one headless Chromium tab driven over the DevTools protocol.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	problems []string // uncaught exceptions and refusals the console reported
}

// newBrowser starts a headless Chromium with a fresh profile; it is
// stopped when the test ends.
func newBrowser(t *testing.T, ctx context.Context, extra ...chromedp.ExecAllocatorOption) *browser {
	t.Helper()
	path := requireChromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 1000),
	)
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tctx, cancelTab := chromedp.NewContext(actx)
	consoleDone := make(chan struct{})
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		<-consoleDone
	})
	if err := chromedp.Do(tctx); err != nil {
		close(consoleDone)
		t.Fatalf("start %s: %v", path, err)
	}
	b := &browser{t: t, ctx: tctx}
	messages := chromedp.Console(tctx)
	// Reads the console until the tab's context ends (at cleanup).
	go func() {
		defer close(consoleDone)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || m.Source == "security" || strings.Contains(m.Text, "Content Security Policy") {
				b.mu.Lock()
				b.problems = append(b.problems, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line+1))
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// checkConsole fails the test for every uncaught exception, unhandled
// rejection or policy refusal the page reported.
func (b *browser) checkConsole() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		b.t.Errorf("browser console: %s", p)
	}
}

// do runs actions, failing the test on an error.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// click clicks the element a CSS selector names, once it exists; an element
// replaced between the query and the click (a live re-render) is queried
// again.
func (b *browser) click(what, sel string) {
	b.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(sel)))
		if err == nil {
			return
		}
		if time.Now().After(deadline) || b.ctx.Err() != nil || !strings.Contains(err.Error(), "node") {
			b.t.Fatalf("click %s (%s): %v\n%s", what, sel, err, b.describe())
		}
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript predicate until it holds or the timeout
// ends. A navigation in between (the poll does not survive one) starts it
// again.
func (b *browser) waitFor(what, predicate string, timeout time.Duration) {
	b.t.Helper()
	if err := b.poll(predicate, timeout); err != nil {
		b.t.Fatalf("waiting for %s (%s): %v\n%s", what, predicate, err, b.describe())
	}
}

func (b *browser) poll(predicate string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return chromedp.ErrPollingTimeout
		}
		_, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](predicate,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(left)))
		if err == nil || errors.Is(err, chromedp.ErrPollingTimeout) || b.ctx.Err() != nil {
			return err
		}
		// The page navigated away under the poll: poll the new one.
		if !strings.Contains(err.Error(), "context") && !strings.Contains(err.Error(), "navigat") {
			return err
		}
	}
}

// describe is the page's location and visible text, for failure messages.
func (b *browser) describe() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + (document.body ? document.body.innerText.slice(0, 3000) : "")`))
	if err != nil {
		return fmt.Sprintf("(page not readable: %v)", err)
	}
	return "page: " + s
}

// screenshot saves a PNG of the whole page, from its top, into dir.
func (b *browser) screenshot(dir, name string) string {
	b.t.Helper()
	eval[bool](b, `(window.scrollTo(0, 0), true)`)
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	return b.save(dir, name, png, err)
}

// viewportShot saves a PNG of what the window shows (a modal dialog where
// it is) into dir.
func (b *browser) viewportShot(dir, name string) string {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	return b.save(dir, name, png, err)
}

func (b *browser) save(dir, name string, png []byte, err error) string {
	b.t.Helper()
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	return path
}

// signIn signs in from the dashboard at base as a demo user: the page's
// "Log in", then the demo identity provider's chooser, then back.
func (b *browser) signIn(base, subject string) {
	b.t.Helper()
	b.do("open the dashboard", chromedp.Navigate(base+"/"))
	b.waitFor("the sign-in button", `!!document.querySelector('#login')`, 20*time.Second)
	b.click("Log in", "#login")
	sel := fmt.Sprintf(`button[value=%q]`, subject)
	b.waitFor("the demo user chooser", fmt.Sprintf(`!!document.querySelector(%q)`, sel), 20*time.Second)
	b.click("the user "+subject, sel)
	b.waitFor("the dashboard, signed in", fmt.Sprintf(`location.href.startsWith(%q) && !!document.querySelector('#logout')`, base), 20*time.Second)
}
