package projection

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// clusterFleet is 10,000 Apps as one cluster holds them, or as two hold
// 5,000 each (the second's namespaces qualified).
func clusterFleet(clusters int) (Config, []*Object) {
	cfg := DefaultConfig()
	per := 10_000 / clusters
	var objs []*Object
	for c := range clusters {
		cluster := ""
		if c > 0 {
			cluster = fmt.Sprintf("c%d", c)
			cfg.Clusters = append(cfg.Clusters, ClusterRef{Name: cluster, Server: "https://" + cluster + ":6443", Namespaces: DefaultNamespaces()})
		}
		for i := range per {
			ns, org := benchNamespace(i)
			objs = append(objs, benchApp(QualifyNamespace(ns, cluster), org, fmt.Sprintf("app-%05d", i), 0)...)
		}
	}
	return cfg, objs
}

// BenchmarkClusters folds and lists 10,000 Apps held by one cluster and
// by two clusters of 5,000, side by side: the cold fold's time per
// object, the live heap it leaves, and a full list's time (the Apps
// encoded already, as a warm replica has them). They should be about
// equal.
func BenchmarkClusters(b *testing.B) {
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("clusters=%d", n), func(b *testing.B) {
			cfg, objs := clusterFleet(n)
			var fold, list time.Duration
			var heap uint64
			for range b.N {
				runtime.GC()
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				start := time.Now()
				s := NewStore(cfg)
				for i := 0; i < len(objs); i += 1000 {
					if _, err := s.Apply(upserts(objs[i:min(i+1000, len(objs))])...); err != nil {
						b.Fatal(err)
					}
				}
				fold += time.Since(start)
				snap := s.Snapshot()
				_ = AppendApplicationList(nil, snap.Position, snap.Apps()) // encodes each App once
				start = time.Now()
				body := AppendApplicationList(nil, snap.Position, snap.Apps())
				list += time.Since(start)
				if len(body) == 0 || snap.Len() != 10_000 {
					b.Fatalf("%d Apps listed", snap.Len())
				}
				runtime.GC()
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				heap += after.HeapAlloc - before.HeapAlloc
				runtime.KeepAlive(s)
			}
			b.ReportMetric(float64(fold.Nanoseconds())/float64(b.N*len(objs)), "fold-ns/object")
			b.ReportMetric(float64(list.Microseconds())/1000/float64(b.N), "list-ms")
			b.ReportMetric(float64(heap)/float64(b.N)/(1<<20), "heap-MiB")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkApplyClusters folds changes of one App each, as the writer
// does in steady state, into 10,000 Apps over 500 clusters (500
// namespaces, one a cluster): the bytes allocated per change, which a
// fleet of many namespaces must not make grow with their number.
func BenchmarkApplyClusters(b *testing.B) {
	cfg, objs := clusterFleet(500)
	s := NewStore(cfg)
	for i := 0; i < len(objs); i += 1000 {
		if _, err := s.Apply(upserts(objs[i:min(i+1000, len(objs))])...); err != nil {
			b.Fatal(err)
		}
	}
	var apps []*Object
	for _, o := range objs {
		if o.Kind == KindApp {
			apps = append(apps, o)
		}
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := range b.N {
		c := *apps[(i*7919)%len(apps)]
		c.ResourceVersion = fmt.Sprint(1_000_000 + i)
		if _, err := s.Apply(upserts([]*Object{&c})...); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N), "B/change")
	if n := len(s.Snapshot().Namespaces()); n < 500 {
		b.Fatalf("%d namespaces, want one a cluster", n)
	}
}
