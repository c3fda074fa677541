package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/projection"
)

// pageEngine stands in for the engine behind the dashboard: a dry run and
// a run of a fixed rendering, and the calls it got.
type pageEngine struct {
	mu        sync.Mutex
	calls     []string // "dry" or "run", in order
	suspended *gitops.EngineSuspension
	stale     *gitops.EngineStale
}

const pageRevision = "9e1b0c7d2a4f6e8b0d1c3a5f7e9b2d4c6a8e0f13"

var pageSource = projection.EngineSource{Repo: "https://git.example/hanzoai/universe", Ref: "main", Path: "infra/k8s/operator/crs"}

func (e *pageEngine) Reconcile(_ context.Context, trigger string, dryRun bool) (*gitops.ReconcileReport, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	prefix, call := "", "run"
	if dryRun {
		prefix, call = "dry run: ", "dry"
	}
	e.calls = append(e.calls, call)
	rep := &gitops.ReconcileReport{
		Declared: 4, Synced: 3, Failed: 1, Instance: "universe", Revision: pageRevision, Source: pageSource,
		Results: []gitops.ReconcileResult{
			{Message: prefix + "kind v1/Secret is not on the engine's allow-list", Resource: "/v1/Secret/hanzo/db", Status: gitops.ResultSyncFailed},
			{Message: prefix + "unchanged", Resource: "hanzo.ai/v1/App/hanzo/gateway", Status: gitops.ResultSynced},
			{Message: prefix + "spec.image.tag v1.4.2 → v1.5.0", Resource: "hanzo.ai/v1/App/hanzo/iam", Status: gitops.ResultSynced},
			{Message: prefix + "unchanged", Resource: "hanzo.ai/v1/App/tenant-acme/web", Status: gitops.ResultSynced},
		},
	}
	return rep, nil
}

func (e *pageEngine) Trigger(string) {}

func (e *pageEngine) Status() gitops.EngineStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	started := time.Now().Add(-2 * time.Minute).UTC().Truncate(time.Second)
	next := started.Add(3 * time.Minute)
	st := gitops.EngineStatus{
		Enabled: true, Source: pageSource, Revision: pageRevision, Runs: int64(len(e.calls) + 1),
		LastRun: &gitops.EngineRun{ID: "20261130T120000Z-1", Trigger: gitops.TriggerInterval, StartedAt: started,
			FinishedAt: started.Add(time.Second), Declared: 4, Synced: 3, Failed: 1},
		NextRunAt: &next, State: gitops.EngineStateOK,
		Leader:    &gitops.EngineLeader{Identity: "deployd-7d9f-x2c4d1", Since: started.Add(-time.Hour)},
		Suspended: e.suspended, Stale: e.stale,
	}
	switch {
	case e.suspended != nil:
		st.State = gitops.EngineStateSuspended
	case e.stale != nil:
		st.State = gitops.EngineStateStale
	}
	return st
}

func (e *pageEngine) Desired(projection.Kind, string, string) (map[string]any, bool) {
	return nil, false
}

func (e *pageEngine) Manages(string, string) (string, bool) { return "", false }

func (e *pageEngine) PushEnabled() bool { return false }

func (e *pageEngine) Instance() string { return "universe" }

func (e *pageEngine) Leader() (gitops.EngineLeader, bool, error) {
	return gitops.EngineLeader{}, true, nil
}

func (e *pageEngine) Suspend(_ context.Context, by string) (gitops.EngineStatus, error) {
	e.mu.Lock()
	e.suspended = &gitops.EngineSuspension{By: by, At: time.Now().UTC().Truncate(time.Second)}
	e.mu.Unlock()
	return e.Status(), nil
}

func (e *pageEngine) Resume(context.Context) (gitops.EngineStatus, error) {
	e.mu.Lock()
	e.suspended = nil
	e.mu.Unlock()
	return e.Status(), nil
}

func (e *pageEngine) suspendedBy() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.suspended == nil {
		return ""
	}
	return e.suspended.By
}

func (e *pageEngine) WriteTag(context.Context, gitops.TagWrite) (string, error) {
	return "", fmt.Errorf("the page's engine declares no App")
}

func (e *pageEngine) History(context.Context, string, string) ([]gitops.GitCommit, error) {
	return nil, nil
}

func (e *pageEngine) called() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.calls)
}

// TestWebEngine drives the engine's panel in Chromium: a SuperAdmin sees
// the engine's state, a Reconcile previews the dry run's changes and runs
// only once confirmed (a cancel runs nothing); a member sees no panel and
// the page never asks for the engine's state.
func TestWebEngine(t *testing.T) {
	eng := &pageEngine{}
	w := startWebDemo(t, func(o *demoOptions) { o.Engine = eng })
	shots, err := os.MkdirTemp("", "deployd-web-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	b := newBrowser(t, ctx)

	b.signIn(w.base, demoSuperAdmin)
	b.waitFor("the engine's panel", fmt.Sprintf(`(p => !!p && p.dataset.enabled === 'true' && document.querySelector('#engine-revision')?.dataset.revision === %s && document.querySelector('#engine-last-run').textContent.includes('20261130T120000Z-1'))(document.querySelector('#engine-panel'))`, js(pageRevision)), 20*time.Second)
	if src := eval[string](b, `document.querySelector('#engine-source').textContent`); !strings.Contains(src, "git.example/hanzoai/universe") || !strings.Contains(src, "main") {
		t.Errorf("the source shown: %q", src)
	}
	b.waitFor("the list under the panel", `document.querySelectorAll('#app-rows tr').length > 0`, 20*time.Second)

	// Reconcile: the dry run first, its changes in the confirmation.
	b.click("Reconcile", "#engine-reconcile")
	b.waitFor("the preview", fmt.Sprintf(`document.querySelector('#confirm-dialog').open && document.querySelector('#confirm-title').textContent.includes(%s) && !!document.querySelector('#engine-preview')`, js(pageRevision[:7])), 10*time.Second)
	rows := eval[[]string](b, `[...document.querySelectorAll('#engine-preview tbody tr')].map(tr => tr.dataset.resource + ' ' + tr.dataset.status)`)
	if want := []string{"/v1/Secret/hanzo/db SyncFailed", "hanzo.ai/v1/App/hanzo/iam Synced"}; !slices.Equal(rows, want) {
		t.Errorf("the preview lists %v, want the changes %v", rows, want)
	}
	if s := eval[string](b, `document.querySelector('#engine-preview-summary').textContent`); !strings.Contains(s, "2 of 4 resources would change") || !strings.Contains(s, "(2 unchanged)") {
		t.Errorf("the preview's summary: %q", s)
	}
	if got := eng.called(); !slices.Equal(got, []string{"dry"}) {
		t.Fatalf("before the confirmation the engine ran %v, want one dry run", got)
	}
	t.Logf("screenshot of the reconcile preview: %s", b.viewportShot(shots, "engine-preview.png"))
	b.click("confirm", "#confirm-ok")
	b.waitFor("the reconcile's answer", fmt.Sprintf(`[...document.querySelectorAll('.toast')].some(t => t.textContent.includes('Reconciled revision %s')) && document.querySelector('#engine-report')?.dataset.revision === %s && !!document.querySelector('#engine-failures tr[data-status="SyncFailed"]')`, pageRevision[:7], js(pageRevision)), 10*time.Second)
	if got := eng.called(); !slices.Equal(got, []string{"dry", "run"}) {
		t.Fatalf("the engine ran %v, want a dry run then a run", got)
	}
	b.waitFor("the button back", `(x => !!x && !x.disabled)(document.querySelector('#engine-reconcile'))`, 10*time.Second)
	t.Logf("screenshot of the engine's panel: %s", b.screenshot(shots, "engine-ada.png"))

	// A cancelled preview runs nothing.
	b.click("Reconcile", "#engine-reconcile")
	b.waitFor("the preview", `document.querySelector('#confirm-dialog').open && !!document.querySelector('#engine-preview')`, 10*time.Second)
	b.click("cancel", "#confirm-cancel")
	b.waitFor("the button back", `!document.querySelector('#confirm-dialog').open && (x => !!x && !x.disabled)(document.querySelector('#engine-reconcile'))`, 10*time.Second)
	if got := eng.called(); !slices.Equal(got, []string{"dry", "run", "dry"}) {
		t.Fatalf("after a cancel the engine ran %v, want one more dry run and nothing else", got)
	}

	// The leader is named; Suspend (confirmed) shows who suspended it and
	// takes Reconcile away; Resume brings it back. A stale engine says why.
	if l := eval[string](b, `document.querySelector('#engine-leader')?.textContent || ''`); !strings.Contains(l, "deployd-7d9f-x2c4d1") {
		t.Errorf("the leader shown: %q", l)
	}
	b.click("Suspend", "#engine-suspend")
	b.waitFor("the suspend dialog", `document.querySelector('#confirm-dialog').open`, 10*time.Second)
	b.click("confirm", "#confirm-ok")
	b.waitFor("the suspended panel", `document.querySelector('#engine-panel').dataset.state === 'suspended' && document.querySelector('#engine-state').textContent.includes('Suspended') && !!document.querySelector('#engine-suspended') && !document.querySelector('#engine-reconcile') && !!document.querySelector('#engine-resume')`, 10*time.Second)
	by := eng.suspendedBy()
	if by == "" || !strings.Contains(eval[string](b, `document.querySelector('#engine-suspended').textContent`), by) {
		t.Errorf("suspended by %q; the panel says %q", by, eval[string](b, `document.querySelector('#engine-suspended').textContent`))
	}
	eng.mu.Lock()
	eng.stale = &gitops.EngineStale{Since: time.Now().Add(-10 * time.Minute).UTC(), Error: "fetch https://git.example/hanzoai/universe main: connection refused"}
	eng.mu.Unlock()
	b.click("Resume", "#engine-resume")
	b.waitFor("the stale panel", `document.querySelector('#engine-panel').dataset.state === 'stale' && document.querySelector('#engine-state').textContent.includes('Stale') && document.querySelector('#engine-stale')?.textContent.includes('connection refused') && !!document.querySelector('#engine-reconcile')`, 10*time.Second)
	t.Logf("screenshot of a stale engine: %s", b.viewportShot(shots, "engine-stale.png"))
	eng.mu.Lock()
	eng.stale = nil
	eng.mu.Unlock()

	// An App the engine applied: its row shows the commit, its page the
	// commit beside the declared tag, which stays the tag.
	app := steadyAcmeApp(t)
	key := app.Namespace + "/" + app.Name
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"universe"},"annotations":{%q:%q,%q:"20261130T120000Z-1",%q:"2026-11-30T12:00:01Z"}}}`,
		projection.LabelEngineInstance, projection.AnnotationEngineRevision, pageRevision, projection.AnnotationEngineRun, projection.AnnotationEngineAppliedAt)
	if _, err := w.d.env.Cluster.Dynamic().Resource(projection.KindApp.GVR()).Namespace(app.Namespace).
		Patch(t.Context(), app.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the commit on the row", fmt.Sprintf(`(c => !!c && c.textContent === %s && c.title.includes(%s))(document.querySelector(%s))`,
		js(pageRevision[:7]), js(pageRevision), js(rowSel(key)+" .c-rev code")), 20*time.Second)
	b.click("open "+key, rowSel(key)+" a.app-link")
	b.waitFor("the app page with its commit", fmt.Sprintf(`document.querySelector('#app-git-revision')?.textContent === %s && document.querySelector('#app-declared')?.textContent === %s && document.querySelector('#history tr.is-current')?.dataset.revision === %s`,
		js(pageRevision[:7]), js(app.Tag), js(app.Tag)), 20*time.Second)
	b.do("back to the list", chromedp.Navigate(w.base+"/"))
	b.waitFor("the engine's panel again", `!!document.querySelector('#engine-reconcile')`, 20*time.Second)

	// A member: no panel, no button, and no request for the engine's state.
	b.click("log out", "#logout")
	b.waitFor("the signed-out page", `!!document.querySelector('#login') && !document.querySelector('#logout')`, 10*time.Second)
	asked := strings.Count(w.logs.String(), `"route":"/v1/deploy/gitops"`)
	b.signIn(w.base, demoAcmeMember)
	b.waitFor("the acme rows", fmt.Sprintf(`document.querySelectorAll('#app-rows tr').length === %d`, len(acmeRows())), 20*time.Second)
	if n := eval[int](b, `document.querySelectorAll('#engine-panel, #engine-reconcile').length + [...document.querySelectorAll('button')].filter(x => x.textContent.includes('Reconcile')).length`); n != 0 {
		t.Fatalf("a member of acme sees %d engine controls, want none", n)
	}
	if again := strings.Count(w.logs.String(), `"route":"/v1/deploy/gitops"`); again != asked {
		t.Errorf("the page asked for the engine's state %d times for a member", again-asked)
	}
	if got := eng.called(); len(got) != 3 {
		t.Errorf("the engine ran %v", got)
	}
	b.checkConsole()
}
