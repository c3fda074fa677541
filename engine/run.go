package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/hanzoai/deploy/projection"
)

// runOnce is one run: source → render → policy → apply → prune → report.
// It holds runMu throughout, records the run in Status and writes its audit
// line.
func (e *Engine) runOnce(ctx context.Context, trigger string, dryRun bool) (*projection.ReconcileReport, error) {
	e.runMu.Lock()
	defer e.runMu.Unlock()
	start := e.now().UTC()
	e.mu.Lock()
	e.runs++
	id := fmt.Sprintf("%s-%d", start.Format("20060102T150405Z"), e.runs)
	e.mu.Unlock()

	rep, desired, files, err := e.pipeline(ctx, run{id: id, start: start, dryRun: dryRun})
	end := e.now().UTC()
	rec := projection.EngineRun{ID: id, Trigger: trigger, StartedAt: start, FinishedAt: end}
	attrs := []any{"id", id, "trigger", trigger, "dryRun", dryRun, "repo", e.cfg.Repo, "ref", e.cfg.Ref,
		"path", e.cfg.Path, "duration", end.Sub(start).Round(time.Millisecond).String()}
	if err != nil {
		rec.Error = err.Error()
		e.log.Warn("engine run failed", append(attrs, "revision", e.src.Revision(), "error", err.Error())...)
	} else {
		rec.Declared, rec.Synced, rec.Failed, rec.Pruned = rep.Declared, rep.Synced, rep.Failed, rep.Pruned
		e.log.Info("engine run", append(attrs, "revision", rep.Revision, "declared", rep.Declared,
			"synced", rep.Synced, "failed", rep.Failed, "pruned", rep.Pruned, "changed", changedCount(rep))...)
	}
	e.mu.Lock()
	e.lastRun = &rec
	if err == nil && !dryRun {
		e.desired = desired
		e.files = files
	}
	onRun := e.onRun
	e.mu.Unlock()
	if onRun != nil && !dryRun {
		onRun(rep, err, end.Sub(start), end)
	}
	return rep, err
}

// run is what the stages need to know about the run they are part of.
type run struct {
	id     string
	start  time.Time
	sha    string
	dryRun bool
}

func (e *Engine) pipeline(ctx context.Context, r run) (*projection.ReconcileReport, map[objKey]map[string]any, map[objKey]string, error) {
	sha, err := e.src.Fetch(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	r.sha = sha
	docs, err := e.render(sha)
	if err != nil {
		return nil, nil, nil, err
	}
	rep := &projection.ReconcileReport{
		Instance: e.cfg.Instance,
		Prune:    e.cfg.Prune,
		Revision: sha,
		Source:   e.cfg.Source(),
		Results:  []projection.ReconcileResult{},
	}
	// Policy, before any request.
	var admitted []admittedObj
	declared := map[objKey]bool{}
	firstAt := map[string]string{}
	files := map[objKey]string{}
	for _, d := range docs {
		u := d.Object.DeepCopy()
		res := resourceOf(u)
		k, err := e.policy.Admit(u)
		if err != nil {
			rep.Results = append(rep.Results, failed(res, r, err.Error()))
			if k != projection.KindUnknown {
				// Still declared: a refused object is never pruned.
				declared[objKey{k, u.GetNamespace(), u.GetName()}] = true
			}
			continue
		}
		res = resourceOf(u)
		key := objKey{k, u.GetNamespace(), u.GetName()}
		if at, dup := firstAt[res]; dup {
			rep.Results = append(rep.Results, failed(res, r, "declared twice: also at "+at+"; the first is applied"))
			continue
		}
		firstAt[res] = d.where()
		declared[key] = true
		if k == projection.KindApp {
			files[key] = d.File
		}
		admitted = append(admitted, admittedObj{key: key, obj: u, resource: res})
	}
	live, err := e.listLive(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	results, desired := e.apply(ctx, r, admitted, live)
	rep.Results = append(rep.Results, results...)
	rep.Results = append(rep.Results, e.prune(ctx, r, declared, live)...)
	sort.SliceStable(rep.Results, func(i, j int) bool { return rep.Results[i].Resource < rep.Results[j].Resource })
	for _, res := range rep.Results {
		switch res.Status {
		case projection.ResultSynced:
			rep.Synced++
		case projection.ResultSyncFailed:
			rep.Failed++
		case projection.ResultPruned:
			rep.Pruned++
		}
	}
	rep.Declared = rep.Synced + rep.Failed
	return rep, desired, files, nil
}

// render renders the commit, reusing the last rendering of the same commit.
func (e *Engine) render(sha string) ([]Doc, error) {
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
	docs, err := Render(files, e.cfg.Path)
	if err != nil {
		return nil, err
	}
	e.rendered.sha, e.rendered.docs = sha, docs
	return docs, nil
}

func (d Doc) where() string {
	if d.Line > 0 {
		return fmt.Sprintf("%s:%d", d.File, d.Line)
	}
	return d.File
}

func failed(resource string, r run, msg string) projection.ReconcileResult {
	return projection.ReconcileResult{Resource: resource, Status: projection.ResultSyncFailed, Message: dry(r, msg)}
}

// dry prefixes a message of a dry run.
func dry(r run, msg string) string {
	if r.dryRun {
		return "dry run: " + msg
	}
	return msg
}

func changedCount(rep *projection.ReconcileReport) int {
	n := 0
	for _, r := range rep.Results {
		if r.Status == projection.ResultSynced && r.Message != "unchanged" && r.Message != "dry run: unchanged" {
			n++
		}
	}
	return n
}
