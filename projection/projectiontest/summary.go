// Package projectiontest helps tests compare projections built from
// different sources (a fixture, a fake cluster, a real API server).
package projectiontest

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hanzoai/deploy/projection"
)

// Summary describes every row of a snapshot, CD Applications included, by
// what must not depend on the cluster the objects live in: names, health
// and its message, sync, declared and running versions, tenancy, replicas,
// endpoints, the history as sorted revision:version pairs, and the tree
// (kind/name, parent, health and message). No uids, resourceVersions or
// timestamps.
func Summary(snap *projection.Snapshot) []string {
	var out []string
	add := func(a *projection.App) {
		line := fmt.Sprintf("%s %s/%s health=%s %q sync=%s declared=%s running=%s org=%s env=%s project=%s replicas=%d/%d endpoints=%v",
			a.Row, a.Namespace, a.Name, a.Health.Status, a.Health.Message, a.Sync, a.Declared, a.Running, a.Org, a.Env, a.Project,
			a.Ready, a.Replicas, a.Endpoints)
		var hist []string
		for _, h := range a.History {
			hist = append(hist, fmt.Sprintf("%d:%s", h.ID, h.Revision))
		}
		sort.Strings(hist)
		line += " history=" + strings.Join(hist, ",")
		if m := a.Engine; m != nil {
			line += fmt.Sprintf(" engine=%s@%s run=%s applied=%d", m.Instance, m.Revision, m.Run, m.AppliedAt)
		}
		for i, n := range a.Tree {
			parent := "-"
			if p := a.Parent(i); p != nil {
				parent = p.Obj.Kind.String() + "/" + p.Obj.Name
			}
			line += fmt.Sprintf("\n  %s/%s <- %s %s %q", n.Obj.Kind, n.Obj.Name, parent, n.Health.Status, n.Health.Message)
		}
		out = append(out, line)
	}
	for a := range snap.Apps() {
		add(a)
	}
	for _, a := range snap.CDApplications() {
		add(a)
	}
	return out
}
