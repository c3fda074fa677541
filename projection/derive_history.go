package projection

import (
	"slices"
	"strings"
	"time"
)

// runningVersion is the version of the container whose image repository is
// the App's repository, else of the first container, in the workload's pod
// template.
func runningVersion(w *Object, repository string) string {
	ws, ok := w.Spec.(*WorkloadSpec)
	if !ok || len(ws.Containers) == 0 {
		return ""
	}
	for _, c := range ws.Containers {
		if ref := ParseImage(c.Image); repository != "" && ref.Repository == repository {
			return ref.Version()
		}
	}
	return ImageTag(ws.Containers[0].Image)
}

// history lists the app's releases in the order they were deployed: one
// entry per ReplicaSet of its Deployment (id = the Deployment revision),
// after the operator's upgradeHistory entries for versions no ReplicaSet
// remembers.
func (s *Store) history(tree []*NodeInfo, parents []int32, workload *NodeInfo, spec *AppSpec, prev []HistoryEntry) []HistoryEntry {
	out := s.scratch.history[:0]
	if workload != nil && workload.Obj.Kind == KindDeployment {
		for i, n := range tree {
			if p := parents[i]; p < 0 || tree[p] != workload || n.Obj.Kind != KindReplicaSet {
				continue
			}
			rs := n.Obj
			ws, _ := rs.Spec.(*WorkloadSpec)
			if ws == nil {
				continue
			}
			id := ws.RevisionID
			if id <= 0 {
				continue
			}
			out = append(out, HistoryEntry{ID: id, Revision: runningVersion(rs, spec.Repository), DeployedAt: rs.Created, DeployStartedAt: rs.Created})
		}
	}
	for _, u := range spec.UpgradeHistory {
		tag := u.Tag
		if tag == "" && u.Image != "" {
			tag = ImageTag(u.Image)
		}
		if tag == "" || hasRevision(out, tag) {
			continue
		}
		done := u.CompletedAt
		if done == 0 {
			done = u.StartedAt
		}
		out = append(out, HistoryEntry{Revision: tag, DeployedAt: done, DeployStartedAt: u.StartedAt})
	}
	// Deployment order: the releases only the operator remembers (their
	// ReplicaSets are gone) by time, then the ReplicaSets by revision —
	// a rollback reuses an old ReplicaSet under a new revision, so its
	// creation time does not say when it ran last.
	slices.SortFunc(out, func(a, b HistoryEntry) int {
		if (a.ID == 0) != (b.ID == 0) {
			if a.ID == 0 {
				return -1
			}
			return 1
		}
		if a.ID != b.ID {
			return cmpInt(a.ID, b.ID)
		}
		if a.DeployedAt != b.DeployedAt {
			return cmpInt(a.DeployedAt, b.DeployedAt)
		}
		return strings.Compare(a.Revision, b.Revision)
	})
	s.scratch.history = out
	if slices.Equal(out, prev) {
		return prev
	}
	if len(out) == 0 {
		return nil
	}
	return slices.Clone(out)
}

func hasRevision(list []HistoryEntry, rev string) bool {
	for _, h := range list {
		if h.Revision == rev {
			return true
		}
	}
	return false
}

// operationOf is the sync operation the App's sync annotation asked for:
// Running until the app is Synced on its declared version and no longer
// rolling out, then Succeeded.
func operationOf(o *Object, spec *AppSpec, sync SyncCode, health Health) *SyncOp {
	if spec.SyncRequestedAt == "" {
		return nil
	}
	op := &SyncOp{StartedAt: spec.SyncRequestedAt, Revision: spec.Tag, InitiatedBy: spec.SyncRequestedBy}
	if _, err := time.Parse(time.RFC3339, spec.SyncRequestedAt); err != nil {
		op.StartedAt = ""
	}
	pending := o.Generation > spec.ObservedGeneration || !spec.HasStatus
	if sync != SyncSynced || health.Status == HealthProgressing || pending {
		op.Phase = "Running"
		op.Message = "waiting for the rollout of " + orUnknown(spec.Tag)
	} else {
		op.Phase = "Succeeded"
		op.Message = "synced to " + spec.Tag
	}
	return op
}

func orUnknown(s string) string {
	if s == "" {
		return "the declared version"
	}
	return s
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func revisionOf(o *Object) int64 {
	if w, ok := o.Spec.(*WorkloadSpec); ok {
		return w.RevisionID
	}
	return 0
}
