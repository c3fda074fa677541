package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/projection/drift"
)

// applyWorkers bounds the applies a run has in flight at once.
const applyWorkers = 16

// admittedObj is a rendered object that passed the policy.
type admittedObj struct {
	key      objKey
	obj      *unstructured.Unstructured
	resource string
}

// liveSet is what a run found live: the objects of the allowed kinds
// carrying this instance's label (ours), and the instance named by the
// label of those carrying another's (theirs).
type liveSet struct {
	ours   map[objKey]*unstructured.Unstructured
	theirs map[objKey]string
}

// listLive lists the live objects of the allowed kinds that carry a
// tracking label (any instance's): one request per kind, whatever the
// fleet's size. A kind whose CRD is not served has none.
func (e *Engine) listLive(ctx context.Context) (liveSet, error) {
	live := liveSet{ours: map[objKey]*unstructured.Unstructured{}, theirs: map[objKey]string{}}
	for _, k := range e.cfg.Allow {
		list, err := e.dyn.Resource(k.GVR()).List(ctx, metav1.ListOptions{LabelSelector: projection.LabelEngineInstance})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return live, fmt.Errorf("list live %s objects: %s", k, safeAPIError(err))
		}
		for i := range list.Items {
			u := &list.Items[i]
			key := objKey{k, u.GetNamespace(), u.GetName()}
			if inst := u.GetLabels()[projection.LabelEngineInstance]; inst == e.cfg.Instance {
				live.ours[key] = u
			} else {
				live.theirs[key] = inst
			}
		}
	}
	return live, nil
}

// prepare strips what an apply must not carry from a rendered object: what
// the cluster manages (drift.Normalize), which is also what a comparison
// ignores.
func prepare(u *unstructured.Unstructured) {
	u.Object = drift.Normalize(u.Object)
}

// desiredObject turns an admitted object into its desired state: prepared,
// with the instance label. It answers the hash of the rendered object.
func (e *Engine) desiredObject(u *unstructured.Unstructured) string {
	prepare(u)
	hash := desiredHash(u)
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[projection.LabelEngineInstance] = e.cfg.Instance
	u.SetLabels(labels)
	return hash
}

// desiredHash is a hash of the object as rendered (after policy filled its
// namespace): it changes exactly when the desired state does.
func desiredHash(u *unstructured.Unstructured) string {
	b, _ := json.Marshal(u.Object) // map keys are sorted: canonical
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// applyJob is one object to send.
type applyJob struct {
	i       int // its index in plan.objs and in the results
	send    *unstructured.Unstructured
	created bool
	heal    bool
}

// applyPlan is what a run sends: the objects whose desired state changed or
// whose live state drifted, and the verdicts reached without a request.
type applyPlan struct {
	objs    []admittedObj
	jobs    []applyJob
	results []gitops.ReconcileResult // one per obj, filled by send
	held    []gitops.ReconcileResult // owned by another instance, or skipped
	skipped int                      // how many of held are Skipped
	desired map[objKey]map[string]any
}

// plan decides, for every admitted object, whether to send it. An object
// labelled for another instance is SyncFailed and untouched; one whose
// live copy carries reconcile: disabled is Skipped; an unchanged one is
// Synced "unchanged".
func (e *Engine) plan(r run, objs []admittedObj, live liveSet) applyPlan {
	p := applyPlan{desired: make(map[objKey]map[string]any, len(objs))}
	for _, o := range objs {
		u := o.obj
		hash := e.desiredObject(u)
		p.desired[o.key] = u.DeepCopy().Object
		if owner, ok := live.theirs[o.key]; ok {
			p.held = append(p.held, failed(o.resource, r, fmt.Sprintf(
				"owned by engine instance %q (label %s): not touched; remove it from one of the two repositories", owner, projection.LabelEngineInstance)))
			continue
		}
		l := live.ours[o.key]
		var lann map[string]string
		if l != nil {
			lann = l.GetAnnotations()
		}
		if lann[projection.AnnotationReconcile] == projection.Disabled {
			p.held = append(p.held, gitops.ReconcileResult{Resource: o.resource, Status: gitops.ResultSkipped,
				Message: dry(r, "skipped: the live object has "+projection.AnnotationReconcile+": disabled")})
			p.skipped++
			continue
		}
		ann := u.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
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

		i := len(p.objs)
		p.objs = append(p.objs, o)
		res := gitops.ReconcileResult{Resource: o.resource}
		if sameDesired && !drift.Drifted(l.Object, u.Object) {
			res.Status, res.Message = gitops.ResultSynced, dry(r, "unchanged")
		} else {
			p.jobs = append(p.jobs, applyJob{i: i, send: u, created: l == nil, heal: sameDesired})
		}
		p.results = append(p.results, res)
	}
	return p
}

// send applies the plan's jobs, up to applyWorkers at once, and answers a
// result for every planned object. A panic in a worker fails the run (the
// other objects are still sent; the next run sends this one again).
func (e *Engine) send(ctx context.Context, r run, p applyPlan) ([]gitops.ReconcileResult, error) {
	results := p.results
	var panicked atomic.Pointer[string]
	var wg sync.WaitGroup
	next := make(chan applyJob)
	for w := 0; w < min(applyWorkers, len(p.jobs)); w++ {
		wg.Go(func() {
			for j := range next {
				func() {
					defer func() {
						if v := recover(); v != nil {
							msg := fmt.Sprint(v)
							panicked.CompareAndSwap(nil, &msg)
							e.log.Error("engine apply worker panicked", "id", r.id, "resource", p.objs[j.i].resource, "panic", msg, "stack", string(debug.Stack()))
							results[j.i].Status, results[j.i].Message = gitops.ResultSyncFailed, dry(r, "the engine failed internally while applying it")
						}
					}()
					e.stage("apply")
					e.applyOne(ctx, r, p.objs[j.i], j, &results[j.i])
				}()
			}
		})
	}
	for _, j := range p.jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	if panicked.Load() != nil {
		return nil, errInternal
	}
	return results, nil
}

// applyOne sends one object with server-side apply and words its result.
func (e *Engine) applyOne(ctx context.Context, r run, o admittedObj, j applyJob, res *gitops.ReconcileResult) {
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	if r.dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if ctx.Err() != nil { // the run's time, or the leader's term, is over
		res.Status, res.Message = gitops.ResultSyncFailed, dry(r, safeAPIError(ctx.Err()))
		return
	}
	if err := e.fenced(); err != nil {
		res.Status, res.Message = gitops.ResultSyncFailed, dry(r, err.Error())
		return
	}
	out, err := e.dyn.Resource(o.key.kind.GVR()).Namespace(o.key.namespace).Apply(ctx, o.key.name, j.send, opts)
	if err != nil {
		res.Status, res.Message = gitops.ResultSyncFailed, dry(r, safeAPIError(err))
		return
	}
	res.Status = gitops.ResultSynced
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
