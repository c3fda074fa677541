package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/projection"
)

// runTimeout bounds one run; a run is detached from its callers' contexts
// (they share it), so it needs its own bound.
const runTimeout = 10 * time.Minute

// Engine reconciles the cluster to the repository. Its methods are safe for
// concurrent use.
type Engine struct {
	cfg    Config
	log    *slog.Logger
	dyn    dynamic.Interface
	cs     kubernetes.Interface // the Lease and the state (nil without a Lease)
	src    *Source
	policy Policy
	now    func() time.Time

	runMu sync.Mutex // one run (or view refresh) at a time; guards rendered
	// rendered caches the last rendering, by revision.
	rendered struct {
		sha  string
		docs []Doc
	}

	trigger chan string // size 1: triggers coalesce

	mu      sync.Mutex
	onRun   func(*gitops.ReconcileReport, error, time.Duration, time.Time)
	flights [2]flightSlot // [0] applies, [1] dry runs
	// st is the state this process keeps: the whole of it without a Lease;
	// with one, the leader's copy of what it publishes to store.
	st      state
	view    view
	desired map[objKey]map[string]any
	files   map[objKey]string // the file that declared each App

	// With a Lease: the state in the cluster, the elector, the holder it
	// last saw, and this replica's term while it leads.
	store       *stateStore
	elector     *leaderelection.LeaderElector
	leaseHolder string
	term        *term

	// hook, when set (by tests), runs at the start of each stage of a run
	// ("render", "apply" in each apply worker, "prune").
	hook func(stage string)

	// git writes rollbacks and releases to the repository and reads the
	// history of what it declares.
	git *gitWriter
}

// view is which revision desired and files were computed from, and the
// leader's revision a follower computed them for.
type view struct{ sha, target string }

// flightSlot holds the run in flight of one kind and the one queued behind
// it. A caller joins the run in flight only while it has not begun to
// fetch; after that it joins (or queues) the next, which fetches after the
// caller arrived.
type flightSlot struct {
	current, next *flight
}

type flight struct {
	trigger  string
	fetching bool // the run began its fetch (guarded by Engine.mu)
	joined   int  // callers waiting on it (guarded by Engine.mu)
	done     chan struct{}
	report   *gitops.ReconcileReport
	err      error
}

type objKey struct {
	kind      projection.Kind
	namespace string
	name      string
}

// New builds an engine from a valid configuration and a rest config for the
// cluster it writes to. It makes no request: the first run fetches.
func New(cfg Config, rc *rest.Config, log *slog.Logger) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rc = rest.CopyConfig(rc)
	// The applier bounds its own concurrency (applyWorkers); client-go's
	// default 5 requests/s would make a cold run of a fleet take minutes.
	if rc.QPS == 0 && rc.RateLimiter == nil {
		rc.QPS, rc.Burst = -1, 0
	}
	if cfg.Lease != nil {
		// The API server's audit log names the replica behind every write.
		rc.UserAgent = "deployd-engine/" + cfg.Lease.Identity
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	var cs kubernetes.Interface
	if cfg.Lease != nil {
		if cs, err = kubernetes.NewForConfig(rc); err != nil {
			return nil, fmt.Errorf("clientset: %w", err)
		}
	}
	return NewForClients(cfg, dyn, cs, log)
}

// NewForClients builds an engine that writes through dyn; cs holds the
// Lease and the state and is needed only with cfg.Lease (nil otherwise).
// It makes no request: the first run fetches.
func NewForClients(cfg Config, dyn dynamic.Interface, cs kubernetes.Interface, log *slog.Logger) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Lease != nil {
		if cs == nil {
			return nil, &ConfigError{Field: "Lease", Msg: "a Lease needs a clientset to hold it"}
		}
		l := *cfg.Lease
		if l.Name == "" {
			l.Name = LeaseName(cfg.Instance)
		}
		cfg.Lease = &l
	}
	if cfg.CacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		cfg.CacheDir = filepath.Join(base, "deployd", "engine", cfg.Instance)
	}
	src, err := NewSource(cfg.Repo, cfg.Ref, cfg.CacheDir, cfg.Auth, cfg.AuthUser)
	if err != nil {
		return nil, &ConfigError{Field: "Auth", Msg: err.Error()} // the URL passed Validate
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{
		cfg:     cfg,
		log:     log,
		dyn:     dyn,
		src:     src,
		policy:  Policy{Allow: cfg.Allow, Namespaces: cfg.Namespaces, DefaultNamespace: cfg.Namespace},
		now:     time.Now,
		trigger: make(chan string, 1),
		git:     &gitWriter{cfg: cfg, auth: src.auth, now: time.Now},
	}
	if cfg.Lease != nil {
		e.cs = cs
		e.store = newStateStore(cs, cfg.Lease.Namespace, cfg.Lease.Name)
	}
	return e, nil
}

// OnRun sets a function called once per finished run that was not a dry
// run, whatever its trigger and however many callers shared it, with its
// report (nil when err says why it could not complete), its duration and
// its end (the metrics' hook). Set it before the first run.
func (e *Engine) OnRun(f func(rep *gitops.ReconcileReport, err error, took time.Duration, finished time.Time)) {
	e.mu.Lock()
	e.onRun = f
	e.mu.Unlock()
}

// Config is the engine's configuration (defaults filled in).
func (e *Engine) Config() Config { return e.cfg }

// SuspendedError is a reconcile request refused while the engine is
// suspended; its text names who suspended it and when.
type SuspendedError struct{ gitops.EngineSuspension }

func (e *SuspendedError) Error() string {
	return fmt.Sprintf("the engine is suspended (by %s at %s): resume it with POST /v1/deploy/gitops/resume",
		e.By, e.At.UTC().Format(time.RFC3339))
}

// Conflict marks the refusal as a 409 for the routes.
func (e *SuspendedError) Conflict() bool { return true }

// Reconcile runs the engine now and answers the run's report: it joins the
// run of the same kind (dry or not) in flight when that run has not begun
// to fetch, else the run queued behind it, so the revision it applies was
// fetched after the call. The run does not end when ctx does; only this
// caller's wait does. An error means the run could not complete (render or
// listing failed, or git failed with no commit cached); its text is safe
// for a client. With a Lease, only the leader runs (ErrNotLeader
// elsewhere); while the engine is suspended a request is refused
// (*SuspendedError) and interval and webhook runs are skipped.
func (e *Engine) Reconcile(ctx context.Context, trigger string, dryRun bool) (*gitops.ReconcileReport, error) {
	if e.cfg.Lease != nil && e.currentTerm() == nil {
		return nil, ErrNotLeader
	}
	if su := e.suspension(); su != nil {
		if trigger == gitops.TriggerRequest {
			return nil, &SuspendedError{*su}
		}
		return nil, errSkipped
	}
	i := 0
	if dryRun {
		i = 1
	}
	e.mu.Lock()
	sl := &e.flights[i]
	var f *flight
	switch {
	case sl.current != nil && !sl.current.fetching:
		f = sl.current
	case sl.next != nil:
		f = sl.next
	default:
		f = &flight{trigger: trigger, done: make(chan struct{})}
		if sl.current == nil {
			sl.current = f
			go e.fly(i, f, dryRun)
		} else {
			sl.next = f // started when the run in flight ends
		}
	}
	f.joined++
	e.mu.Unlock()
	select {
	case <-f.done:
		return f.report, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// errSkipped is an interval or webhook run skipped while suspended.
var errSkipped = errors.New("the engine is suspended")

// fly runs f, then each run queued behind it, one after another.
func (e *Engine) fly(i int, f *flight, dryRun bool) {
	for f != nil {
		parent, err := e.runParent()
		if err == nil {
			ctx, cancel := context.WithTimeout(parent, runTimeout)
			f.report, f.err = e.runOnce(ctx, f, dryRun)
			cancel()
		} else {
			f.err = err
		}
		e.mu.Lock()
		sl := &e.flights[i]
		sl.current, sl.next = sl.next, nil
		next := sl.current
		e.mu.Unlock()
		close(f.done)
		f = next
	}
}

// runParent is the context a run lives in: without a Lease, one detached
// from every caller (they share the run); with one, the term's, which ends
// when the Lease is lost, so a former leader's run stops before its next
// write.
func (e *Engine) runParent() (context.Context, error) {
	if e.cfg.Lease == nil {
		return context.Background(), nil
	}
	t := e.currentTerm()
	if t == nil {
		return nil, ErrNotLeader
	}
	return t.ctx, nil
}

// suspension is the engine's suspension, nil when it runs.
func (e *Engine) suspension() *gitops.EngineSuspension {
	st := e.state()
	return st.Suspended
}

// Trigger queues a run and returns at once; triggers made while one is
// queued coalesce into it. Run executes it, after any run in flight.
func (e *Engine) Trigger(trigger string) {
	select {
	case e.trigger <- trigger:
	default:
	}
}

// Run runs the engine until ctx ends. Without a Lease this process runs
// the loop; with one it campaigns for the Lease and runs the loop while it
// holds it, and keeps its view of the repository (Desired, Manages) at the
// leader's revision while it does not.
func (e *Engine) Run(ctx context.Context) {
	if e.cfg.Lease == nil {
		e.loop(ctx)
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { e.store.watch(ctx) })
	wg.Go(func() { e.follow(ctx) })
	e.campaign(ctx, e.lead)
	wg.Wait()
}

// lead is one term: it takes over the state the last leader kept (runs,
// suspension, staleness), publishes itself as leader, and runs the loop
// until the term ends.
func (e *Engine) lead(ctx context.Context) {
	st, err := e.store.read(ctx)
	for err != nil && ctx.Err() == nil {
		e.log.Warn("engine: the new leader cannot read the engine's state; retrying", "error", err.Error())
		select {
		case <-ctx.Done():
		case <-time.After(e.cfg.Lease.RetryPeriod):
		}
		st, err = e.store.read(ctx)
	}
	if ctx.Err() != nil {
		return
	}
	l := e.cfg.Lease
	st.Leader = &leaderRecord{Identity: l.Identity, URL: l.URL, Since: e.now().UTC().Truncate(time.Second)}
	st.NextRunAt = nil
	e.mu.Lock()
	e.st = st
	e.mu.Unlock()
	e.publish(ctx)
	e.loop(ctx)
}

// loop is the self-heal loop: it reconciles every Config.Interval (first
// at once; from one interval run's start to the next's) and whenever
// Trigger is called, until ctx ends. With a zero interval it runs only on
// triggers.
func (e *Engine) loop(ctx context.Context) {
	var timer *time.Timer
	if e.cfg.Interval > 0 {
		timer = time.NewTimer(0)
		defer timer.Stop()
	}
	for {
		var tick <-chan time.Time
		if timer != nil {
			tick = timer.C
		}
		trigger := ""
		select {
		case <-ctx.Done():
			return
		case <-tick:
			trigger = gitops.TriggerInterval
		case trigger = <-e.trigger:
		}
		if timer != nil && trigger == gitops.TriggerInterval {
			// Intervals run start to start; the run publishes when the
			// next one is due.
			timer.Reset(e.cfg.Interval)
			next := e.now().Add(e.cfg.Interval).UTC()
			e.mu.Lock()
			e.st.NextRunAt = &next
			e.mu.Unlock()
		}
		// Errors are in the run's audit line and in Status.
		if _, err := e.Reconcile(ctx, trigger, false); errors.Is(err, errSkipped) {
			e.log.Info("engine run skipped: the engine is suspended", "trigger", trigger)
			if trigger == gitops.TriggerInterval {
				e.publish(ctx) // the next run's time
			}
		}
	}
}

// state is the engine's state: the cluster's copy with a Lease (every
// replica answers alike), this process's without.
func (e *Engine) state() state {
	if e.store != nil {
		return e.store.get()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.st.clone()
}

// publish writes the leader's state to the cluster (nothing without a
// Lease: the state is this process's). A failure is logged; the next run
// publishes again.
func (e *Engine) publish(ctx context.Context) {
	if e.store == nil || e.fenced() != nil {
		return
	}
	e.mu.Lock()
	st := e.st.clone()
	e.mu.Unlock()
	if err := e.store.write(ctx, st); err != nil && ctx.Err() == nil {
		e.log.Warn("engine: the state was not published", "error", err.Error())
	}
}

// Status is the engine's state for GET /v1/deploy/gitops.
func (e *Engine) Status() gitops.EngineStatus {
	st := e.state()
	out := gitops.EngineStatus{Enabled: true, Source: e.cfg.Source(), Revision: st.Revision, Runs: st.Runs,
		LastRun: st.LastRun, NextRunAt: st.NextRunAt, Stale: st.Stale, Suspended: st.Suspended, State: gitops.EngineStateOK}
	if st.Leader != nil {
		out.Leader = &gitops.EngineLeader{Identity: st.Leader.Identity, Since: st.Leader.Since, URL: st.Leader.URL}
	}
	switch {
	case st.Suspended != nil:
		out.State = gitops.EngineStateSuspended
	case st.Stale != nil:
		out.State = gitops.EngineStateStale
	}
	return out
}

// Suspend stops interval and webhook runs and refuses reconcile requests
// until Resume; by names who asked. It is kept in the cluster with a Lease
// (every replica and every restart sees it), so only the leader changes it
// (ErrNotLeader elsewhere). It answers the status after the change.
func (e *Engine) Suspend(ctx context.Context, by string) (gitops.EngineStatus, error) {
	return e.setSuspension(ctx, &gitops.EngineSuspension{By: by, At: e.now().UTC().Truncate(time.Second)})
}

// Resume undoes Suspend and queues a run.
func (e *Engine) Resume(ctx context.Context) (gitops.EngineStatus, error) {
	st, err := e.setSuspension(ctx, nil)
	if err == nil {
		e.Trigger(gitops.TriggerRequest)
	}
	return st, err
}

func (e *Engine) setSuspension(ctx context.Context, su *gitops.EngineSuspension) (gitops.EngineStatus, error) {
	if e.cfg.Lease != nil {
		t := e.currentTerm()
		if t == nil {
			return gitops.EngineStatus{}, ErrNotLeader
		}
		var cancel context.CancelFunc
		ctx, cancel = joinContexts(ctx, t.ctx)
		defer cancel()
	}
	e.mu.Lock()
	if su != nil && e.st.Suspended != nil {
		su = e.st.Suspended // already suspended: the first suspension stands
	}
	e.st.Suspended = su
	st := e.st.clone()
	e.mu.Unlock()
	if e.store != nil {
		if err := e.fenced(); err != nil {
			return gitops.EngineStatus{}, err
		}
		if err := e.store.write(ctx, st); err != nil {
			return gitops.EngineStatus{}, err
		}
	}
	return e.Status(), nil
}

// joinContexts is a context that ends when either does.
func joinContexts(a, b context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	return ctx, func() { stop(); cancel() }
}

// Desired is the object as the last rendering declared it (with the
// default namespace and the instance label filled in), when it passed the
// policy. The caller owns the copy.
func (e *Engine) Desired(kind projection.Kind, namespace, name string) (map[string]any, bool) {
	e.mu.Lock()
	obj, ok := e.desired[objKey{kind, namespace, name}]
	e.mu.Unlock()
	if !ok {
		return nil, false
	}
	return runtime.DeepCopyJSON(obj), true
}

// Instance is the engine's instance: the value of the tracking label on
// every object it manages.
func (e *Engine) Instance() string { return e.cfg.Instance }

// SetStageHook sets a function run at the start of each stage of a run
// ("render"; "apply" in each apply worker, once per object; "prune"). For
// tests that need a stage to fail; set it before the first run.
func (e *Engine) SetStageHook(f func(stage string)) {
	e.mu.Lock()
	e.hook = f
	e.mu.Unlock()
}

func (e *Engine) stage(name string) {
	e.mu.Lock()
	h := e.hook
	e.mu.Unlock()
	if h != nil {
		h(name)
	}
}
