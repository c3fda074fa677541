package engine

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/projection"
)

// prune deletes the live objects carrying this instance's label whose
// namespace and name no rendered document holds (of any kind, admitted or
// not: a misspelt apiVersion or kind never deletes what it meant to
// declare), unless pruning is off or the fuse trips: more candidates than
// PruneMax, or a larger share of the instance's live objects than
// PruneMaxRatio. Then every candidate is PruneSkipped and nothing is
// deleted. An object carrying AnnotationPrune: disabled is never a
// candidate (PruneSkipped), nor one carrying AnnotationReconcile: disabled
// (Skipped). Only objects from the labelled list are candidates, and each
// delete is conditional on the UID and resourceVersion that list saw, so
// an object relabelled or replaced since is never deleted.
func (e *Engine) prune(ctx context.Context, r run, names map[nsName]bool, live liveSet) []gitops.ReconcileResult {
	var cands []objKey
	var out []gitops.ReconcileResult
	for k, l := range live.ours {
		if names[nsName{k.namespace, k.name}] {
			continue
		}
		res := resourceOfKind(k.kind, k.namespace, k.name)
		ann := l.GetAnnotations()
		switch {
		case ann[projection.AnnotationReconcile] == projection.Disabled:
			out = append(out, gitops.ReconcileResult{Resource: res, Status: gitops.ResultSkipped,
				Message: dry(r, "skipped: the live object has "+projection.AnnotationReconcile+": disabled; not pruned")})
			continue
		case ann[projection.AnnotationPrune] == projection.Disabled:
			out = append(out, gitops.ReconcileResult{Resource: res, Status: gitops.ResultPruneSkipped,
				Message: dry(r, "the live object has "+projection.AnnotationPrune+": disabled; not pruned")})
			continue
		}
		if _, _, ok := e.cfg.Namespaces.Env(k.namespace); !ok {
			// Outside the namespace map the engine writes nothing, deletes
			// included; such an object does not count toward the fuse.
			out = append(out, gitops.ReconcileResult{Resource: res, Status: gitops.ResultPruneSkipped,
				Message: dry(r, fmt.Sprintf("policy: namespace %q is not in the namespace map; not pruned", k.namespace))})
			continue
		}
		cands = append(cands, k)
	}
	if len(cands) == 0 {
		return out
	}
	sort.Slice(cands, func(i, j int) bool {
		return resourceOfKind(cands[i].kind, cands[i].namespace, cands[i].name) < resourceOfKind(cands[j].kind, cands[j].namespace, cands[j].name)
	})
	skip := func(msg string) []gitops.ReconcileResult {
		for _, k := range cands {
			out = append(out, gitops.ReconcileResult{Resource: resourceOfKind(k.kind, k.namespace, k.name), Status: gitops.ResultPruneSkipped, Message: dry(r, msg)})
		}
		return out
	}
	if !e.cfg.Prune {
		return skip("pruning is off")
	}
	n, total := len(cands), len(live.ours)
	if n > e.cfg.PruneMax || float64(n) > e.cfg.PruneMaxRatio*float64(total) {
		return skip(fmt.Sprintf("fuse: %d of the instance's %d objects would be pruned, over the limit of %d objects or %.0f%% (DEPLOY_ENGINE_PRUNE_MAX, DEPLOY_ENGINE_PRUNE_MAX_RATIO); nothing was deleted",
			n, total, e.cfg.PruneMax, e.cfg.PruneMaxRatio*100))
	}
	for _, k := range cands {
		if ctx.Err() != nil { // the run's time, or the leader's term, is over
			out = append(out, gitops.ReconcileResult{Resource: resourceOfKind(k.kind, k.namespace, k.name), Status: gitops.ResultPruneSkipped,
				Message: dry(r, "not pruned: "+safeAPIError(ctx.Err()))})
			continue
		}
		if err := e.fenced(); err != nil {
			out = append(out, gitops.ReconcileResult{Resource: resourceOfKind(k.kind, k.namespace, k.name), Status: gitops.ResultPruneSkipped,
				Message: dry(r, "not pruned: "+err.Error())})
			continue
		}
		l := live.ours[k]
		res := gitops.ReconcileResult{Resource: resourceOfKind(k.kind, k.namespace, k.name)}
		if l.GetLabels()[projection.LabelEngineInstance] != e.cfg.Instance {
			continue // never: the list selected on the label
		}
		uid, rv := l.GetUID(), l.GetResourceVersion()
		opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}}
		if r.dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		err := e.dyn.Resource(k.kind.GVR()).Namespace(k.namespace).Delete(ctx, k.name, opts)
		switch {
		case err == nil:
			res.Status, res.Message = gitops.ResultPruned, "pruned"
			if r.dryRun {
				res.Message = "would be pruned"
			}
		case apierrors.IsNotFound(err):
			res.Status, res.Message = gitops.ResultPruneSkipped, "already deleted"
		case apierrors.IsConflict(err):
			res.Status, res.Message = gitops.ResultPruneSkipped, "changed while it was being pruned; left for the next run"
		default:
			res.Status, res.Message = gitops.ResultPruneSkipped, "not pruned: "+safeAPIError(err)
		}
		res.Message = dry(r, res.Message)
		out = append(out, res)
	}
	return out
}
