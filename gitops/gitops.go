// Package gitops holds the engine's wire types: what a run reports, the
// engine's status, a write-back, a commit of the manifest repository. The
// engine (package engine) fills them; the routes (package handlers), the
// metrics and the command line serve and read them. The labels and
// annotations the engine writes on objects, which the fold reads back, are
// projection's (projection/engine.go), with EngineSource, the repository a
// run reads.
package gitops

import (
	"time"

	"github.com/hanzoai/deploy/projection"
)

// The statuses of a ReconcileResult.
const (
	ResultSynced       = "Synced"
	ResultPruned       = "Pruned"
	ResultSyncFailed   = "SyncFailed"
	ResultPruneSkipped = "PruneSkipped"
	// ResultSkipped is an object the engine leaves alone because the live
	// one carries AnnotationReconcile: disabled (a hotfix); it is neither
	// applied nor pruned.
	ResultSkipped = "Skipped"
)

// ReconcileResult is one object's outcome in a run. Resource is spelled
// group/version/kind/namespace/name (core group and cluster scope empty).
type ReconcileResult struct {
	Message  string `json:"message"`
	Resource string `json:"resource"`
	Status   string `json:"status"`
}

// ReconcileReport is the answer of POST /v1/deploy/reconcile (see the
// engine package). Its fields are in the order of their JSON keys, which the contract
// wants sorted.
type ReconcileReport struct {
	// Cluster names the cluster the engine applies to, when deployd
	// serves several; empty with one.
	Cluster  string                  `json:"cluster,omitempty"`
	Declared int                     `json:"declared"`
	Failed   int                     `json:"failed"`
	Instance string                  `json:"instance"`
	Prune    bool                    `json:"prune"`
	Pruned   int                     `json:"pruned"`
	Results  []ReconcileResult       `json:"results"`
	Revision string                  `json:"revision"`
	Source   projection.EngineSource `json:"source"`
	Synced   int                     `json:"synced"`
}

// The triggers of an engine run.
const (
	TriggerRequest  = "request"
	TriggerInterval = "interval"
	TriggerWebhook  = "webhook"
)

// EngineRun summarises one finished run for GET /v1/deploy/gitops.
type EngineRun struct {
	ID         string    `json:"id"`
	Trigger    string    `json:"trigger"`
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
	Declared   int       `json:"declared"`
	Synced     int       `json:"synced"`
	Failed     int       `json:"failed"`
	Pruned     int       `json:"pruned"`
	// Error is a safe reason when the run could not complete (fetch or
	// render failed); empty otherwise.
	Error string `json:"error,omitempty"`
}

// EngineStatus is the engine's state as GET /v1/deploy/gitops reports it.
type EngineStatus struct {
	// Cluster names the cluster the engine applies to, when deployd
	// serves several; empty with one.
	Cluster string                  `json:"cluster,omitempty"`
	Enabled bool                    `json:"enabled"`
	Source  projection.EngineSource `json:"source"`
	// Revision is the SHA of the last good fetch ("" before one).
	Revision string `json:"revision"`
	// Runs counts runs since start.
	Runs      int64      `json:"runs"`
	LastRun   *EngineRun `json:"lastRun"`
	NextRunAt *time.Time `json:"nextRunAt"`
	// State is EngineStateOK, EngineStateStale or EngineStateSuspended; empty when the
	// engine is disabled.
	State string `json:"state,omitempty"`
	// Leader is the replica that runs the engine (the holder of its Lease);
	// nil while none does, and when one process runs it alone.
	Leader *EngineLeader `json:"leader,omitempty"`
	// Stale is set while the repository cannot be fetched: runs heal from
	// the last good commit meanwhile.
	Stale *EngineStale `json:"stale,omitempty"`
	// Suspended is set while interval and webhook runs are skipped.
	Suspended *EngineSuspension `json:"suspended,omitempty"`
}

// The states of EngineStatus.State.
const (
	EngineStateOK        = "ok"
	EngineStateStale     = "stale"
	EngineStateSuspended = "suspended"
)

// EngineLeader is the replica holding the engine's Lease.
type EngineLeader struct {
	Identity string    `json:"identity"`
	Since    time.Time `json:"since"`
	// URL is where the other replicas reach it; never served.
	URL string `json:"-"`
}

// EngineStale is a fetch that has been failing since Since.
type EngineStale struct {
	Since time.Time `json:"since"`
	Error string    `json:"error"`
}

// EngineSuspension is who suspended the engine and when.
type EngineSuspension struct {
	By string    `json:"by"`
	At time.Time `json:"at"`
}

// TagWrite is a write-back (see the engine package): set an App's spec.image.tag
// in the file of the engine's repository that declares it.
type TagWrite struct {
	Namespace, Name, Tag string
	// Verb is "rollback" or "release": it words the commit message.
	Verb        string
	AuthorName  string
	AuthorEmail string
	// RequestID goes into the message's Request-Id trailer.
	RequestID string
}

// GitCommit is one commit of the engine's repository that touched an App's
// file, for its history.
type GitCommit struct {
	SHA     string
	Author  string // "Name <email>"
	Date    time.Time
	Message string
	// Tag is the App's spec.image.tag as the commit declares it.
	Tag string
}
