package projection

import "time"

// EngineMark is what the engine wrote on an App it applied: its instance
// label and the revision, run and applied-at annotations. It is read once,
// when the App is decoded; the fold only carries the pointer.
type EngineMark struct {
	Instance string
	// Revision is the commit SHA of the run that last changed the App's
	// desired state.
	Revision string
	// Run is that run's id.
	Run string
	// AppliedAt is when that run applied it, in Unix seconds (0 when the
	// annotation is missing or not RFC 3339).
	AppliedAt int64
}

// decodeEngineMark reads the engine's marks; nil unless the App carries
// both the instance label and the revision annotation.
func decodeEngineMark(labels Labels, ann map[string]any) *EngineMark {
	inst := labels.Value(LabelEngineInstance)
	rev := s(ann, AnnotationEngineRevision)
	if inst == "" || rev == "" {
		return nil
	}
	return &EngineMark{Instance: inst, Revision: rev, Run: s(ann, AnnotationEngineRun), AppliedAt: ts(ann, AnnotationEngineAppliedAt)}
}

func sameEngineMark(a, b *EngineMark) bool {
	return a == b || a != nil && b != nil && *a == *b
}

// managedSource is the engine's source as an Application's spec.source,
// when the engine that marked the App is the one configured for the App's
// cluster; false otherwise (the display source stays).
func (cfg *Config) managedSource(a *App) (ApplicationSource, bool) {
	m := a.Engine
	if m == nil {
		return ApplicationSource{}, false
	}
	e, inst := cfg.Engine, cfg.EngineInstance
	if len(cfg.Clusters) > 0 {
		if i, _, _ := cfg.ClusterOf(a.Namespace); i > 0 {
			e, inst = cfg.Clusters[i-1].Engine, cfg.Clusters[i-1].EngineInstance
		}
	}
	if e == nil || (inst != "" && inst != m.Instance) {
		return ApplicationSource{}, false
	}
	return ApplicationSource{RepoURL: e.Repo, Path: e.Path, TargetRevision: e.Ref}, true
}

// engineOperation is the engine run that last changed the App, as a
// finished sync operation on its git revision.
func engineOperation(m *EngineMark) *OperationState {
	at := Timestamp(m.AppliedAt)
	msg := "applied revision " + m.Revision + " (engine instance " + m.Instance + ")"
	if m.Run != "" {
		msg = "engine run " + m.Run + " applied revision " + m.Revision
	}
	return &OperationState{
		// The engine applies what git declares: the commit is the human
		// act, the apply is automated.
		Operation:  Operation{Sync: SyncOperation{Revision: m.Revision}, InitiatedBy: OperationInitiator{Automated: true}},
		Phase:      "Succeeded",
		Message:    msg,
		StartedAt:  at,
		FinishedAt: at,
		SyncResult: &SyncOperationResult{Revision: m.Revision},
	}
}

// syncOperationWins reports whether the sync annotation's operation is
// shown rather than the engine's: while it runs, or when it was asked for
// after the engine's run applied the App.
func syncOperationWins(op *SyncOp, m *EngineMark) bool {
	if op.Phase == "Running" || m.AppliedAt == 0 {
		return true
	}
	t, err := time.Parse(time.RFC3339, op.StartedAt)
	return err == nil && t.Unix() > m.AppliedAt
}
