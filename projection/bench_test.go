package projection

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"
)

// benchFleet renders apps Apps the way the operator and the controllers do:
// App, Deployment, Service, ConfigMap, Ingress, HPA, PDB, ten ReplicaSets
// and three Pods each — 20 objects an app. Tenant namespaces get 500 apps
// each; the rest go to the platform namespaces.
func benchFleet(apps int) []*Object {
	out := make([]*Object, 0, apps*20)
	for i := range apps {
		ns, org := benchNamespace(i)
		out = append(out, benchApp(ns, org, fmt.Sprintf("app-%05d", i), 0)...)
	}
	return out
}

func benchNamespace(i int) (ns, org string) {
	switch t := i / 500; {
	case t%4 == 0:
		return "hanzo", ""
	case t%4 == 1:
		return "hanzo-testnet", ""
	default:
		org = fmt.Sprintf("org%03d", t)
		return "tenant-" + org, org
	}
}

func benchApp(ns, org, name string, version int) []*Object {
	uid := func(kind, n string) string { return fmt.Sprintf("%s-%s-%s", ns, kind, n) }
	created := int64(1_760_000_000)
	labels := Labels{{"app.kubernetes.io/instance", name}, {"app.kubernetes.io/managed-by", "hanzo-operator"}, {"app.kubernetes.io/name", name}}
	owner := []OwnerRef{{Kind: "App", Name: name, UID: uid("app", name), Controller: true}}
	appLabels := Labels{{LabelPartOf, "platform"}}
	if org != "" {
		appLabels = Labels{{LabelPartOf, "shop"}, {LabelOrg, org}}
	}
	// Versions change what controllers write (statuses, resourceVersions):
	// images stay, as they do between rollouts.
	tag := "v1.9.0"
	image := "ghcr.io/hanzoai/" + name + ":" + tag
	three := int32(3)
	objs := []*Object{
		{Kind: KindApp, Namespace: ns, Name: name, UID: uid("app", name), ResourceVersion: fmt.Sprint(version), Generation: 2, Created: created, Labels: appLabels,
			Spec: &AppSpec{Repository: "ghcr.io/hanzoai/" + name, Tag: tag, Replicas: 3, Role: "service", HasStatus: true, Phase: "Running", ReadyReplicas: int32(2 + version%2), AvailableReplicas: 3, ObservedGeneration: 2}},
		{Kind: KindDeployment, Namespace: ns, Name: name, UID: uid("deploy", name), ResourceVersion: fmt.Sprint(version), Generation: 3, Created: created, Labels: labels, Owners: owner,
			Spec: &WorkloadSpec{Replicas: &three, Selector: Selector{MatchLabels: labels[:1]}, Containers: []Container{{Name: "app", Image: image}}, Revision: "10", RevisionID: 10,
				ObservedGeneration: 3, StatusReplicas: 3, UpdatedReplicas: 3, ReadyReplicas: int32(2 + version%2), AvailableReplicas: 3}},
		{Kind: KindService, Namespace: ns, Name: name, UID: uid("svc", name), ResourceVersion: "1", Created: created, Labels: labels, Owners: owner, Spec: &ServiceSpec{Type: "ClusterIP"}},
		{Kind: KindConfigMap, Namespace: ns, Name: name + "-replicate-config", UID: uid("cm", name), ResourceVersion: "1", Created: created, Labels: labels, Owners: owner},
		{Kind: KindIngress, Namespace: ns, Name: name, UID: uid("ing", name), ResourceVersion: "1", Created: created, Labels: labels, Owners: owner, Spec: &IngressSpec{Hosts: []string{name + ".hanzo.ai"}, LoadBalancer: []string{"10.0.0.1"}}},
		{Kind: KindHPA, Namespace: ns, Name: name, UID: uid("hpa", name), ResourceVersion: "1", Created: created, Labels: labels, Owners: owner, Spec: &HPASpec{Conditions: []Condition{{Type: "AbleToScale", Status: "True"}}}},
		{Kind: KindPDB, Namespace: ns, Name: name, UID: uid("pdb", name), ResourceVersion: "1", Created: created, Labels: labels, Owners: owner},
	}
	// Ten ReplicaSets (the default revisionHistoryLimit): the newest runs
	// the declared tag with three pods, the older ones are scaled to zero.
	for r := range 10 {
		rs := fmt.Sprintf("%s-rs%d", name, r)
		replicas := int32(0)
		if r == 9 {
			replicas = 3
		}
		ready := replicas
		if r == 9 {
			ready = int32(2 + version%2)
		}
		objs = append(objs, &Object{Kind: KindReplicaSet, Namespace: ns, Name: rs, UID: uid("rs", rs), ResourceVersion: fmt.Sprint(version), Generation: 1, Created: created + int64(r),
			Labels: labels, Owners: []OwnerRef{{Kind: "Deployment", Name: name, UID: uid("deploy", name), Controller: true}},
			Spec: &WorkloadSpec{Replicas: &replicas, Selector: Selector{MatchLabels: labels[:1]}, Containers: []Container{{Name: "app", Image: fmt.Sprintf("ghcr.io/hanzoai/%s:v1.%d.0", name, r)}},
				Revision: fmt.Sprint(r + 1), RevisionID: int64(r + 1), ObservedGeneration: 1, StatusReplicas: replicas, ReadyReplicas: ready, AvailableReplicas: ready}})
	}
	for p := range 3 {
		rs := name + "-rs9"
		objs = append(objs, benchPod(ns, rs, fmt.Sprintf("%s-%d", rs, p), name, uid("rs", rs), image, version, false))
	}
	return objs[:20]
}

func benchPod(ns, rs, name, app, rsUID, image string, version int, deleting bool) *Object {
	return &Object{Kind: KindPod, Namespace: ns, Name: name, UID: ns + "-pod-" + name, ResourceVersion: fmt.Sprint(version), Created: 1_760_000_100, Deleting: deleting,
		Labels: Labels{{"app.kubernetes.io/instance", app}, {"pod-template-hash", rs}},
		Owners: []OwnerRef{{Kind: "ReplicaSet", Name: rs, UID: rsUID, Controller: true}},
		Spec: &PodSpec{RestartPolicy: "Always", Containers: []Container{{Name: "app", Image: image}}, Phase: "Running", Ready: version%10 != 1,
			Statuses: []ContainerStatus{{Name: "app", Image: image, Ready: version%10 != 1, Running: true, RestartCount: int32(version % 5)}}}}
}

// benchChanges are updates of objects of a loaded fleet, as controllers
// write them: pod statuses mostly (70%), then ReplicaSets (15%),
// Deployments (10%, one in twenty of them a rollout that changes the
// template) and Apps (5%, a full re-derivation each), spread over random
// apps.
func benchChanges(apps, n int) []Change {
	r := rand.New(rand.NewPCG(1, 1))
	out := make([]Change, 0, n)
	for i := range n {
		a := r.IntN(apps)
		ns, org := benchNamespace(a)
		objs := benchApp(ns, org, fmt.Sprintf("app-%05d", a), i+1)
		byKind := map[Kind][]*Object{}
		for _, o := range objs {
			byKind[o.Kind] = append(byKind[o.Kind], o)
		}
		pick := func(k Kind) *Object { l := byKind[k]; return l[r.IntN(len(l))] }
		var o *Object
		switch k := r.IntN(20); {
		case k < 14:
			o = pick(KindPod)
		case k < 17:
			o = pick(KindReplicaSet)
		case k < 19:
			o = pick(KindDeployment)
			if r.IntN(20) == 0 { // a rollout: the template changes
				w := *o.Spec.(*WorkloadSpec)
				w.Containers = []Container{{Name: "app", Image: fmt.Sprintf("ghcr.io/hanzoai/%s:v2.%d.0", o.Name, i)}}
				w.ObservedGeneration, w.UpdatedReplicas = 4, 1
				c := *o
				c.Spec, c.Generation = &w, 4
				o = &c
			}
		default:
			o = pick(KindApp)
		}
		out = append(out, Change{Op: Upsert, Object: o})
	}
	return out
}

// benchStore is a store loaded with the 10k-app fleet, and changes to fold
// into it. Nothing else keeps the fleet's first versions: as in the server,
// the store holds the only reference to what it replaced.
func benchStore(tb testing.TB) (*Store, []Change) {
	return loadedStore(tb, benchFleet(10_000)), benchChanges(10_000, 1<<15)
}

func loadedStore(tb testing.TB, fleet []*Object) *Store {
	tb.Helper()
	s := NewStore(DefaultConfig())
	for i := 0; i < len(fleet); i += 1000 {
		if _, err := s.Apply(upserts(fleet[i:min(i+1000, len(fleet))])...); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

// BenchmarkApply folds updates into a loaded 10k-app / 200k-object fleet in
// batches, the way the writer drains its queue.
func BenchmarkApply(b *testing.B) {
	for _, batch := range []int{1, 64, 512, 4096} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s, changes := benchStore(b)
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			n := 0
			for i := 0; i < b.N; i++ {
				start := (i * batch) % len(changes)
				end := min(start+batch, len(changes))
				if _, err := s.Apply(changes[start:end]...); err != nil {
					b.Fatal(err)
				}
				n += end - start
			}
			b.StopTimer()
			cpu := cpuTime() - cpu0
			sec := b.Elapsed().Seconds()
			b.ReportMetric(float64(n)/sec, "changes/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/change")
			// CPU time of the whole process (the fold and the garbage
			// collector's share) per change: changes/s on one core is its
			// inverse.
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/change")
		})
	}
}

// BenchmarkApplyPerChange reports allocation per change at batch 512 in a
// form -benchmem cannot: bytes allocated divided by changes.
func BenchmarkApplyPerChange(b *testing.B) {
	s, changes := benchStore(b)
	const batch = 512
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		start := (i * batch) % len(changes)
		end := min(start+batch, len(changes))
		if _, err := s.Apply(changes[start:end]...); err != nil {
			b.Fatal(err)
		}
		n += end - start
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "changes/s")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(n), "B/change")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkLoad folds a cold 200k-object fleet (the initial list) and
// reports the memory the store retains per object.
func BenchmarkLoad(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		fleet := benchFleet(10_000)
		b.StartTimer()
		start := time.Now()
		s := loadedStore(b, fleet)
		elapsed := time.Since(start)
		b.StopTimer()
		fleet = nil
		runtime.GC()
		runtime.ReadMemStats(&after)
		objects := len(s.objects)
		b.ReportMetric(float64(objects)/elapsed.Seconds(), "objects/s")
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(objects), "retained-B/object")
		runtime.KeepAlive(s)
		b.StartTimer()
	}
}

// BenchmarkList assembles the full list (10k apps) and one tenant's list
// (500 apps) from a snapshot whose rows are already encoded, as a list
// request does after the first one encoded them.
func BenchmarkList(b *testing.B) {
	s := loadedStore(b, benchFleet(10_000))
	snap := s.Snapshot()
	AppendApplicationList(nil, snap.Position, snap.Apps()) // encode every row once
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for i := 0; i < b.N; i++ {
			buf = AppendApplicationList(buf[:0], snap.Position, snap.Apps())
		}
		b.ReportMetric(float64(len(buf))/1e6, "MB/list")
	})
	b.Run("tenant", func(b *testing.B) {
		rows := snap.Tenant(TenantPrefix, "org002")
		if len(rows) != 500 {
			b.Fatalf("tenant org002 has %d apps, want 500", len(rows))
		}
		b.ReportAllocs()
		var buf []byte
		for i := 0; i < b.N; i++ {
			buf = AppendApplicationList(buf[:0], snap.Position, slices.Values(snap.Tenant(TenantPrefix, "org002")))
		}
		b.ReportMetric(float64(len(buf))/1e6, "MB/list")
	})
	b.Run("encode-one", func(b *testing.B) {
		a := snap.Tenant(TenantPrefix, "org002")[0]
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_ = mustJSON(a.Application())
		}
	})
}

// BenchmarkDerive derives one App of a loaded fleet from scratch (tree and
// summary), warm in cache: the cost of a change that alters a tree's shape.
func BenchmarkDerive(b *testing.B) {
	s := loadedStore(b, benchFleet(10_000))
	k := AppKey{"hanzo", "app-00007"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := s.rows[k]
		r.app = s.deriveApp(r)
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
