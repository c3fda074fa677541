package clustertest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkFleetSnapshot measures a start from FleetSnapshot's cache: the
// copy of etcd's data and the start of etcd and kube-apiserver on it, until
// Start returns. The fleet is DEPLOYD_SNAPSHOT_APPS Apps (default 10,000) of
// DEPLOYD_SNAPSHOT_REPLICAS pods (default 10), kept in SnapshotDir(); when
// it is not cached yet, the benchmark loads and saves it first (untimed,
// ~20 minutes for the default fleet), so run it on its own:
//
//	DEPLOYD_REQUIRE_TOOLS=1 go test -run '^$' -bench FleetSnapshot -benchtime 1x -timeout 2h ./cluster/clustertest/
func BenchmarkFleetSnapshot(b *testing.B) {
	apps := EnvInt(b, "DEPLOYD_SNAPSHOT_APPS", 10_000)
	replicas := EnvInt(b, "DEPLOYD_SNAPSHOT_REPLICAS", 10)
	opt := FleetSnapshot(apps, replicas)
	// Loads and saves the fleet unless it is cached already.
	stopAndFree(b, Start(b, opt))
	key := FleetSnapshotKey(b, apps, replicas)
	size, err := dirSize(filepath.Join(SnapshotDir(), key))
	if err != nil {
		b.Fatalf("snapshot %s: %v", key, err)
	}
	b.Logf("snapshot %s in %s: %s", key, SnapshotDir(), mib(size))
	var total time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		c := Start(b, opt)
		total += time.Since(start)
		b.StopTimer()
		if _, err := c.Clientset().CoreV1().Namespaces().List(b.Context(), metav1.ListOptions{}); err != nil {
			b.Fatalf("list namespaces: %v", err)
		}
		stopAndFree(b, c)
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s-to-ready")
	b.ReportMetric(float64(size)/(1<<20), "MiB-snapshot")
}

// stopAndFree stops the cluster's processes now (its cleanup then has
// nothing left to do) and removes its copy of etcd's data, as large as the
// snapshot.
func stopAndFree(b *testing.B, c *Cluster) {
	b.Helper()
	c.shutdown(b)
	if err := os.RemoveAll(filepath.Join(c.Dir, "etcd")); err != nil {
		b.Fatal(err)
	}
}

// dirSize is the size of the regular files under dir.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return err
	})
	return n, err
}
