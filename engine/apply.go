package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/hanzoai/deploy/projection"
)

// applyWorkers bounds the applies a run has in flight at once.
const applyWorkers = 16

// admittedObj is a rendered object that passed the policy.
type admittedObj struct {
	key      objKey
	obj      *unstructured.Unstructured
	resource string
}

func gvr(k projection.Kind) schema.GroupVersionResource {
	ki := k.Info()
	return schema.GroupVersionResource{Group: ki.Group, Version: ki.Version, Resource: ki.Resource}
}

// listLive lists the live objects of the allowed kinds that carry this
// instance's label: one request per kind, whatever the fleet's size. A kind
// whose CRD is not served has none.
func (e *Engine) listLive(ctx context.Context) (map[objKey]*unstructured.Unstructured, error) {
	live := map[objKey]*unstructured.Unstructured{}
	sel := projection.LabelEngineInstance + "=" + e.cfg.Instance
	for _, k := range e.cfg.Allow {
		list, err := e.dyn.Resource(gvr(k)).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list live %s objects: %s", k, safeAPIError(err))
		}
		for i := range list.Items {
			u := &list.Items[i]
			live[objKey{k, u.GetNamespace(), u.GetName()}] = u
		}
	}
	return live, nil
}

// prepare strips what an apply must not carry (server-set metadata and
// status, which the main resource ignores) from a rendered object.
func prepare(u *unstructured.Unstructured) {
	for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "selfLink", "deletionTimestamp"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	delete(u.Object, "status")
}

// desiredHash is a hash of the object as rendered (after policy filled its
// namespace): it changes exactly when the desired state does.
func desiredHash(u *unstructured.Unstructured) string {
	b, _ := json.Marshal(u.Object) // map keys are sorted: canonical
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// apply sends the objects whose desired state changed or whose live state
// drifted, up to applyWorkers at once, and reports every admitted object. It
// also returns the desired objects by key, for Desired.
func (e *Engine) apply(ctx context.Context, r run, objs []admittedObj, live map[objKey]*unstructured.Unstructured) ([]projection.ReconcileResult, map[objKey]map[string]any) {
	results := make([]projection.ReconcileResult, len(objs))
	desired := make(map[objKey]map[string]any, len(objs))
	type job struct {
		i       int
		send    *unstructured.Unstructured
		created bool
		heal    bool
	}
	var jobs []job
	for i, o := range objs {
		u := o.obj
		prepare(u)
		hash := desiredHash(u)
		labels := u.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[projection.LabelEngineInstance] = e.cfg.Instance
		u.SetLabels(labels)
		desired[o.key] = u.DeepCopy().Object

		ann := u.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		l := live[o.key]
		var lann map[string]string
		if l != nil {
			lann = l.GetAnnotations()
		}
		sameDesired := l != nil && lann[AnnotationDesiredHash] == hash
		if sameDesired {
			// A self-heal keeps the revision, run and time it carries.
			ann[projection.AnnotationEngineRevision] = lann[projection.AnnotationEngineRevision]
			ann[projection.AnnotationEngineRun] = lann[projection.AnnotationEngineRun]
			ann[projection.AnnotationEngineAppliedAt] = lann[projection.AnnotationEngineAppliedAt]
		} else {
			ann[projection.AnnotationEngineRevision] = r.sha
			ann[projection.AnnotationEngineRun] = r.id
			ann[projection.AnnotationEngineAppliedAt] = r.start.Format(time.RFC3339)
		}
		ann[AnnotationDesiredHash] = hash
		u.SetAnnotations(ann)

		results[i].Resource = o.resource
		if sameDesired && subset(u.Object, l.Object) {
			results[i].Status, results[i].Message = projection.ResultSynced, dry(r, "unchanged")
			continue
		}
		jobs = append(jobs, job{i: i, send: u, created: l == nil, heal: sameDesired})
	}

	var wg sync.WaitGroup
	next := make(chan job)
	for w := 0; w < min(applyWorkers, len(jobs)); w++ {
		wg.Go(func() {
			for j := range next {
				o := objs[j.i]
				res := &results[j.i]
				opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
				if r.dryRun {
					opts.DryRun = []string{metav1.DryRunAll}
				}
				out, err := e.dyn.Resource(gvr(o.key.kind)).Namespace(o.key.namespace).Apply(ctx, o.key.name, j.send, opts)
				if err != nil {
					res.Status, res.Message = projection.ResultSyncFailed, dry(r, safeAPIError(err))
					continue
				}
				res.Status = projection.ResultSynced
				switch {
				case j.heal:
					res.Message = "self-healed: live state had drifted from git"
				case j.created && out.GetGeneration() <= 1 && !out.GetCreationTimestamp().Time.Before(r.start.Add(-time.Second)):
					res.Message = "created"
				case j.created:
					res.Message = "adopted: applied to an existing object that was not tracked"
				default:
					res.Message = "configured"
				}
				if r.dryRun {
					res.Message = "would be " + res.Message
				}
				res.Message = dry(r, res.Message)
			}
		})
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	return results, desired
}

// subset reports whether every field of want is in have with the same
// value (lists must match element by element). Numbers compare by value.
func subset(want, have any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			hv, present := h[k]
			if !present {
				if wv == nil {
					continue
				}
				return false
			}
			if !subset(wv, hv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !subset(w[i], h[i]) {
				return false
			}
		}
		return true
	case int64, float64, int, int32:
		wf, ok1 := number(want)
		hf, ok2 := number(have)
		return ok1 && ok2 && wf == hf
	default:
		return want == have
	}
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int32:
		return float64(x), true
	}
	return 0, false
}

// safeAPIError is the API server's reason for refusing a request, or a
// generic text when it did not answer (the cause may hold a URL or a
// transport detail that is not the client's business).
func safeAPIError(err error) string {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		s := st.Status()
		if s.Reason != "" {
			return fmt.Sprintf("rejected by the API server (%s): %s", s.Reason, s.Message)
		}
		return "rejected by the API server: " + s.Message
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return "the run's time ran out before the API server answered"
	}
	return "the API server could not be reached"
}
