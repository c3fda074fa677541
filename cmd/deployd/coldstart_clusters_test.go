package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/hanzoai/deploy/auth/authtest"
	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/fleet"
)

// secondCluster is the name the clusters file gives the second cluster of
// the two-cluster set-up; its namespaces are <namespace>.second.
const secondCluster = "second"

// BenchmarkServeClusters measures the serve binary over the same number
// of Apps held by one cluster and by two, against three real API servers
// (each its own etcd): one holding the fleet of DEPLOYD_CLUSTERS_APPS Apps
// (default 10,000), two holding the fleet of half as many each (the same
// generated fleet in both; the second's namespaces qualified), every App
// with DEPLOYD_CLUSTERS_REPLICAS pods (default 10, as BenchmarkColdStart).
// The fleets come from snapshots (clustertest.FleetSnapshot): loaded once,
// then copied. The second cluster's fleet is loaded on its own, under a
// key of its own: a copy of the first's etcd would hold the same uids, as
// two independent clusters never do. Loading is not measured.
//
// Then, DEPLOYD_CLUSTERS_ROUNDS times (default 5), it starts the binary
// over each set-up, in alternating order, and measures its time to ready
// (/v1/deploy/health 200) and the CPU it took, VmRSS and VmHWM at ready,
// and the full list (GET /api/v1/applications as a SuperAdmin, plain and
// gzip) and a tenant's list, each DEPLOYD_CLUSTERS_REQUESTS times (default
// 200) one at a time, as p50 and p99; then VmRSS and the live heap after
// a collection, whose profile it saves under DEPLOYD_CLUSTERS_PROFILES
// (default a new directory in the system's temp dir; the path is logged).
// Since deployd settles its memory (memlimit.go) once the first cluster
// is ready, it also reads VmRSS once the log says so, and when that was.
// It logs each figure's median for the two set-ups and their ratio (two
// clusters over one), which should be about 1.
//
// Last, over two clusters, it stops the second cluster's API server and
// measures the lists again, checking that they answer 200 with every App
// they held, the second cluster's marked unreachable; and it starts
// another deployd while that cluster is down, which must become ready
// with the first cluster's Apps.
//
//	go test -run '^$' -bench '^BenchmarkServeClusters$' -benchtime 1x -timeout 3h ./cmd/deployd/
func BenchmarkServeClusters(b *testing.B) {
	apps := clustertest.EnvInt(b, "DEPLOYD_CLUSTERS_APPS", 10_000)
	replicas := clustertest.EnvInt(b, "DEPLOYD_CLUSTERS_REPLICAS", 10)
	rounds := clustertest.EnvInt(b, "DEPLOYD_CLUSTERS_ROUNDS", 5)
	requests := clustertest.EnvInt(b, "DEPLOYD_CLUSTERS_REQUESTS", 200)
	if apps%2 != 0 {
		b.Fatalf("DEPLOYD_CLUSTERS_APPS=%d: want an even number, halved between two clusters", apps)
	}
	half := apps / 2
	whole := clustertest.Start(b, clustertest.FleetSnapshot(apps, replicas))
	first := clustertest.Start(b, clustertest.FleetSnapshot(half, replicas))
	second := clustertest.Start(b, clustertest.WithSnapshot(clustertest.FleetSnapshotKey(b, half, replicas)+"-second",
		func(t testing.TB, c *clustertest.Cluster) { clustertest.LoadFleet(t, c, half, replicas) }))
	b.Logf("objects of the fleets: %d in one cluster; %d in each of two",
		len(fleet.RenderAll(clustertest.FleetApps(apps, replicas))), len(fleet.RenderAll(clustertest.FleetApps(half, replicas))))

	file := filepath.Join(b.TempDir(), "clusters.yaml")
	if err := os.WriteFile(file, []byte("clusters:\n- name: "+secondCluster+"\n  kubeconfig: "+second.Kubeconfig+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	one := serveSetup{name: fmt.Sprintf("1 × %d", apps), file: "one", kubeconfig: whole.Kubeconfig}
	two := serveSetup{name: fmt.Sprintf("2 × %d", half), file: "two", kubeconfig: first.Kubeconfig, clustersFile: file}

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
	dir := os.Getenv("DEPLOYD_CLUSTERS_PROFILES")
	if dir == "" {
		if dir, err = os.MkdirTemp("", "deployd-clusters-"); err != nil {
			b.Fatal(err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	b.Logf("heap profiles: %s", dir)
	bin := buildDeployd(b)
	b.ResetTimer()

	runs := map[string][]serveRun{}
	for i := range rounds {
		order := []serveSetup{one, two}
		if i%2 == 1 {
			order = []serveSetup{two, one}
		}
		for _, s := range order {
			r := measureServe(b, bin, s, m, tokens, requests, filepath.Join(dir, fmt.Sprintf("%s-%d.heap.pb.gz", s.file, i+1)))
			b.Logf("round %d, %s: %s", i+1, s.name, r)
			runs[s.name] = append(runs[s.name], r)
		}
	}
	ones, twos := runs[one.name], runs[two.name]
	if ones[0].apps == 0 || twos[0].apps == 0 {
		b.Fatalf("a full list held no Apps: %d over one cluster, %d over two", ones[0].apps, twos[0].apps)
	}
	rows := serveRows(ones, twos)
	var table strings.Builder
	fmt.Fprintf(&table, "| median of %d runs | %s | %s | ratio |\n|---|---:|---:|---:|\n", rounds, one.name, two.name)
	for _, row := range rows {
		fmt.Fprintf(&table, "| %s | %s | %s | %.2f |\n", row.name, row.format(row.one), row.format(row.two), row.two/row.one)
		b.ReportMetric(row.one, row.unit+"/one")
		b.ReportMetric(row.two, row.unit+"/two")
	}
	b.Logf("one cluster and two, %d requests a list at c=1:\n%s", requests, table.String())

	measureClusterDown(b, bin, two, second, fleetApps(half, replicas), m, tokens, requests)
	b.ReportMetric(0, "ns/op")
}

// serveSetup is one way of serving the fleet: the first cluster's
// kubeconfig and, for several clusters, a clusters file.
type serveSetup struct {
	name, kubeconfig string
	file             string // the set-up in file names
	clustersFile     string // "" for one cluster
	// addr is where it listens ("": a free port); env is more of its
	// environment.
	addr string
	env  []string
}

// listTokens are the bearer tokens the lists are taken with.
// listTokens are the ID tokens the lists are timed with: a SuperAdmin's,
// a tenant's, and (bench-scale) a smaller tenant's, the team's.
type listTokens struct{ admin, tenant, team string }

// serveProc is a running deployd serve.
type serveProc struct {
	base, metrics string
	pid           int
	ready         time.Duration // from the process's start to health 200
	cpu           time.Duration // CPU time (user and system) until ready
	rss, hwm      int64         // VmRSS and VmHWM at ready
	// settled is when the log said "memory settled", from the start (0:
	// not yet); rssSettled is VmRSS once it did, when ready.
	settled    time.Duration
	rssSettled int64
	// encoded is the rows the start encoded (its "rows encoded" line).
	encoded int
	logs    *authtest.LogBuffer
	stop    func()
}

// startServe starts bin over the set-up and returns once it is ready; it
// is stopped when the benchmark ends, or earlier by stop. A start whose
// free address was taken meanwhile by another process is tried again on
// others.
func startServe(b testing.TB, bin string, s serveSetup, m *mockoidc.MockOIDC) *serveProc {
	b.Helper()
	for attempt := 1; ; attempt++ {
		p, err := tryServe(b, bin, s, m)
		if err == nil {
			return p
		}
		logs := p.logs.String()
		if attempt < 3 && strings.Contains(logs, "address already in use") {
			b.Logf("deployd over %s: %v (an address was taken): starting it again", s.name, err)
			continue
		}
		b.Fatalf("deployd over %s: %v; the end of its log:\n%s", s.name, err, logs[max(0, len(logs)-8000):])
	}
}

// tryServe starts bin over the set-up on free addresses and waits until
// it is ready; it fails when the process exits first.
func tryServe(b testing.TB, bin string, s serveSetup, m *mockoidc.MockOIDC) (*serveProc, error) {
	b.Helper()
	addr, maddr := s.addr, freeAddr(b)
	if addr == "" {
		addr = freeAddr(b)
	}
	p := &serveProc{base: "http://" + addr, metrics: "http://" + maddr, logs: &authtest.LogBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "serve", "--listen", addr, "--metrics-listen", maddr, "--kubeconfig", s.kubeconfig)
	cmd.Env = append(os.Environ(), "LOG_LEVEL=info", "DEPLOY_PPROF=true", "DEPLOY_PUBLIC_URL="+p.base,
		"DEPLOY_CLUSTERS_FILE="+s.clustersFile,
		"IAM_ENDPOINT="+m.Issuer(), "DEPLOY_IAM_CLIENT_ID="+m.ClientID, "DEPLOY_IAM_CLIENT_SECRET="+m.ClientSecret)
	cmd.Env = append(cmd.Env, s.env...)
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	start := time.Now()
	if err := cmd.Start(); err != nil {
		cancel()
		b.Fatal(err)
	}
	p.pid = cmd.Process.Pid
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stopped := false
	p.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-exited
		if b.Failed() {
			logs := p.logs.String()
			b.Logf("deployd over %s, the end of its log:\n%s", s.name, logs[max(0, len(logs)-8000):])
		}
	}
	b.Cleanup(p.stop)
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := start.Add(20 * time.Minute)
	for {
		resp, err := client.Get(p.base + "/v1/deploy/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-exited:
			return p, fmt.Errorf("exited before it was ready")
		default:
		}
		if time.Now().After(deadline) {
			return p, fmt.Errorf("not ready in 20 minutes")
		}
		p.sawSettled(start)
		time.Sleep(10 * time.Millisecond) // a probe's interval: ready is measured to it
	}
	p.ready = time.Since(start)
	p.cpu = procCPU(b, p.pid)
	p.rss, p.hwm = clustertest.ProcMemory(b, p.pid)
	for deadline := time.Now().Add(time.Minute); !p.sawSettled(start); {
		if time.Now().After(deadline) {
			return p, fmt.Errorf("ready, but no \"memory settled\" in the log within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.rssSettled, _ = clustertest.ProcMemory(b, p.pid)
	// The start ends with every row encoded, before the collection that
	// settles it: a first list finds them so.
	if p.encoded = rowsEncoded(p.logs.String()); p.encoded < 1 {
		return p, fmt.Errorf("memory settled, but no \"rows encoded\" of at least one row before it in the log")
	}
	return p, nil
}

// rowsEncoded is the rows the log's "rows encoded" line counts, -1 when
// there is none.
func rowsEncoded(logs string) int {
	_, line, ok := strings.Cut(logs, `"msg":"rows encoded"`)
	if !ok {
		return -1
	}
	_, rest, ok := strings.Cut(line, `"rows":`)
	if !ok {
		return -1
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(rest)
	}
	n, err := strconv.Atoi(rest[:end])
	if err != nil {
		return -1
	}
	return n
}

// sawSettled says whether the log has said "memory settled", recording
// when it first saw it.
func (p *serveProc) sawSettled(start time.Time) bool {
	if p.settled == 0 && strings.Contains(p.logs.String(), `"msg":"memory settled"`) {
		p.settled = time.Since(start)
	}
	return p.settled != 0
}

// serveRun is one start of deployd over a set-up and its lists.
type serveRun struct {
	ready, cpu         time.Duration
	settled            time.Duration // when the log said "memory settled"
	rss, hwm           int64         // at ready
	rssSettled         int64         // once ready and settled
	rssAfter, hwmAfter int64         // after the lists
	heap               int64         // heap in use after the lists and a collection
	apps, tenantApps   int           // rows of the full list and of the tenant's
	full, gzip, tenant listFigures
	teamApps           int // rows of the team's list (bench-scale), and its timing
	team               listFigures
}

func (r serveRun) String() string {
	return fmt.Sprintf("ready in %s (%.1f CPU s), rss %d MiB, peak %d MiB; memory settled at %s, then rss %d MiB; %d Apps: full list p50 %s p99 %s (%.1f MiB), gzip p50 %s p99 %s (%.1f MiB); "+
		"tenant's %d Apps p50 %s p99 %s; after the lists rss %d MiB, peak %d MiB, live heap %d MiB",
		r.ready.Round(10*time.Millisecond), r.cpu.Seconds(), r.rss>>20, r.hwm>>20, r.settled.Round(10*time.Millisecond), r.rssSettled>>20, r.apps,
		ms(r.full.p50), ms(r.full.p99), float64(r.full.bytes)/(1<<20), ms(r.gzip.p50), ms(r.gzip.p99), float64(r.gzip.bytes)/(1<<20),
		r.tenantApps, ms(r.tenant.p50), ms(r.tenant.p99), r.rssAfter>>20, r.hwmAfter>>20, r.heap>>20) + r.teamText()
}

// teamText is the team's list, when it was timed.
func (r serveRun) teamText() string {
	if r.teamApps == 0 {
		return ""
	}
	return fmt.Sprintf("; the team's %d Apps p50 %s p99 %s", r.teamApps, ms(r.team.p50), ms(r.team.p99))
}

// measureServe starts bin over the set-up, measures it ready and its
// lists, saves its heap profile to profile, and stops it.
func measureServe(b *testing.B, bin string, s serveSetup, m *mockoidc.MockOIDC, tokens listTokens, requests int, profile string) serveRun {
	b.Helper()
	p := startServe(b, bin, s, m)
	defer p.stop()
	r := serveRun{ready: p.ready, cpu: p.cpu, settled: p.settled, rss: p.rss, hwm: p.hwm, rssSettled: p.rssSettled}
	r.apps = len(listApps(b, p.base, tokens.admin))
	r.tenantApps = len(listApps(b, p.base, tokens.tenant))
	r.full = timeList(b, p.base, tokens.admin, false, requests)
	r.gzip = timeList(b, p.base, tokens.admin, true, requests)
	r.tenant = timeList(b, p.base, tokens.tenant, false, requests)
	r.rssAfter, r.hwmAfter = clustertest.ProcMemory(b, p.pid)
	r.heap = liveHeap(b, p.metrics, profile)
	return r
}

// measureClusterDown starts deployd over the two clusters, measures its
// lists, stops the second cluster's API server and measures them again
// once deployd reports it down; then it starts another deployd while the
// cluster is still down.
func measureClusterDown(b *testing.B, bin string, two serveSetup, second *clustertest.Cluster, apps map[string]bool, m *mockoidc.MockOIDC, tokens listTokens, requests int) {
	b.Helper()
	p := startServe(b, bin, two, m)
	full, tenant := listApps(b, p.base, tokens.admin), listApps(b, p.base, tokens.tenant)
	up := [3]listFigures{
		timeList(b, p.base, tokens.admin, false, requests),
		timeList(b, p.base, tokens.admin, true, requests),
		timeList(b, p.base, tokens.tenant, false, requests),
	}

	second.StopAPIServer(b)
	stopped := time.Now()
	var failedIn, markedIn time.Duration
	for deadline := stopped.Add(2 * time.Minute); ; {
		if clusterFailed(b, p.base, tokens.admin, secondCluster) {
			failedIn = time.Since(stopped)
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s was not reported Failed %s after its API server stopped", secondCluster, time.Since(stopped).Round(time.Second))
		}
		time.Sleep(250 * time.Millisecond)
	}
	// Every App of the stopped cluster is listed with its last state and
	// a condition naming the cluster; the first cluster's carry none.
	var downFull []listedApp
	var others []string
	for deadline := time.Now().Add(2 * time.Minute); ; {
		downFull = listApps(b, p.base, tokens.admin)
		marked, unmarked, wrong := markedUnreachable(downFull, secondCluster, apps)
		if wrong != "" {
			b.Fatal(wrong)
		}
		if marked == len(apps) {
			markedIn, others = time.Since(stopped), unmarked
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of the %d Apps of %s are marked unreachable %s after it stopped", marked, len(apps), secondCluster, time.Since(stopped).Round(time.Second))
		}
		time.Sleep(500 * time.Millisecond)
	}
	if missing := missingApps(full, downFull); len(full) != len(downFull) || missing != "" {
		b.Fatalf("with %s down the full list holds %d Apps, %d before (missing %s)", secondCluster, len(downFull), len(full), missing)
	}
	if downTenant := listApps(b, p.base, tokens.tenant); len(downTenant) != len(tenant) || missingApps(tenant, downTenant) != "" {
		b.Fatalf("with %s down the tenant's list holds %d Apps, %d before (missing %s)", secondCluster, len(downTenant), len(tenant), missingApps(tenant, downTenant))
	}
	down := [3]listFigures{
		timeList(b, p.base, tokens.admin, false, requests),
		timeList(b, p.base, tokens.admin, true, requests),
		timeList(b, p.base, tokens.tenant, false, requests),
	}
	if !clusterFailed(b, p.base, tokens.admin, secondCluster) {
		b.Fatalf("%s answered again while its API server was stopped", secondCluster)
	}
	p.stop()

	// A deployd started while the second cluster is down.
	q := startServe(b, bin, two, m)
	defer q.stop()
	rows := listApps(b, q.base, tokens.admin)
	if want := len(full) - countIn(full, secondCluster); len(rows) != want || countIn(rows, secondCluster) != 0 {
		b.Fatalf("deployd started with %s down lists %d Apps (%d of %s), want the first cluster's %d", secondCluster, len(rows), countIn(rows, secondCluster), secondCluster, want)
	}
	if !clusterFailed(b, q.base, tokens.admin, secondCluster) {
		b.Fatalf("deployd started with %s down does not report it Failed", secondCluster)
	}

	var table strings.Builder
	fmt.Fprintf(&table, "| %s, %d requests a list at c=1 | both up | %s down | ratio |\n|---|---:|---:|---:|\n", two.name, requests, secondCluster)
	for i, name := range []string{"full list", "full list gzip", "tenant's list"} {
		fmt.Fprintf(&table, "| %s p50, ms | %s | %s | %.2f |\n", name, ms(up[i].p50), ms(down[i].p50), msf(down[i].p50)/msf(up[i].p50))
		fmt.Fprintf(&table, "| %s p99, ms | %s | %s | %.2f |\n", name, ms(up[i].p99), ms(down[i].p99), msf(down[i].p99)/msf(up[i].p99))
	}
	units := []string{"full", "gzip", "tenant"}
	for i := range down {
		b.ReportMetric(float64(down[i].p50.Microseconds())/1000, units[i]+"-p50-ms/down")
		b.ReportMetric(float64(down[i].p99.Microseconds())/1000, units[i]+"-p99-ms/down")
	}
	b.ReportMetric(q.ready.Seconds(), "s-to-ready/down")
	b.ReportMetric(failedIn.Seconds(), "s-to-failed/down")
	b.Logf("with %s's API server stopped: reported Failed in %s, its %d Apps marked in %s (its rows of other kinds, not marked: %v); the lists hold their %d and %d rows:\n%s",
		secondCluster, failedIn.Round(100*time.Millisecond), len(apps), markedIn.Round(100*time.Millisecond), others, len(full), len(tenant), table.String())
	b.Logf("a deployd started while %s is down: ready in %s (%.1f CPU s), rss %d MiB, peak %d MiB, %d Apps listed",
		secondCluster, q.ready.Round(10*time.Millisecond), q.cpu.Seconds(), q.rss>>20, q.hwm>>20, len(rows))
}

// listFigures are the latencies of one list, and its size.
type listFigures struct {
	p50, p99 time.Duration
	bytes    int64 // as sent: compressed when asked gzip
}

// listClient takes the lists: one connection kept alive, no transparent
// decompression, so a gzip answer is read as it was sent.
var listClient = &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DisableCompression: true}}

// timeList GETs the full Application list n times, one at a time, with
// the token (gzip: asking for it), after three requests not timed, and
// returns the latencies (from the request to the body's last byte).
func timeList(b *testing.B, base, token string, gzip bool, n int) listFigures {
	b.Helper()
	return timeGET(b, base+"/api/v1/applications", token, gzip, n)
}

// timeGET GETs u n times, one at a time, after three not timed, asking
// gzip when gzip is set; any answer but 200, or in the other encoding,
// fails.
func timeGET(b *testing.B, u, token string, gzip bool, n int) listFigures {
	b.Helper()
	var f listFigures
	took := make([]time.Duration, 0, n)
	for i := range n + 3 {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		if gzip {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		start := time.Now()
		resp, err := listClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		size, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %s, %v", u, resp.Status, err)
		}
		if enc := resp.Header.Get("Content-Encoding"); (enc == "gzip") != gzip {
			b.Fatalf("GET %s asked gzip=%t answered Content-Encoding %q", u, gzip, enc)
		}
		if i >= 3 {
			took = append(took, d)
			f.bytes = size
		}
	}
	slices.Sort(took)
	f.p50, f.p99 = took[len(took)/2], took[(len(took)*99+99)/100-1]
	return f
}

// listedApp is a row of the Application list: its namespace, name and
// conditions.
type listedApp struct {
	namespace, name string
	conditions      []string // "<type>: <message>"
}

// listApps is the token's full Application list, which must answer 200.
func listApps(b *testing.B, base, token string) []listedApp {
	b.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/api/v1/applications", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := listClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Items []struct {
			Metadata struct{ Name, Namespace string }
			Status   struct {
				Conditions []struct{ Type, Message string }
			}
		}
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 500))
		b.Fatalf("list: %s %s", resp.Status, body)
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		b.Fatalf("list: %v", err)
	}
	out := make([]listedApp, len(list.Items))
	for i, it := range list.Items {
		out[i] = listedApp{namespace: it.Metadata.Namespace, name: it.Metadata.Name}
		for _, c := range it.Status.Conditions {
			out[i].conditions = append(out[i].conditions, c.Type+": "+c.Message)
		}
	}
	return out
}

// ofCluster says whether a listed namespace is the named (not the
// first) cluster's.
func ofCluster(namespace, cluster string) bool {
	return strings.HasSuffix(namespace, "."+cluster)
}

// countIn counts the rows of the named cluster.
func countIn(rows []listedApp, cluster string) int {
	n := 0
	for _, r := range rows {
		if ofCluster(r.namespace, cluster) {
			n++
		}
	}
	return n
}

// markedUnreachable counts the App rows of the named cluster (apps holds
// their namespace/name, unqualified) that carry the condition saying it
// has not answered; unmarked are the cluster's other rows without it;
// wrong names a row of another cluster that carries one.
func markedUnreachable(rows []listedApp, cluster string, apps map[string]bool) (marked int, unmarked []string, wrong string) {
	want := "ComparisonError: cluster " + cluster + " has not answered since "
	for _, r := range rows {
		has := slices.ContainsFunc(r.conditions, func(c string) bool { return strings.HasPrefix(c, want) })
		ours := ofCluster(r.namespace, cluster)
		switch {
		case has && !ours:
			return marked, unmarked, fmt.Sprintf("%s/%s, not of %s, is marked: %v", r.namespace, r.name, cluster, r.conditions)
		case has && apps[strings.TrimSuffix(r.namespace, "."+cluster)+"/"+r.name]:
			marked++
		case ours && !has:
			unmarked = append(unmarked, r.namespace+"/"+r.name)
		}
	}
	return marked, unmarked, ""
}

// fleetApps are the namespace/name of the Apps (hanzo.ai App, not the
// site or the CD Application) of clustertest.FleetApps(apps, replicas).
func fleetApps(apps, replicas int) map[string]bool {
	out := map[string]bool{}
	for _, a := range clustertest.FleetApps(apps, replicas) {
		if a.Kind == fleet.KindApp {
			out[a.Namespace+"/"+a.Name] = true
		}
	}
	return out
}

// missingApps names a row of before that after does not hold, or "".
func missingApps(before, after []listedApp) string {
	have := make(map[string]bool, len(after))
	for _, r := range after {
		have[r.namespace+"/"+r.name] = true
	}
	for _, r := range before {
		if !have[r.namespace+"/"+r.name] {
			return r.namespace + "/" + r.name
		}
	}
	return ""
}

// clusterFailed says whether GET /api/v1/clusters reports the named
// cluster Failed.
func clusterFailed(b *testing.B, base, token, name string) bool {
	b.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/api/v1/clusters", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := listClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Items []struct {
			Name string
			Info struct {
				ConnectionState struct{ Status string }
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("clusters: %s, %v", resp.Status, err)
	}
	for _, it := range list.Items {
		if it.Name == name {
			return it.Info.ConnectionState.Status == "Failed"
		}
	}
	b.Fatalf("clusters: no %s in %+v", name, list.Items)
	return false
}

// liveHeap is the heap in use after a collection: the heap profile,
// saved to profile, is taken after one (?gc=1), then the metrics
// listener's gauge is read.
func liveHeap(b *testing.B, metrics, profile string) int64 {
	b.Helper()
	if err := fetchTo(metrics+"/debug/pprof/heap?gc=1", profile); err != nil {
		b.Fatalf("heap profile: %v", err)
	}
	return goMemstats(b, metrics+"/metrics")["go_memstats_heap_inuse_bytes"]
}

// serveRow is one figure of the comparison: its medians over one cluster
// and over two.
type serveRow struct {
	name, unit string
	one, two   float64
	format     func(float64) string
}

// serveRows are the figures of the comparison, each the median of its
// runs.
func serveRows(ones, twos []serveRun) []serveRow {
	secs := func(v float64) string { return fmt.Sprintf("%.1f", v) }
	mib := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	msec := func(v float64) string { return fmt.Sprintf("%.1f", v) }
	count := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	figures := []struct {
		name, unit string
		get        func(serveRun) float64
		format     func(float64) string
	}{
		{"time to ready, s", "s-to-ready", func(r serveRun) float64 { return r.ready.Seconds() }, secs},
		{"CPU to ready, s", "cpu-s-to-ready", func(r serveRun) float64 { return r.cpu.Seconds() }, secs},
		{"VmRSS at ready, MiB", "MiB-rss-ready", func(r serveRun) float64 { return float64(r.rss) / (1 << 20) }, mib},
		{"VmHWM at ready, MiB", "MiB-hwm-ready", func(r serveRun) float64 { return float64(r.hwm) / (1 << 20) }, mib},
		{"memory settled (every cluster ready, rows encoded), s", "s-to-settled", func(r serveRun) float64 { return r.settled.Seconds() }, secs},
		{"VmRSS once ready and settled, MiB", "MiB-rss-settled", func(r serveRun) float64 { return float64(r.rssSettled) / (1 << 20) }, mib},
		{"VmRSS after the lists, MiB", "MiB-rss-after", func(r serveRun) float64 { return float64(r.rssAfter) / (1 << 20) }, mib},
		{"VmHWM after the lists, MiB", "MiB-hwm-after", func(r serveRun) float64 { return float64(r.hwmAfter) / (1 << 20) }, mib},
		{"live heap after the lists, MiB", "MiB-heap-live", func(r serveRun) float64 { return float64(r.heap) / (1 << 20) }, mib},
		{"full list p50, ms", "full-p50-ms", func(r serveRun) float64 { return msf(r.full.p50) }, msec},
		{"full list p99, ms", "full-p99-ms", func(r serveRun) float64 { return msf(r.full.p99) }, msec},
		{"full list gzip p50, ms", "gzip-p50-ms", func(r serveRun) float64 { return msf(r.gzip.p50) }, msec},
		{"full list gzip p99, ms", "gzip-p99-ms", func(r serveRun) float64 { return msf(r.gzip.p99) }, msec},
		{"tenant's list p50, ms", "tenant-p50-ms", func(r serveRun) float64 { return msf(r.tenant.p50) }, msec},
		{"tenant's list p99, ms", "tenant-p99-ms", func(r serveRun) float64 { return msf(r.tenant.p99) }, msec},
		{"full list, MiB", "MiB-full", func(r serveRun) float64 { return float64(r.full.bytes) / (1 << 20) }, msec},
		{"full list gzip, MiB", "MiB-gzip", func(r serveRun) float64 { return float64(r.gzip.bytes) / (1 << 20) }, msec},
		{"Applications in the full list", "applications", func(r serveRun) float64 { return float64(r.apps) }, count},
		{"Applications in the tenant's list", "tenant-applications", func(r serveRun) float64 { return float64(r.tenantApps) }, count},
	}
	rows := make([]serveRow, 0, len(figures))
	for _, f := range figures {
		rows = append(rows, serveRow{name: f.name, unit: f.unit, format: f.format,
			one: medianOf(ones, f.get), two: medianOf(twos, f.get)})
	}
	return rows
}

// medianOf is the median of a figure over runs.
func medianOf(runs []serveRun, get func(serveRun) float64) float64 {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = get(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// msf is a duration in milliseconds.
func msf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// ms is a duration in milliseconds, written with one decimal.
func ms(d time.Duration) string { return fmt.Sprintf("%.1f", msf(d)) }
