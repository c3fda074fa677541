package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"
	"k8s.io/client-go/dynamic"

	"github.com/hanzoai/deploy/auth/authtest"
	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/fleet"
)

// BenchmarkServeScale measures deployd at the scale of Argo CD's largest
// published test: DEPLOYD_SCALE_CLUSTERS clusters (default 500), each an
// alias (the same address under a name of its own) of one of
// DEPLOYD_SCALE_SERVERS real API servers (default 5, each its own etcd),
// every server holding the same fleet of DEPLOYD_SCALE_APPS Apps (default
// 100) with DEPLOYD_SCALE_REPLICAS pods each (default 10): 50,000 Apps, each
// alias's objects folded under its own name as a separate cluster's would be.
// The fleet comes from a snapshot (clustertest.FleetSnapshot), copied into
// each server; loading it is not measured.
//
// DEPLOYD_SCALE_ROUNDS times (default 3) it starts the binary over the
// clusters and measures its time to ready, its CPU until then, VmRSS at
// ready and once settled, the full list (plain and gzip) and a tenant's,
// each DEPLOYD_SCALE_REQUESTS times (default 100) one at a time, and an App's
// detail as often, as p50 and p99; it logs each figure's median.
//
// Then, as DEPLOYD_SCALE_PHASES says (default "streams,resume,idle"):
//
//   - streams: DEPLOYD_SCALE_STREAMS streams (default 1,000) open on one
//     replica while one App of a real server changes each second for
//     DEPLOYD_SCALE_CHANGE_SECONDS (default 30), an event in each of its
//     aliases: change → client latency, events delivered, resets, and the
//     lists and a detail timed meanwhile (streamsUnderChanges);
//
//   - resume: a stream moved between two replicas that are each other's
//     peers resumes from its compact id (resumeAcrossReplicas);
//
//   - idle: the API servers' CPU with deployd watching and doing nothing
//     else, less theirs alone, per alias over DEPLOYD_SCALE_IDLE_SECONDS
//     (default 60), with deployd's relists meanwhile (idleLoad).
//
//     make bench-scale
func BenchmarkServeScale(b *testing.B) {
	clusters := clustertest.EnvInt(b, "DEPLOYD_SCALE_CLUSTERS", 500)
	servers := clustertest.EnvInt(b, "DEPLOYD_SCALE_SERVERS", 5)
	apps := clustertest.EnvInt(b, "DEPLOYD_SCALE_APPS", 100)
	replicas := clustertest.EnvInt(b, "DEPLOYD_SCALE_REPLICAS", 10)
	rounds := clustertest.EnvInt(b, "DEPLOYD_SCALE_ROUNDS", 3)
	requests := clustertest.EnvInt(b, "DEPLOYD_SCALE_REQUESTS", 100)
	if servers < 1 || clusters < servers {
		b.Fatalf("DEPLOYD_SCALE_CLUSTERS=%d over DEPLOYD_SCALE_SERVERS=%d: want at least one server and a cluster for each", clusters, servers)
	}
	apis := make([]*clustertest.Cluster, servers)
	for i := range apis {
		apis[i] = clustertest.Start(b, clustertest.FleetSnapshot(apps, replicas))
	}
	objects := len(fleet.RenderAll(clustertest.FleetApps(apps, replicas)))
	b.Logf("%d clusters over %d real API servers, %d Apps and %d objects each: %d Apps, %d objects in all",
		clusters, servers, apps, objects, clusters*apps, clusters*objects)
	// Every alias holds the same tenants, so acme, in all of them, sees
	// 19 % of the fleet. A team on the clusters of one server is the
	// size of a tenant in the 10,000-App benchmarks: teamApps Apps in
	// each of its aliases, 500 at the defaults.
	team := teamFleet(clustertest.FleetApps(apps, replicas), teamApps)
	dyn, err := dynamic.NewForConfig(fleet.FastConfig(apis[0].Config))
	if err != nil {
		b.Fatal(err)
	}
	if err := fleet.NewLoader(dyn).Load(b.Context(), fleet.RenderAll(team)); err != nil {
		b.Fatalf("load the team's Apps: %v", err)
	}
	b.Logf("the team %s: %d Apps in %s on server 1, so in each of its %d aliases", teamOrg, len(team), teamNamespace, aliasesOf(0, servers, clusters))

	setup := aliasSetup(b, apis, clusters)

	m, err := mockoidc.Run()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Shutdown() })
	tokens := listTokens{}
	if tokens.admin, err = authtest.IDToken(m, admin, time.Now(), 6*time.Hour); err != nil {
		b.Fatal(err)
	}
	if tokens.tenant, err = authtest.IDToken(m, acmeMember, time.Now(), 6*time.Hour); err != nil {
		b.Fatal(err)
	}
	if tokens.team, err = authtest.IDToken(m, teamMember, time.Now(), 6*time.Hour); err != nil {
		b.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "deployd-scale-")
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("profiles: %s", dir)
	bin := buildDeployd(b)
	// One App of the last alias: its detail is what is timed.
	var app listedApp
	for a := range fleetApps(apps, replicas) {
		ns, name, _ := strings.Cut(a, "/")
		app = listedApp{namespace: ns + "." + scaleAlias(clusters-1), name: name}
		break
	}
	b.ResetTimer()

	var runs []serveRun
	var details []listFigures
	for i := range rounds {
		p := startServe(b, bin, setup, m)
		r := serveRun{ready: p.ready, cpu: p.cpu, settled: p.settled, rss: p.rss, hwm: p.hwm, rssSettled: p.rssSettled}
		r.apps = len(listApps(b, p.base, tokens.admin))
		r.tenantApps = len(listApps(b, p.base, tokens.tenant))
		r.full = timeList(b, p.base, tokens.admin, false, requests)
		r.gzip = timeList(b, p.base, tokens.admin, true, requests)
		r.tenant = timeList(b, p.base, tokens.tenant, false, requests)
		r.teamApps = len(listApps(b, p.base, tokens.team))
		r.team = timeList(b, p.base, tokens.team, false, requests)
		d := timeDetail(b, p.base, tokens.admin, app, requests)
		r.rssAfter, r.hwmAfter = clustertest.ProcMemory(b, p.pid)
		r.heap = liveHeap(b, p.metrics, filepath.Join(dir, fmt.Sprintf("scale-%d.heap.pb.gz", i+1)))
		p.stop()
		b.Logf("round %d: %s; detail of %s/%s p50 %s p99 %s; %d rows encoded at the start", i+1, r, app.namespace, app.name, ms(d.p50), ms(d.p99), p.encoded)
		if want := clusters * len(fleetApps(apps, replicas)); r.apps < want {
			b.Fatalf("round %d: the full list holds %d Apps, want at least the fleet's %d", i+1, r.apps, want)
		}
		if want := len(team) * aliasesOf(0, servers, clusters); r.teamApps != want {
			b.Fatalf("round %d: the team's list holds %d Apps, want %d", i+1, r.teamApps, want)
		}
		runs = append(runs, r)
		details = append(details, d)
	}

	var names []string
	for a := range fleetApps(apps, replicas) {
		names = append(names, a)
	}
	slices.Sort(names)
	phases := os.Getenv("DEPLOYD_SCALE_PHASES")
	if phases == "" {
		phases = "streams,resume,idle"
	}
	if strings.Contains(phases, "idle") {
		window := time.Duration(clustertest.EnvInt(b, "DEPLOYD_SCALE_IDLE_SECONDS", 60)) * time.Second
		f := idleLoad(b, bin, setup, m, apis, window)
		b.Logf("idle watching: the servers' CPU over %s: %.2f s without deployd, %.2f s with it; %.3f ms a second per alias; deployd's relists %.0f, watch restarts %.0f",
			window, f.base.Seconds(), f.watched.Seconds(), f.perAlias(clusters), f.relists, f.starts)
		b.ReportMetric(f.perAlias(clusters), "api-cpu-ms/s-per-alias")
	}
	if strings.Contains(phases, "streams") {
		n := clustertest.EnvInt(b, "DEPLOYD_SCALE_STREAMS", 1000)
		secs := clustertest.EnvInt(b, "DEPLOYD_SCALE_CHANGE_SECONDS", 30)
		f := streamsUnderChanges(b, bin, setup, m, tokens, apis, clusters, names[:2], app, n, time.Duration(secs)*time.Second, requests, filepath.Join(dir, "scale-streams"))
		b.Logf("streams under changes: %s", f)
		if f.resets > 0 || f.delivered < f.due {
			b.Errorf("streams under changes: %d resets, %d of %d events delivered: want none reset, every event delivered", f.resets, f.delivered, f.due)
		}
		b.ReportMetric(msf(f.p99), "event-p99-ms")
		b.ReportMetric(msf(f.full.p99), "streams-full-p99-ms")
		b.ReportMetric(msf(f.tenant.p99), "streams-tenant-p99-ms")
		b.ReportMetric(msf(f.team.p99), "streams-team-p99-ms")
		b.ReportMetric(msf(f.detail.p99), "streams-detail-p99-ms")
	}
	if strings.Contains(phases, "resume") {
		f := resumeAcrossReplicas(b, bin, setup, m, tokens.admin, apis, clusters, names[len(names)-2:])
		b.Logf("resume across two replicas behind a Service: %s", f)
		if err := f.check(clusters * len(names)); err != nil {
			b.Error(err)
		}
		b.ReportMetric(msf(f.resumed), "resume-ms")
		b.ReportMetric(float64(f.idBytes), "id-bytes")
	}

	med := func(f func(serveRun) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	medDetail := func(f func(listFigures) time.Duration) float64 {
		v := make([]float64, len(details))
		for i, d := range details {
			v[i] = msf(f(d))
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	rows := []struct {
		name, unit string
		v          float64
	}{
		{"ready, s", "s-to-ready", med(func(r serveRun) float64 { return r.ready.Seconds() })},
		{"CPU until ready, s", "cpu-s", med(func(r serveRun) float64 { return r.cpu.Seconds() })},
		{"VmRSS at ready, MiB", "rss-MiB", med(func(r serveRun) float64 { return float64(r.rss >> 20) })},
		{"VmRSS settled, MiB", "rss-settled-MiB", med(func(r serveRun) float64 { return float64(r.rssSettled >> 20) })},
		{"VmRSS after the lists, MiB", "rss-after-MiB", med(func(r serveRun) float64 { return float64(r.rssAfter >> 20) })},
		{"live heap, MiB", "heap-MiB", med(func(r serveRun) float64 { return float64(r.heap >> 20) })},
		{"full list p50, ms", "full-p50-ms", med(func(r serveRun) float64 { return msf(r.full.p50) })},
		{"full list p99, ms", "full-p99-ms", med(func(r serveRun) float64 { return msf(r.full.p99) })},
		{"full list gzip p50, ms", "gzip-p50-ms", med(func(r serveRun) float64 { return msf(r.gzip.p50) })},
		{"full list gzip p99, ms", "gzip-p99-ms", med(func(r serveRun) float64 { return msf(r.gzip.p99) })},
		{"tenant's list p50, ms", "tenant-p50-ms", med(func(r serveRun) float64 { return msf(r.tenant.p50) })},
		{"tenant's list p99, ms", "tenant-p99-ms", med(func(r serveRun) float64 { return msf(r.tenant.p99) })},
		{"the team's list p50, ms", "team-p50-ms", med(func(r serveRun) float64 { return msf(r.team.p50) })},
		{"the team's list p99, ms", "team-p99-ms", med(func(r serveRun) float64 { return msf(r.team.p99) })},
		{"App detail p50, ms", "detail-p50-ms", medDetail(func(d listFigures) time.Duration { return d.p50 })},
		{"App detail p99, ms", "detail-p99-ms", medDetail(func(d listFigures) time.Duration { return d.p99 })},
	}
	var table strings.Builder
	fmt.Fprintf(&table, "| median of %d runs, %s, %d requests at c=1 | |\n|---|---:|\n", rounds, setup.name, requests)
	for _, row := range rows {
		fmt.Fprintf(&table, "| %s | %.1f |\n", row.name, row.v)
		b.ReportMetric(row.v, row.unit)
	}
	b.Logf("%d Apps listed (the tenant's %d, the team's %d):\n%s", runs[0].apps, runs[0].tenantApps, runs[0].teamApps, table.String())
	b.ReportMetric(0, "ns/op")
}

// aliasSetup serves clusters clusters over the real servers apis: the
// first is --kubeconfig's (of apis[0]); a clusters file names the others,
// alias i of server i % len(apis).
func aliasSetup(tb testing.TB, apis []*clustertest.Cluster, clusters int) serveSetup {
	tb.Helper()
	var file strings.Builder
	file.WriteString("clusters:\n")
	for i := 1; i < clusters; i++ {
		fmt.Fprintf(&file, "- name: %s\n  kubeconfig: %s\n", scaleAlias(i), apis[i%len(apis)].Kubeconfig)
	}
	path := filepath.Join(tb.TempDir(), "clusters.yaml")
	if err := os.WriteFile(path, []byte(file.String()), 0o600); err != nil {
		tb.Fatal(err)
	}
	return serveSetup{name: fmt.Sprintf("%d clusters over %d servers", clusters, len(apis)), file: "scale", kubeconfig: apis[0].Kubeconfig, clustersFile: path}
}

// scaleAlias is the name of the i-th cluster of BenchmarkServeScale's file.
func scaleAlias(i int) string { return fmt.Sprintf("alias-%03d", i) }

// timeDetail GETs one App n times, one at a time, after three not timed.
func timeDetail(b *testing.B, base, token string, app listedApp, n int) listFigures {
	b.Helper()
	return timeGET(b, base+"/api/v1/applications/"+url.PathEscape(app.name)+"?appNamespace="+url.QueryEscape(app.namespace), token, false, n)
}

// The team: a tenant whose namespace is on one server's clusters only.
const (
	teamOrg       = "hooli"
	teamNamespace = "tenant-" + teamOrg
	teamApps      = 5
)

var teamMember = authtest.User{Subject: "u-hal", Extra: map[string]any{"preferred_username": "hal", "owner": teamOrg}}

// teamFleet is n of apps' tenant Apps, moved to the team's namespace.
// Tenants reuse App names (each has a web), and one namespace holds a
// name once, so a name already taken is passed over.
func teamFleet(apps []fleet.App, n int) []fleet.App {
	var out []fleet.App
	taken := map[string]bool{}
	for _, a := range apps {
		if len(out) == n {
			break
		}
		if a.Kind == fleet.KindApp && a.Org != "" && !taken[a.Name] {
			taken[a.Name] = true
			a.Namespace, a.Org = teamNamespace, teamOrg
			out = append(out, a)
		}
	}
	return out
}

// The team's Apps are as many as asked, each its own App in the one
// namespace: a name given twice would be one App, and the list's count
// would miss it.
func TestTeamFleet(t *testing.T) {
	team := teamFleet(clustertest.FleetApps(100, 10), teamApps)
	names := map[string]bool{}
	for _, a := range team {
		if a.Namespace != teamNamespace || a.Org != teamOrg {
			t.Errorf("%s is in %s of %s, want %s of %s", a.Name, a.Namespace, a.Org, teamNamespace, teamOrg)
		}
		names[a.Name] = true
	}
	if len(team) != teamApps || len(names) != teamApps {
		t.Fatalf("%d Apps with %d names, want %d of each", len(team), len(names), teamApps)
	}
}
