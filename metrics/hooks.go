package metrics

import (
	"strings"
	"time"

	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/projection"
)

// Sync phases, as Argo CD names a finished operation's phase.
const (
	PhaseSucceeded = "Succeeded"
	PhaseFailed    = "Failed"
	PhaseError     = "Error"
)

// AppSync records one sync or rollback of an App made through deployd
// (argocd_app_sync_total): phase is PhaseSucceeded when the API server
// took the write, PhaseFailed when it refused it, PhaseError when it could
// not be asked.
func (m *Metrics) AppSync(a *projection.App, phase string) {
	if m == nil || a == nil {
		return
	}
	m.appSync.WithLabelValues(a.Namespace, a.Name, a.Project, a.Destination().Server, phase).Inc()
}

// Engine run results (deployd_engine_runs_total).
const (
	RunSucceeded = "succeeded" // every declared object synced
	RunPartial   = "partial"   // the run completed with failed objects
	RunFailed    = "failed"    // the run could not complete
)

// EngineRun records one finished engine run: rep is its report (nil when
// err says why the run could not complete), took its duration, finished
// when it ended. The run counts by result; a run without failures sets
// the last-success time; and every App the report names counts one
// argocd_app_sync_total (Succeeded, or Failed when its object failed) and
// one argocd_app_reconcile observation of the run's duration.
//
// The engine's caller calls it once per run, dry runs excluded.
func (m *Metrics) EngineRun(rep *gitops.ReconcileReport, err error, took time.Duration, finished time.Time) {
	if m == nil {
		return
	}
	result := RunSucceeded
	switch {
	case err != nil || rep == nil:
		result = RunFailed
	case rep.Failed > 0:
		result = RunPartial
	}
	m.engineRuns.WithLabelValues(result).Inc()
	m.engineSeconds.Observe(took.Seconds())
	if result == RunSucceeded {
		m.engineLastSuccess.Set(float64(finished.UnixNano()) / 1e9)
	}
	if rep == nil {
		return
	}
	var snap *projection.Snapshot
	if m.src.Snapshot != nil {
		snap = m.src.Snapshot()
	}
	for _, r := range rep.Results {
		ns, name, ok := appResource(r.Resource)
		if !ok {
			continue
		}
		phase := PhaseSucceeded
		switch r.Status {
		case "SyncFailed":
			phase = PhaseFailed
		case "Synced":
		default:
			continue // pruned or left alone: not a sync of the App
		}
		project := "default"
		if snap != nil {
			if a := snap.Get(ns, name); a != nil {
				project = a.Project
			}
		}
		m.appSync.WithLabelValues(ns, name, project, m.src.ClusterServer, phase).Inc()
		m.reconcile.WithLabelValues(ns, m.src.ClusterServer).Observe(took.Seconds())
	}
}

// appResource reads the namespace and name of an App out of a report's
// resource ("hanzo.ai/v1/App/<namespace>/<name>").
func appResource(res string) (ns, name string, ok bool) {
	ki := projection.KindApp.Info()
	rest, found := strings.CutPrefix(res, ki.Group+"/"+ki.Version+"/"+ki.Name+"/")
	if !found {
		return "", "", false
	}
	ns, name, found = strings.Cut(rest, "/")
	if !found || ns == "" || name == "" || strings.Contains(name, "/") {
		return "", "", false
	}
	return ns, name, true
}

// ReleaseRefresh records one refresh of the release source: err nil when
// it succeeded (which sets the last-refresh time to at).
func (m *Metrics) ReleaseRefresh(err error, at time.Time) {
	if m == nil {
		return
	}
	if err != nil {
		m.releaseRefreshes.WithLabelValues("error").Inc()
		return
	}
	m.releaseRefreshes.WithLabelValues("ok").Inc()
	m.releaseLastSuccess.Set(float64(at.UnixNano()) / 1e9)
}
