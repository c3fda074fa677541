package load

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/fleet"
)

// BenchmarkSideBySide measures deployd beside the API server it reads and
// beside the limit (a server with no logic writing the same bytes), on one
// fleet in one run, and reports ratios: absolute times move between runs
// on a shared machine, ratios of one run do much less.
//
// A real kube-apiserver + etcd holds DEPLOYD_COMPARE_APPS Apps (default
// 10,000) of DEPLOYD_COMPARE_REPLICAS pods (default 10); the built deployd
// serves it. Three sections, each printed as a markdown table (and
// appended to $DEPLOYD_COMPARE_OUT when set):
//
//   - Lists: the full list (plain and gzip, a SuperAdmin), the acme
//     tenant's list and one of acme's Apps (an org member) from deployd;
//     the API server's LIST of the App CRs (all namespaces; in tenant-acme
//     with the label hanzo.ai/org=acme for the tenant) and GET of that
//     App, as JSON with its admin token; and the limit: a bare net/http
//     handler writing deployd's own bytes, in a process of its own (this
//     test binary re-executed), as deployd is. At concurrency 1 the same
//     handler also answers from this process, where no second process
//     wakes for a request; its own table shows what that is worth.
//     Each at concurrency 1 and 16 in a closed loop for
//     DEPLOYD_COMPARE_SECONDS (default 10): p50, p99, requests/s. deployd's
//     rows are a superset of the CRs (its static sites and CD Applications
//     too), and every client speaks HTTP/1.1, one connection per worker.
//   - Watch fan-out: DEPLOYD_COMPARE_WATCHERS streams (default 1000,10000)
//     of deployd's applications stream, of the API server's watch of Apps
//     from the list's resourceVersion, and of the fan-out limit (this test
//     binary re-executed as a program that writes each frame it is handed
//     to every socket, so its CPU is its own), while Apps change at
//     DEPLOYD_COMPARE_RATES (default 100,1000) a second. Each change stamps
//     the time it was sent into the App's tag; each client finds the stamp
//     in what it reads and adds its age to a histogram. The limit is handed
//     deployd's own frame, restamped, at the same rate. Figures: latency
//     p50/p99/max (from the moment the change was sent, so they include
//     the PATCH itself, whose own round trip is a row of its own),
//     delivered ÷ expected (what arrived within a bounded
//     drain after the changes stopped), CPU of the serving process per
//     delivered event, RSS per watcher.
//   - API-server load: the API server's CPU a second while the watchers
//     stream from deployd, and while the same number watch it directly.
//     Both windows include the API server's work on the changes themselves
//     (the PATCHes and deployd's one watch), so the difference is what the
//     watchers cost it.
//   - Replicas behind one Service (compare_replicas_test.go): the API
//     server's CPU with 1, 2 and 3 replicas serving
//     DEPLOYD_COMPARE_UPGRADE_CLIENTS SuperAdmin streams (default 1000)
//     while Apps change at DEPLOYD_COMPARE_UPGRADE_RATE a second (default
//     20), and the bytes sent to the clients and deployd's CPU during a
//     rolling upgrade of the three, beside a steady window before it.
//
// With DEPLOYD_COMPARE_PROFILES set to a directory, deployd serves its
// profiles (DEPLOY_PPROF) and a CPU profile of it is saved there for each
// of its list measurements: what bounds a ratio, read with go tool pprof.
//
// The lists are driven by vegeta (github.com/tsenart/vegeta/v12) as a
// library: a maintained load generator whose closed loop, latency
// quantiles and throughput are its own, not this harness's; only the
// stream clients, which no load generator speaks, are written here.
//
//	make bench-compare
//	DEPLOYD_COMPARE_APPS=2000 DEPLOYD_COMPARE_REPLICAS=1 DEPLOYD_COMPARE_WATCHERS=1000 make bench-compare
func BenchmarkSideBySide(b *testing.B) {
	cfg := compareConfig{
		apps:           clustertest.EnvInt(b, "DEPLOYD_COMPARE_APPS", 10_000),
		replicas:       clustertest.EnvInt(b, "DEPLOYD_COMPARE_REPLICAS", 10),
		watchers:       envInts(b, "DEPLOYD_COMPARE_WATCHERS", []int{1_000, 10_000}),
		rates:          envInts(b, "DEPLOYD_COMPARE_RATES", []int{100, 1_000}),
		concurrency:    []int{1, 16},
		upgradeClients: clustertest.EnvInt(b, "DEPLOYD_COMPARE_UPGRADE_CLIENTS", 1_000),
		upgradeRate:    clustertest.EnvInt(b, "DEPLOYD_COMPARE_UPGRADE_RATE", 20),
	}
	secs := time.Duration(clustertest.EnvInt(b, "DEPLOYD_COMPARE_SECONDS", 10)) * time.Second
	cfg.listTime, cfg.watchTime = secs, secs
	for range b.N {
		cmp := sideBySide(b, cfg)
		cmp.report(b)
	}
	b.ReportMetric(0, "ns/op")
}

// TestSideBySideSmoke runs the benchmark's code at a tiny scale and checks
// the shape of what it measured: every row there, every server answered
// every request, every watcher received changes, none refused or cut off.
// It checks no timing.
func TestSideBySideSmoke(t *testing.T) {
	cfg := compareConfig{
		apps: 60, replicas: 1,
		watchers: []int{50}, rates: []int{20}, concurrency: []int{1, 16},
		listTime: 400 * time.Millisecond, watchTime: 2 * time.Second,
		upgradeClients: 20, upgradeRate: 10,
	}
	cmp := sideBySide(t, cfg)
	cmp.report(t)
	for _, n := range cmp.notes {
		t.Errorf("note: %s", n)
	}
	if got, want := len(cmp.lists), 4*len(cfg.concurrency); got != want { // full, gzip, tenant, detail
		t.Errorf("list rows: got %d, want %d", got, want)
	}
	for i, row := range cmp.lists {
		if first := i%len(cfg.concurrency) == 0; first != (row.limitHere.requests > 0) || row.limitHere.fails > 0 {
			t.Errorf("%s c%d: the limit in this process answered %d requests, %d failed; want some at c%d only, none failed",
				row.name, row.deployd.concurrency, row.limitHere.requests, row.limitHere.fails, cfg.concurrency[0])
		}
		for server, r := range map[string]listResult{"deployd": row.deployd, "API server": row.api, "limit": row.limit} {
			if r.requests == 0 || r.fails > 0 || r.bytes == 0 {
				t.Errorf("%s c%d, %s: %d requests, %d failed, %d bytes: want some, none failed", row.name, r.concurrency, server, r.requests, r.fails, r.bytes)
			}
		}
	}
	if got, want := len(cmp.watch), len(cfg.watchers)*len(cfg.rates); got != want {
		t.Errorf("watch windows: got %d, want %d", got, want)
	}
	for _, w := range cmp.watch {
		for server, r := range map[string]watchResult{"deployd": w.deployd, "API server": w.api, "limit": w.limit} {
			if r.sent == 0 || r.delivered == 0 || r.refused > 0 || r.ended > 0 || r.silent > 0 || !r.drainedWithin {
				t.Errorf("%s, %d watchers at %d/s: sent %d, delivered %d of %d (drained: %v), %d refused, %d ended, %d received nothing",
					server, r.watchers, r.rate, r.sent, r.delivered, r.expected(), r.drainedWithin, r.refused, r.ended, r.silent)
			}
		}
	}
	if f := cmp.replicas; f == nil || f.apiCPU[0] <= 0 || f.apiCPU[2] <= 0 || f.upgradeConns == 0 || f.upgradeBytes == 0 || f.steadyBytes == 0 {
		t.Errorf("replicas section: %+v", f)
	}
	if sec := cmp.tables()[3]; strings.Count(sec, "\n| ") != 1+4 { // the header and a row for each list
		t.Errorf("placement table: want a row for each list:\n%s", sec)
	}
	for _, sec := range cmp.tables()[:3] {
		if !strings.Contains(sec, "| figure | deployd | API server | limit |") {
			t.Errorf("table without its header:\n%s", sec)
		}
	}
}

// compareConfig is the size of a run.
type compareConfig struct {
	apps, replicas      int
	watchers, rates     []int
	concurrency         []int
	listTime, watchTime time.Duration
	// upgradeClients streams through replicas at upgradeRate changes/s
	// (compare_replicas_test.go); 0: no replicas section.
	upgradeClients, upgradeRate int
}

// comparison is everything one run measured.
type comparison struct {
	cfg   compareConfig
	lists []listRow
	watch []watchWindow
	notes []string // what makes a figure doubtful (rows that differ between servers)
	// replicas is the replicas section (compare_replicas_test.go); nil when not run.
	replicas *replicaFigures
}

// watchWindow is one watcher count and rate measured on every server.
type watchWindow struct {
	watchers, rate      int
	deployd, api, limit watchResult
	apiBehindDeployd    time.Duration // the API server's CPU in deployd's window
}

// sideBySide starts the fleet, deployd and the limits, and measures.
func sideBySide(tb testing.TB, cfg compareConfig) *comparison {
	tb.Helper()
	raiseOpenFiles(tb) // before anything starts: the servers inherit it
	c := fleetCluster(tb, cfg.apps, cfg.replicas)
	id := startIdentity(tb)
	profiles := os.Getenv("DEPLOYD_COMPARE_PROFILES")
	var env []string
	if profiles != "" {
		env = append(env, withMetrics(tb), "DEPLOY_PPROF=true")
	}
	bin := buildDeployd(tb)
	d := startDeployd(tb, bin, c.Kubeconfig, id, env...)
	apiPID := c.PIDs()["kube-apiserver"]
	root, acme := id.token(tb, superAdmin, 12*time.Hour), id.token(tb, acmeMember, 12*time.Hour)
	ca := x509.NewCertPool()
	if !ca.AppendCertsFromPEM(c.CAData()) {
		tb.Fatal("the cluster's CA is not PEM")
	}
	conns := 2 * max(cfg.concurrency[len(cfg.concurrency)-1], 1)
	deploydHC, apiHC, limitHC := plainTransport(nil, conns), plainTransport(ca, conns), plainTransport(nil, conns)
	cmp := &comparison{cfg: cfg}

	// Lists: deployd's bytes first, for the limit to replay.
	get := func(server string, hc *http.Client, u string, h http.Header) listTarget {
		return listTarget{server: server, hc: hc, target: vegeta.Target{Method: http.MethodGet, URL: u, Header: h}}
	}
	apps := c.URL() + "/apis/hanzo.ai/v1/apps"
	tenantApps := c.URL() + "/apis/hanzo.ai/v1/namespaces/" + fleet.NamespaceAcme + "/apps?labelSelector=" + url.QueryEscape(fleet.LabelOrg+"=acme")
	// One of acme's Apps, read by its member: deployd's Application, the
	// API server's App.
	var detail fleet.App
	for _, a := range fleet.Generate(1, cfg.apps) {
		if a.Kind == fleet.KindApp && a.Namespace == fleet.NamespaceAcme && a.Org == "acme" {
			detail = a
			break
		}
	}
	if detail.Name == "" {
		tb.Fatalf("the fleet of %d Apps has none of acme's", cfg.apps)
	}
	appDetail := d.Base + "/api/v1/applications/" + detail.Name + "?appNamespace=" + detail.Namespace
	apiDetail := c.URL() + "/apis/hanzo.ai/v1/namespaces/" + detail.Namespace + "/apps/" + detail.Name
	kinds := []struct {
		name, path   string
		deployd, api listTarget
	}{
		{name: "full list", path: "/full", deployd: get("deployd", deploydHC, d.Base+"/v1/deploy/applications", bearer(root)), api: get("API server", apiHC, apps, bearer(c.Config.BearerToken))},
		{name: "full list gzip", path: "/full.gz", deployd: get("deployd", deploydHC, d.Base+"/v1/deploy/applications", withGzip(bearer(root), true)), api: get("API server", apiHC, apps, withGzip(bearer(c.Config.BearerToken), true))},
		{name: "tenant list", path: "/tenant", deployd: get("deployd", deploydHC, d.Base+"/v1/deploy/applications", bearer(acme)), api: get("API server", apiHC, tenantApps, bearer(c.Config.BearerToken))},
		{name: "app detail", path: "/detail", deployd: get("deployd", deploydHC, appDetail, bearer(acme)), api: get("API server", apiHC, apiDetail, bearer(c.Config.BearerToken))},
	}
	canned := map[string]cannedResponse{}
	for _, k := range kinds {
		body, h := k.deployd.get(tb)
		canned[k.path] = cannedResponse{Body: body, ContentType: h.Get("Content-Type"), ContentEncoding: h.Get("Content-Encoding")}
	}
	// The same rows on both sides: the acme member also sees acme's static
	// site (a row deployd derives, not an App CR).
	var wantApps, wantSites int
	for _, a := range fleet.Generate(1, cfg.apps) {
		if a.Namespace == fleet.NamespaceAcme && a.Org == "acme" {
			switch a.Kind {
			case fleet.KindApp:
				wantApps++
			case fleet.KindSite:
				wantSites++
			}
		}
	}
	if dn, an := itemCount(tb, canned["/tenant"].Body), itemCount(tb, mustGet(tb, kinds[2].api)); dn != wantApps+wantSites || an != wantApps || an == 0 {
		cmp.note(tb, "tenant list: deployd has %d rows, the API server %d Apps; the fleet has %d Apps and %d sites in %s", dn, an, wantApps, wantSites, fleet.NamespaceAcme)
	}
	limit := startListLimit(tb, canned)
	for _, k := range kinds {
		gz := withGzip(http.Header{}, strings.HasSuffix(k.path, ".gz"))
		lim, here := get("limit", limitHC, limit.Base+k.path, gz), get("limit here", limitHC, limit.here.URL+k.path, gz)
		for i, n := range cfg.concurrency {
			row := listRow{name: k.name}
			type measure struct {
				t   listTarget
				res *listResult
			}
			servers := []measure{{k.deployd, &row.deployd}, {k.api, &row.api}, {lim, &row.limit}}
			if i == 0 {
				servers = append(servers, measure{here, &row.limitHere})
			}
			for _, m := range servers {
				body, _ := m.t.get(tb)
				var profiled chan struct{}
				if profiles != "" && m.t.server == "deployd" {
					profiled = d.cpuProfile(tb, cfg.listTime-time.Second, filepath.Join(profiles, fmt.Sprintf("%s-c%d.pprof", strings.ReplaceAll(k.name, " ", "-"), n)))
				}
				*m.res = m.t.attack(tb, n, cfg.listTime)
				if profiled != nil {
					<-profiled
				}
				m.res.bytes = len(body)
				tb.Logf("%s, %s: %s", k.name, m.t.server, m.res)
			}
			cmp.lists = append(cmp.lists, row)
		}
	}

	// Watch fan-out.
	ch := newChanger(tb, c)
	fan := startFanoutLimit(tb)
	// Apps in turn, rate a second until ctx ends; a change in flight then
	// completes, so every change sent is counted and none is cut halfway.
	var turn atomic.Int64
	change := func(ctx context.Context, rate int, took *latencies) int64 {
		before := ch.Sent.Load()
		pace(ctx, rate, max(16, rate/4), func() {
			t0 := time.Now()
			ch.change(tb.Context(), ch.apps[int(turn.Add(1))%len(ch.apps)])
			took.add(time.Since(t0))
		})
		return ch.Sent.Load() - before
	}
	streamHC := func(rootCAs *x509.CertPool) *http.Client {
		hc := plainTransport(rootCAs, 1)
		hc.Timeout = 0
		return hc
	}
	var deploydRV, apiRV string
	deploydSrv := watchServer{name: "deployd", pid: d.PID(), also: []int{apiPID}, hc: streamHC(nil), drive: change,
		open: func(ctx context.Context) *http.Request {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.Base+"/v1/deploy/stream/applications?resourceVersion="+deploydRV, nil)
			req.Header.Set("Authorization", "Bearer "+root)
			req.Header.Set("Accept", "text/event-stream")
			return req
		}}
	apiSrv := watchServer{name: "API server", pid: apiPID, hc: streamHC(ca), drive: change,
		open: func(ctx context.Context) *http.Request {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, apps+"?watch=1&resourceVersion="+apiRV, nil)
			req.Header.Set("Authorization", "Bearer "+c.Config.BearerToken)
			return req
		}}
	limitSrv := watchServer{name: "limit", pid: fan.PID(), hc: streamHC(nil),
		open: func(ctx context.Context) *http.Request {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fan.Base+"/stream", nil)
			return req
		}}
	drain := max(10*time.Second, cfg.watchTime)
	for _, n := range cfg.watchers {
		for _, rate := range cfg.rates {
			w := watchWindow{watchers: n, rate: rate}
			deploydRV = listRV(tb, deploydHC, d.Base+"/v1/deploy/applications", root)
			w.deployd = measureWatch(tb, deploydSrv, n, rate, cfg.watchTime, drain)
			if len(w.deployd.alsoCPU) == 1 {
				w.apiBehindDeployd = w.deployd.alsoCPU[0]
			}
			apiRV = listRV(tb, apiHC, apps+"?limit=1", c.Config.BearerToken)
			cut0 := terminatedWatchers(tb, apiHC, c.URL(), c.Config.BearerToken)
			w.api = measureWatch(tb, apiSrv, n, rate, cfg.watchTime, drain)
			if cut := terminatedWatchers(tb, apiHC, c.URL(), c.Config.BearerToken) - cut0; cut > 0 {
				cmp.note(tb, "N=%d, %d/s: the API server closed %d of its watches as unresponsive (apiserver_terminated_watchers_total): "+
					"a watcher whose buffer stays full past the dispatch budget is cut, where deployd queues %d frames a client", n, rate, int64(cut), 1024)
			}
			sample := w.deployd.sample
			if sample == nil {
				tb.Fatalf("no deployd stream received a stamped frame at %d watchers, %d/s", n, rate)
			}
			if len(cmp.watch) == 0 {
				tb.Logf("a deployd frame: %s", around(sample, stampPrefix, 400))
				tb.Logf("an API server event: %s", around(w.api.sample, stampPrefix, 400))
			}
			limitSrv.drive = func(ctx context.Context, rate int, took *latencies) int64 {
				return publishAt(ctx, fan, sample, rate, max(16, rate/10), took)
			}
			w.limit = measureWatch(tb, limitSrv, n, rate, cfg.watchTime, drain)
			cmp.watch = append(cmp.watch, w)
		}
	}
	if d.panics() {
		tb.Fatalf("deployd panicked:\n%s", tail(d.log.String(), 40))
	}
	if cfg.upgradeClients > 0 {
		d.stop()
		cmp.replicas = measureReplicas(tb, cfg, c, id, bin)
	}
	return cmp
}

func (cmp *comparison) note(tb testing.TB, format string, args ...any) {
	tb.Helper()
	tb.Logf("NOTE: "+format, args...)
	cmp.notes = append(cmp.notes, fmt.Sprintf(format, args...))
}

// mustGet is t's body (the check that it answers at all is get's).
func mustGet(tb testing.TB, t listTarget) []byte {
	tb.Helper()
	body, _ := t.get(tb)
	return body
}

// cpuProfile saves a CPU profile of deployd over the next d to path (its
// pprof endpoint on the metrics listener), in the background; the channel
// closes when it is written.
func (d *deployd) cpuProfile(tb testing.TB, d0 time.Duration, path string) chan struct{} {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	u := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", d.metricsAddr(), max(1, int(d0.Seconds())))
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := (&http.Client{Timeout: d0 + time.Minute}).Get(u)
		if err != nil {
			tb.Logf("cpu profile: %v", err)
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(path)
		if err == nil {
			_, err = io.Copy(f, resp.Body)
			err = errors.Join(err, f.Close())
		}
		if err != nil || resp.StatusCode != http.StatusOK {
			tb.Logf("cpu profile %s: %v (%d)", path, err, resp.StatusCode)
			return
		}
		tb.Logf("cpu profile of deployd: %s", path)
	}()
	return done
}

// terminatedWatchers is the API server's count of watches of Apps it
// closed because the watcher did not keep up (its own metric).
func terminatedWatchers(tb testing.TB, hc *http.Client, base, token string) float64 {
	tb.Helper()
	req, _ := http.NewRequestWithContext(tb.Context(), http.MethodGet, base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		tb.Fatalf("the API server's metrics: %v", err)
	}
	defer resp.Body.Close()
	var n float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_terminated_watchers_total{") || !strings.Contains(line, `resource="apps"`) {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			n += v
		}
	}
	return n
}

// listRV is a list's metadata.resourceVersion: where a watch or stream
// that must see every later change starts.
func listRV(tb testing.TB, hc *http.Client, u, token string) string {
	tb.Helper()
	t := listTarget{server: u, hc: hc, target: vegeta.Target{Method: http.MethodGet, URL: u, Header: bearer(token)}}
	var l struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(mustGet(tb, t), &l); err != nil || l.Metadata.ResourceVersion == "" {
		tb.Fatalf("%s: no metadata.resourceVersion (%v)", u, err)
	}
	return l.Metadata.ResourceVersion
}

// envInts reads a comma-separated list of positive numbers, def when unset.
func envInts(tb testing.TB, key string, def []int) []int {
	tb.Helper()
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			tb.Fatalf("%s=%q: want positive numbers separated by commas", key, v)
		}
		out = append(out, n)
	}
	return out
}

// around is b cut to n bytes on each side of the first occurrence of s.
func around(b []byte, s string, n int) string {
	i := strings.Index(string(b), s)
	if i < 0 {
		return fmt.Sprintf("%.*s", 2*n, b)
	}
	return fmt.Sprintf("…%s…", b[max(0, i-n):min(len(b), i+n)])
}
