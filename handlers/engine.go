package handlers

import (
	"context"

	"github.com/hanzoai/deploy/projection"
)

// Engine is the git → cluster engine as the routes see it (implemented by
// package engine, wired by cmd/deployd). Nil in Deps means disabled.
type Engine interface {
	// Reconcile runs the engine now, or joins the run of the same kind in
	// flight, and answers its report. An error means the run could not
	// complete (the source could not be fetched, the rendering failed); its
	// text is safe for a client and names the file and line where it can.
	Reconcile(ctx context.Context, trigger string, dryRun bool) (*projection.ReconcileReport, error)
	// Trigger queues a run and returns at once (the webhook's path).
	Trigger(trigger string)
	// Status is the engine's state for GET /v1/deploy/gitops.
	Status() projection.EngineStatus
	// Desired is the object as the last rendering declared it, when the
	// engine manages it.
	Desired(kind projection.Kind, namespace, name string) (map[string]any, bool)
}
