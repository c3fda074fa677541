package handlers

import (
	"context"

	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/projection"
)

// Engine is the git → cluster engine as the routes see it (implemented by
// package engine, wired by cmd/deployd). Nil in Deps means disabled.
type Engine interface {
	// Reconcile runs the engine now, or joins the run of the same kind in
	// flight, and answers its report. An error means the run could not
	// complete (the source could not be fetched, the rendering failed); its
	// text is safe for a client and names the file and line where it can.
	Reconcile(ctx context.Context, trigger string, dryRun bool) (*gitops.ReconcileReport, error)
	// Trigger queues a run and returns at once (the webhook's path).
	Trigger(trigger string)
	// Status is the engine's state for GET /v1/deploy/gitops.
	Status() gitops.EngineStatus
	// Desired is the object as the last rendering declared it, when the
	// engine manages it.
	Desired(kind projection.Kind, namespace, name string) (map[string]any, bool)
	// Manages reports whether the last rendering declared the App, and the
	// file (relative to the repository root) that declares it.
	Manages(namespace, name string) (file string, ok bool)
	// PushEnabled reports whether rollbacks and releases are commits.
	PushEnabled() bool
	// WriteTag commits the App's new tag to its file, pushes it and
	// reconciles; it answers the commit's SHA, "" when the tag is already
	// the declared one. An error's text is safe for a client; an error with
	// a Conflict() bool method answering true is a 409, one with Invalid()
	// a 400.
	WriteTag(ctx context.Context, w gitops.TagWrite) (string, error)
	// History is the commits that touched the App's file, newest first.
	History(ctx context.Context, namespace, name string) ([]gitops.GitCommit, error)
	// Instance is the value of the tracking label on the objects the
	// engine manages: an App carrying it is managed, from the first
	// request after start.
	Instance() string
	// Leader says where the engine runs: self when this process runs it,
	// else the replica that does, by its identity and the URL it published
	// (the routes forward the requests only it carries out, and only to a
	// URL among the peers); an error (safe for a client) while no replica
	// does.
	Leader() (leader gitops.EngineLeader, self bool, err error)
	// Suspend and Resume stop and restart the engine's interval and
	// webhook runs (kept in the cluster); they answer the status after.
	Suspend(ctx context.Context, by string) (gitops.EngineStatus, error)
	Resume(ctx context.Context) (gitops.EngineStatus, error)
}
