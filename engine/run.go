package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"time"

	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/projection"
)

// runOnce is one run: source → render → policy → apply → prune → report.
// It holds runMu throughout, records the run in the state (published to
// the cluster with a Lease) and writes its audit line. A panic anywhere in
// the run becomes its error: the process keeps serving.
func (e *Engine) runOnce(ctx context.Context, f *flight, dryRun bool) (rep *gitops.ReconcileReport, err error) {
	e.runMu.Lock()
	defer e.runMu.Unlock()
	start := e.now().UTC()
	e.mu.Lock()
	f.fetching = true
	e.st.Runs++
	id := fmt.Sprintf("%s-%d", start.Format("20060102T150405Z"), e.st.Runs)
	e.mu.Unlock()

	var out pipelineOut
	func() {
		defer func() {
			if p := recover(); p != nil {
				e.log.Error("engine run panicked", "id", id, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				out.report, err = nil, errInternal
			}
		}()
		err = e.pipeline(ctx, run{id: id, start: start, dryRun: dryRun}, &out)
	}()
	rep = out.report
	if err == nil && ctx.Err() != nil && e.cfg.Lease != nil && e.currentTerm() == nil {
		err = errLeadershipLost
	}
	if err != nil {
		rep = nil
	}
	end := e.now().UTC()
	rec := gitops.EngineRun{ID: id, Trigger: f.trigger, StartedAt: start, FinishedAt: end}
	attrs := []any{"id", id, "trigger", f.trigger, "dryRun", dryRun, "repo", e.cfg.Repo, "ref", e.cfg.Ref,
		"path", e.cfg.Path, "duration", end.Sub(start).Round(time.Millisecond).String()}
	if err != nil {
		rec.Error = err.Error()
		e.log.Warn("engine run failed", append(attrs, "revision", out.revision, "error", err.Error())...)
	} else {
		rec.Declared, rec.Synced, rec.Failed, rec.Pruned = rep.Declared, rep.Synced, rep.Failed, rep.Pruned
		e.log.Info("engine run", append(attrs, "revision", rep.Revision, "declared", rep.Declared,
			"synced", rep.Synced, "failed", rep.Failed, "pruned", rep.Pruned, "changed", changedCount(rep),
			"stale", out.stale != nil)...)
	}
	e.mu.Lock()
	e.st.LastRun = &rec
	if out.revision != "" {
		e.st.Revision = out.revision
	}
	if out.fetched {
		e.st.Stale = nil
	} else if out.stale != nil {
		if e.st.Stale == nil {
			e.st.Stale = &gitops.EngineStale{Since: start}
		}
		e.st.Stale.Error = out.stale.Error()
	}
	if err == nil && !dryRun {
		e.desired, e.files, e.view = out.desired, out.files, view{sha: rep.Revision, target: rep.Revision}
	}
	onRun := e.onRun
	e.mu.Unlock()
	e.publish(ctx)
	if onRun != nil && !dryRun {
		onRun(rep, err, end.Sub(start), end)
	}
	return rep, err
}

// errInternal is a run that panicked; the log holds the panic and stack.
var errInternal = errors.New("the engine failed internally during the run; see the server log")

// run is what the stages need to know about the run they are part of.
type run struct {
	id     string
	start  time.Time
	sha    string
	dryRun bool
}

// pipelineOut is what a run leaves behind besides its report.
type pipelineOut struct {
	report   *gitops.ReconcileReport
	revision string // the commit rendered ("" when none was)
	fetched  bool   // the fetch succeeded
	stale    error  // the fetch failed and a cached commit was used
	desired  map[objKey]map[string]any
	files    map[objKey]string
}

// revisionOf fetches the ref; when git cannot be reached it falls back to
// the last good commit in the cache (stale says why), so a run still heals
// drift while git is down. Only with no commit cached is it an error.
func (e *Engine) revisionOf(ctx context.Context) (sha string, stale error, err error) {
	sha, err = e.src.Fetch(ctx)
	if err == nil {
		return sha, nil, nil
	}
	if ctx.Err() != nil {
		return "", nil, err
	}
	if cached := e.src.Cached(); cached != "" {
		return cached, err, nil
	}
	return "", nil, err
}

// pipeline runs the stages, filling out as it goes (a run that fails or
// panics keeps what it knew: its revision, whether git answered).
func (e *Engine) pipeline(ctx context.Context, r run, out *pipelineOut) error {
	sha, stale, err := e.revisionOf(ctx)
	if err != nil {
		return err
	}
	out.revision, out.fetched, out.stale = sha, stale == nil, stale
	r.sha = sha
	e.stage("render")
	docs, err := e.render(ctx, sha)
	if err != nil {
		return err
	}
	rep := &gitops.ReconcileReport{
		Instance: e.cfg.Instance,
		Prune:    e.cfg.Prune,
		Revision: sha,
		Source:   e.cfg.Source(),
		Results:  []gitops.ReconcileResult{},
	}
	adm := e.admit(docs, r)
	rep.Results = append(rep.Results, adm.refused...)
	live, err := e.listLive(ctx)
	if err != nil {
		return err
	}
	plan := e.plan(r, adm.admitted, live)
	rep.Results = append(rep.Results, plan.held...)
	results, err := e.send(ctx, r, plan)
	if err != nil {
		return err
	}
	rep.Results = append(rep.Results, results...)
	e.stage("prune")
	rep.Results = append(rep.Results, e.prune(ctx, r, adm.names, live)...)
	sort.SliceStable(rep.Results, func(i, j int) bool { return rep.Results[i].Resource < rep.Results[j].Resource })
	for _, res := range rep.Results {
		switch res.Status {
		case gitops.ResultSynced:
			rep.Synced++
		case gitops.ResultSyncFailed:
			rep.Failed++
		case gitops.ResultPruned:
			rep.Pruned++
		}
	}
	// A declared object skipped (reconcile disabled on the live one) is
	// declared all the same.
	rep.Declared = rep.Synced + rep.Failed + plan.skipped
	out.report, out.desired, out.files = rep, plan.desired, adm.files
	return nil
}

// admission is the policy's verdict on a rendering: what may be sent, what
// was refused, and every name the rendering holds.
type admission struct {
	admitted []admittedObj
	refused  []gitops.ReconcileResult
	// names holds the namespace and name of every rendered document,
	// whatever its kind and whether or not it was admitted: no live object
	// of such a name is ever pruned (a typo in apiVersion or kind must not
	// delete what it meant to declare).
	names map[nsName]bool
	files map[objKey]string // the file that declares each App
}

type nsName struct{ namespace, name string }

// admit applies the policy to every rendered document before any request.
func (e *Engine) admit(docs []Doc, r run) admission {
	a := admission{names: map[nsName]bool{}, files: map[objKey]string{}}
	firstAt := map[string]string{}
	for _, d := range docs {
		u := d.Object.DeepCopy()
		ns := u.GetNamespace()
		a.names[nsName{ns, u.GetName()}] = true
		if ns == "" {
			a.names[nsName{e.cfg.Namespace, u.GetName()}] = true
		}
		res := resourceOf(u)
		k, err := e.policy.Admit(u)
		if err != nil {
			a.refused = append(a.refused, failed(res, r, err.Error()))
			continue
		}
		res = resourceOf(u)
		key := objKey{k, u.GetNamespace(), u.GetName()}
		if at, dup := firstAt[res]; dup {
			a.refused = append(a.refused, failed(res, r, "declared twice: also at "+at+"; the first is applied"))
			continue
		}
		firstAt[res] = d.where()
		if k == projection.KindApp {
			a.files[key] = d.File
		}
		a.admitted = append(a.admitted, admittedObj{key: key, obj: u, resource: res})
	}
	return a
}

// render renders the commit, reusing the last rendering of the same commit.
func (e *Engine) render(ctx context.Context, sha string) ([]Doc, error) {
	if e.rendered.sha == sha {
		return e.rendered.docs, nil
	}
	files, err := e.src.Files(sha, e.cfg.Path)
	if err != nil {
		var re *RenderError
		if errors.As(err, &re) {
			return nil, err
		}
		return nil, &RenderError{File: e.cfg.Path, Msg: "read the commit's files: " + err.Error()}
	}
	docs, err := e.renderFiles(ctx, files)
	if err != nil {
		return nil, err
	}
	e.rendered.sha, e.rendered.docs = sha, docs
	return docs, nil
}

// renderFiles renders the engine's path from a commit's files.
func (e *Engine) renderFiles(ctx context.Context, files map[string][]byte) ([]Doc, error) {
	return Render(ctx, files, e.cfg.Path)
}

func (d Doc) where() string {
	if d.Line > 0 {
		return fmt.Sprintf("%s:%d", d.File, d.Line)
	}
	return d.File
}

func failed(resource string, r run, msg string) gitops.ReconcileResult {
	return gitops.ReconcileResult{Resource: resource, Status: gitops.ResultSyncFailed, Message: dry(r, msg)}
}

// dry prefixes a message of a dry run.
func dry(r run, msg string) string {
	if r.dryRun {
		return "dry run: " + msg
	}
	return msg
}

func changedCount(rep *gitops.ReconcileReport) int {
	n := 0
	for _, r := range rep.Results {
		if r.Status == gitops.ResultSynced && r.Message != "unchanged" && r.Message != "dry run: unchanged" {
			n++
		}
	}
	return n
}
