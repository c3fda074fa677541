package clustertest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/hanzoai/deploy/fleet"
)

// fleetSeed is the seed of every fleet FleetSnapshot loads.
const fleetSeed = 1

// fleetSample is how many Apps FleetSnapshotKey renders to fingerprint
// the generator and the renderer.
const fleetSample = 50

// FleetSnapshot is WithSnapshot for the demo fleet: fleet.Generate(1, apps),
// every App with replicas scaled to replicasPerApp pods and no autoscaler
// (as BenchmarkColdStart loads it), rendered by fleet.RenderAll and created
// by fleet.Loader through fleet.FastConfig. Its key is FleetSnapshotKey, so
// a change to the generator, the renderer or deploy/crds loads afresh.
func FleetSnapshot(apps, replicasPerApp int) Option {
	return func(o *options) {
		o.snapshot = &snapshotOption{
			key: func(t testing.TB) string { return FleetSnapshotKey(t, apps, replicasPerApp) },
			load: func(t testing.TB, c *Cluster) {
				t.Helper()
				LoadFleet(t, c, apps, replicasPerApp)
			},
		}
	}
}

// FleetApps is the fleet FleetSnapshot loads: fleet.Generate(1, apps) with
// every App that has replicas scaled to replicasPerApp and no autoscaler.
func FleetApps(apps, replicasPerApp int) []fleet.App {
	var out []fleet.App
	for _, a := range fleet.Generate(fleetSeed, apps) {
		if a.Kind == fleet.KindApp && a.Replicas > 0 {
			a.Replicas = int32(replicasPerApp)
			a.Autoscale = nil
		}
		out = append(out, a)
	}
	return out
}

// LoadFleet creates FleetApps(apps, replicasPerApp) in c and logs how long
// it took.
func LoadFleet(t testing.TB, c *Cluster, apps, replicasPerApp int) {
	t.Helper()
	objs := fleet.RenderAll(FleetApps(apps, replicasPerApp))
	dyn, err := dynamic.NewForConfig(fleet.FastConfig(c.Config))
	if err != nil {
		t.Fatalf("load fleet: %v", err)
	}
	start := time.Now()
	if err := fleet.NewLoader(dyn).Load(t.Context(), objs); err != nil {
		t.Fatalf("load fleet of %d Apps: %v", apps, err)
	}
	t.Logf("loaded %d objects (%d Apps, %d pods each) into the API server in %v",
		len(objs), apps, replicasPerApp, time.Since(start).Round(time.Second))
}

// FleetSnapshotKey is FleetSnapshot's key:
// fleet-<apps>x<replicasPerApp>-<version>, where version is a hash of what
// FleetApps(50, replicasPerApp) renders to and of deploy/crds, so it
// changes when the generator, the renderer or a CRD does.
func FleetSnapshotKey(t testing.TB, apps, replicasPerApp int) string {
	t.Helper()
	h := sha256.New()
	enc := json.NewEncoder(h)
	for _, o := range fleet.RenderAll(FleetApps(min(apps, fleetSample), replicasPerApp)) {
		if err := enc.Encode(o.Object); err != nil {
			t.Fatalf("fleet snapshot key: %v", err)
		}
	}
	crds := CRDDir(t)
	for _, name := range CRDNames(t) {
		b, err := os.ReadFile(filepath.Join(crds, name+".yaml"))
		if err != nil {
			t.Fatalf("fleet snapshot key: %v", err)
		}
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	return fmt.Sprintf("fleet-%dx%d-%s", apps, replicasPerApp, hex.EncodeToString(h.Sum(nil))[:12])
}
