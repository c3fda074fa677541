package main

import (
	"slices"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/hanzoai/deploy/auth/authtest"
	"github.com/hanzoai/deploy/cluster/clustertest"
)

// TestCompactIDsAcrossReplicas: two deployd processes, peers of each
// other, behind a Service (round robin over the ready ones), over 48
// clusters, aliases of three real API servers. There a position written
// whole is over 512 bytes, so each id goes out compact. A client that
// streamed from the first and comes back through the Service to the
// second resumes from its compact id (the second asks the first what it
// means) with exactly the change it missed: no reset, nothing twice. Once
// the replica that made the client's last id is killed (kill -9), the one
// left resumes the client exactly if it named the same position itself,
// and otherwise resets it and sends every App again: never a guessed
// position. resumeAcrossReplicas is the same at 500
// clusters in make bench-scale.
func TestCompactIDsAcrossReplicas(t *testing.T) {
	const servers, clusters, apps, replicas = 3, 48, 3, 1
	apis := make([]*clustertest.Cluster, servers)
	for i := range apis {
		apis[i] = clustertest.Start(t, clustertest.FleetSnapshot(apps, replicas))
	}
	setup := aliasSetup(t, apis, clusters)
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	token, err := authtest.IDToken(m, admin, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for a := range fleetApps(apps, replicas) {
		names = append(names, a)
	}
	slices.Sort(names)

	f := resumeAcrossReplicas(t, buildDeployd(t), setup, m, token, apis, clusters, names[len(names)-2:])
	t.Logf("%s", f)
	if err := f.check(clusters * len(names)); err != nil {
		t.Fatal(err)
	}
}
