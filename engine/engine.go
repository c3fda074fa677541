package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

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
	src    *Source
	policy Policy
	now    func() time.Time

	runMu sync.Mutex // one run at a time; guards rendered
	// rendered caches the last rendering, by revision.
	rendered struct {
		sha  string
		docs []Doc
	}

	trigger chan string // size 1: triggers coalesce

	mu        sync.Mutex
	onRun     func(*projection.ReconcileReport, error, time.Duration, time.Time)
	flights   [2]*flight // in flight: [0] applies, [1] dry runs
	runs      int64
	lastRun   *projection.EngineRun
	nextRunAt *time.Time
	desired   map[objKey]map[string]any
	files     map[objKey]string // the file that declared each App

	wbMu   sync.Mutex // one write-back at a time
	histMu sync.Mutex // guards history
	// history caches History's answers at one head of the branch, by file
	// and App; a new head empties it.
	history struct {
		head  string
		byApp map[string][]projection.GitCommit
	}
	// beforePush, when set (by tests), runs before each push.
	beforePush func(attempt int)
}

type flight struct {
	joined int // callers waiting on it (guarded by Engine.mu)
	done   chan struct{}
	report *projection.ReconcileReport
	err    error
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
	rc = rest.CopyConfig(rc)
	// The applier bounds its own concurrency (applyWorkers); client-go's
	// default 5 requests/s would make a cold run of a fleet take minutes.
	if rc.QPS == 0 && rc.RateLimiter == nil {
		rc.QPS, rc.Burst = -1, 0
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Engine{
		cfg:     cfg,
		log:     log,
		dyn:     dyn,
		src:     src,
		policy:  Policy{Allow: cfg.Allow, Namespaces: cfg.Namespaces, DefaultNamespace: cfg.Namespace},
		now:     time.Now,
		trigger: make(chan string, 1),
	}, nil
}

// OnRun sets a function called once per finished run that was not a dry
// run, whatever its trigger and however many callers shared it, with its
// report (nil when err says why it could not complete), its duration and
// its end (the metrics' hook). Set it before the first run.
func (e *Engine) OnRun(f func(rep *projection.ReconcileReport, err error, took time.Duration, finished time.Time)) {
	e.mu.Lock()
	e.onRun = f
	e.mu.Unlock()
}

// Config is the engine's configuration (defaults filled in).
func (e *Engine) Config() Config { return e.cfg }

// Reconcile runs the engine now, or joins the run of the same kind (dry or
// not) in flight, and answers its report. The run does not end when ctx
// does; only this caller's wait does. An error means the run could not
// complete (fetch, render or listing failed); its text is safe for a client.
func (e *Engine) Reconcile(ctx context.Context, trigger string, dryRun bool) (*projection.ReconcileReport, error) {
	i := 0
	if dryRun {
		i = 1
	}
	e.mu.Lock()
	f := e.flights[i]
	if f == nil {
		f = &flight{done: make(chan struct{})}
		e.flights[i] = f
		runCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), runTimeout)
		go func() {
			defer cancel()
			defer func() {
				// A run that panics is a bug: its callers get an error, the
				// process keeps serving.
				if p := recover(); p != nil {
					e.log.Error("engine run panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
					f.report, f.err = nil, errors.New("the engine failed internally; see the server log")
					e.mu.Lock()
					e.flights[i] = nil
					e.mu.Unlock()
					close(f.done)
				}
			}()
			f.report, f.err = e.runOnce(runCtx, trigger, dryRun)
			e.mu.Lock()
			e.flights[i] = nil
			e.mu.Unlock()
			close(f.done)
		}()
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

// Trigger queues a run and returns at once; triggers made while one is
// queued coalesce into it. Run executes it.
func (e *Engine) Trigger(trigger string) {
	select {
	case e.trigger <- trigger:
	default:
	}
}

// Run is the self-heal loop: it reconciles every Config.Interval (first at
// once) and whenever Trigger is called, until ctx ends; then it returns.
// With a zero interval it runs only on triggers.
func (e *Engine) Run(ctx context.Context) {
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
			trigger = projection.TriggerInterval
		case trigger = <-e.trigger:
		}
		// Errors are in the run's audit line and in Status.
		_, _ = e.Reconcile(ctx, trigger, false)
		if timer != nil {
			timer.Reset(e.cfg.Interval)
			next := e.now().Add(e.cfg.Interval).UTC()
			e.mu.Lock()
			e.nextRunAt = &next
			e.mu.Unlock()
		}
	}
}

// Status is the engine's state for GET /v1/deploy/gitops.
func (e *Engine) Status() projection.EngineStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := projection.EngineStatus{Enabled: true, Source: e.cfg.Source(), Revision: e.src.Revision(), Runs: e.runs}
	if e.lastRun != nil {
		r := *e.lastRun
		st.LastRun = &r
	}
	if e.nextRunAt != nil {
		t := *e.nextRunAt
		st.NextRunAt = &t
	}
	return st
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
