package projection

// What the engine (package engine) writes on every object it applies. The
// fold reads them back from the watch like any other field: the engine never
// talks to the projection directly.
const (
	// LabelEngineInstance marks an object as managed by the engine instance
	// named by its value; only objects carrying it are ever pruned.
	LabelEngineInstance = "gitops.hanzo.ai/instance"
	// AnnotationEngineRevision is the commit SHA of the run that last changed
	// the object's desired state (a self-heal keeps the SHA it carries).
	AnnotationEngineRevision = "gitops.hanzo.ai/revision"
	// AnnotationEngineRun is the id of that run.
	AnnotationEngineRun = "gitops.hanzo.ai/run"
	// AnnotationEngineAppliedAt is when that run applied it (RFC 3339, UTC).
	AnnotationEngineAppliedAt = "gitops.hanzo.ai/applied-at"
	// AnnotationPrune "disabled" on a live object keeps the engine from
	// ever pruning it (as Flux's kustomize.toolkit.fluxcd.io/prune).
	AnnotationPrune = "gitops.hanzo.ai/prune"
	// AnnotationReconcile "disabled" on a live object excludes it from the
	// engine's apply and prune: a hotfix that self-heal leaves alone.
	AnnotationReconcile = "gitops.hanzo.ai/reconcile"
	// Disabled is the value that turns either off.
	Disabled = "disabled"
)

// EngineSource is where the engine reads the desired state from.
type EngineSource struct {
	Path string `json:"path"`
	Ref  string `json:"ref"`
	Repo string `json:"repo"`
}
