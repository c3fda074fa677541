package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/hanzoai/deploy/gitops"
)

// LeaseConfig makes the engine one writer among replicas: each replica
// campaigns for a coordination.k8s.io/v1 Lease, and only its holder runs
// the engine. Nil in Config: this process runs the engine alone.
type LeaseConfig struct {
	// Namespace holds the Lease and the state ConfigMap (deployd's own).
	Namespace string
	// Name of the Lease and of the ConfigMap; "deployd-engine-<instance>"
	// when empty.
	Name string
	// Identity is this replica's name in the Lease (unique per process).
	Identity string
	// URL is where the other replicas reach this one's HTTP server, to
	// forward the requests only the leader carries out.
	URL string
	// Duration is how long a Lease holds without renewal (whole seconds, at
	// least 1); RenewDeadline how long the leader keeps trying to renew
	// before it stops (less than Duration); RetryPeriod how often a
	// candidate tries to take it.
	Duration, RenewDeadline, RetryPeriod time.Duration
}

// DefaultLease is Kubernetes' controllers' timing: 15 s, 10 s, 2 s.
func DefaultLease() LeaseConfig {
	return LeaseConfig{Duration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
}

// NewIdentity is a replica's identity: the host (the pod's name) and a
// random suffix, so a restarted process never mistakes the Lease its
// predecessor held for its own.
func NewIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "deployd"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}

func (l LeaseConfig) validate() error {
	switch {
	case len(validation.IsDNS1123Label(l.Namespace)) > 0:
		return bad("Lease", "lease namespace %q is not a namespace name (lowercase letters, digits and -, at most 63)", l.Namespace)
	case l.Identity == "":
		return bad("Lease", "lease identity is empty")
	case l.Duration < time.Second || l.Duration%time.Second != 0:
		return bad("Lease", "lease duration %s must be a whole number of seconds, at least 1s", l.Duration)
	case l.RenewDeadline <= 0 || l.RenewDeadline >= l.Duration:
		return bad("Lease", "lease renew deadline %s must be shorter than its duration %s", l.RenewDeadline, l.Duration)
	case l.RetryPeriod <= 0 || l.RetryPeriod >= l.RenewDeadline:
		return bad("Lease", "lease retry period %s must be shorter than the renew deadline %s", l.RetryPeriod, l.RenewDeadline)
	}
	return nil
}

// ErrNotLeader is a run or write asked of a replica that does not hold
// the Lease; its NotLeader method tells the routes so (they answer 503,
// to retry: another replica leads).
var ErrNotLeader error = notLeader{"this replica does not run the engine: another holds its Lease"}

// errLeadershipLost stops a write of a leader whose Lease is no longer
// certain.
var errLeadershipLost error = notLeader{"this replica lost the engine's Lease; the new leader carries on"}

type notLeader struct{ msg string }

func (e notLeader) Error() string { return e.msg }
func (notLeader) NotLeader() bool { return true }

// term is one holding of the Lease: ctx ends when it is lost.
type term struct {
	ctx   context.Context
	since time.Time
}

// campaign runs for the Lease until ctx ends: while this replica holds it,
// lead runs with a context that ends when the Lease is lost (the renewal
// failed for RenewDeadline) or ctx ends; then the replica campaigns again.
func (e *Engine) campaign(ctx context.Context, lead func(ctx context.Context)) {
	l := *e.cfg.Lease
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: l.Name, Namespace: l.Namespace},
		Client:     e.cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: l.Identity},
	}
	for ctx.Err() == nil {
		done := make(chan struct{})
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   l.Duration,
			RenewDeadline:   l.RenewDeadline,
			RetryPeriod:     l.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            l.Name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(tctx context.Context) {
					defer close(done)
					e.setTerm(&term{ctx: tctx, since: e.now().UTC()})
					e.log.Info("engine: this replica holds the Lease and runs the engine", "lease", l.Namespace+"/"+l.Name, "identity", l.Identity)
					lead(tctx)
				},
				OnStoppedLeading: func() {
					if e.setTerm(nil) {
						e.log.Warn("engine: this replica no longer holds the Lease; its runs stop", "lease", l.Namespace+"/"+l.Name, "identity", l.Identity)
					}
				},
				OnNewLeader: func(id string) {
					e.mu.Lock()
					e.leaseHolder = id
					e.mu.Unlock()
				},
			},
		})
		if err != nil { // validated in New
			e.log.Error("engine: leader election", "error", err.Error())
			return
		}
		e.mu.Lock()
		e.elector = le
		e.mu.Unlock()
		le.Run(ctx)
		// The lead goroutine ends with its term's context; wait for it so
		// two terms' loops never overlap in one process.
		select {
		case <-done:
		case <-time.After(l.RenewDeadline):
		}
		if ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(l.RetryPeriod):
			}
		}
	}
}

// setTerm records the current term (nil: none) and reports whether one
// ended.
func (e *Engine) setTerm(t *term) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	ended := e.term != nil && t == nil
	e.term = t
	return ended
}

// currentTerm is the term this replica holds, nil when it holds none.
func (e *Engine) currentTerm() *term {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.term != nil && e.term.ctx.Err() != nil {
		return nil
	}
	return e.term
}

// fenced reports, before each write, whether this replica may still write:
// always without a Lease; with one, while its term lasts and its last
// renewal is younger than RenewDeadline. A process that was paused (a
// stopped container, a long collection) past it writes nothing more until
// it holds the Lease again, even before its renewal loop notices.
func (e *Engine) fenced() error {
	if e.cfg.Lease == nil {
		return nil
	}
	e.mu.Lock()
	t, le := e.term, e.elector
	e.mu.Unlock()
	if t == nil || t.ctx.Err() != nil || le == nil || !le.IsLeader() {
		return errLeadershipLost
	}
	// Check fails when the last renewal this replica saw is older than
	// LeaseDuration plus the tolerance: with a negative one, RenewDeadline.
	if err := le.Check(e.cfg.Lease.RenewDeadline - e.cfg.Lease.Duration); err != nil {
		return errLeadershipLost
	}
	return nil
}

// Leader tells the routes where the engine runs: self when this process
// runs it (always without a Lease), else the Lease's holder as the state
// names it (its identity and the URL it published); an error when no
// replica holds the Lease now, or its record is not published yet (a new
// leader publishes it first thing). The URL is what the state ConfigMap
// says: the routes forward only to a URL among this deployd's peers.
func (e *Engine) Leader() (leader gitops.EngineLeader, self bool, err error) {
	if e.cfg.Lease == nil || e.currentTerm() != nil {
		return gitops.EngineLeader{}, true, nil
	}
	e.mu.Lock()
	holder := e.leaseHolder
	e.mu.Unlock()
	if holder == "" {
		return gitops.EngineLeader{}, false, errors.New("no replica holds the engine's Lease yet; try again in a few seconds")
	}
	st := e.store.get()
	if st.Leader == nil || st.Leader.Identity != holder || st.Leader.URL == "" {
		return gitops.EngineLeader{}, false, fmt.Errorf("the engine's leader (%s) is taking over; try again in a few seconds", holder)
	}
	return gitops.EngineLeader{Identity: holder, URL: st.Leader.URL, Since: st.Leader.Since}, false, nil
}

// Identity is this replica's identity in the Lease ("" without one).
func (e *Engine) Identity() string {
	if e.cfg.Lease == nil {
		return ""
	}
	return e.cfg.Lease.Identity
}

// follow keeps this replica's view of the repository (Desired, Manages:
// what the diff routes compare live objects with) at the revision the
// leader last applied: on a replica that does not lead, and on a leader
// that has not run yet (interval 0). It only reads git.
func (e *Engine) follow(ctx context.Context) {
	tick := time.NewTicker(e.cfg.Lease.RetryPeriod)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		want := e.state().Revision
		e.mu.Lock()
		have := e.view.target
		e.mu.Unlock()
		if want == "" || want == have {
			continue // a leader's runs set the view as they go
		}
		if err := e.refreshView(ctx, want); err != nil && ctx.Err() == nil {
			e.log.Debug("engine: the view of the repository was not refreshed", "error", err.Error())
		}
	}
}

// refreshView renders the ref as fetched now (the cached commit when git
// is down) and keeps what the policy admits as the desired state; target
// is the leader's revision it follows.
func (e *Engine) refreshView(ctx context.Context, target string) error {
	if !e.runMu.TryLock() {
		return nil // a run is under way: it sets the view
	}
	defer e.runMu.Unlock()
	sha, _, err := e.revisionOf(ctx)
	if err != nil {
		return err
	}
	docs, err := e.render(ctx, sha)
	if err != nil {
		return err
	}
	adm := e.admit(docs, run{sha: sha})
	desired := make(map[objKey]map[string]any, len(adm.admitted))
	for _, o := range adm.admitted {
		e.desiredObject(o.obj)
		desired[o.key] = o.obj.Object
	}
	e.mu.Lock()
	e.desired, e.files, e.view = desired, adm.files, view{sha: sha, target: target}
	e.mu.Unlock()
	return nil
}
