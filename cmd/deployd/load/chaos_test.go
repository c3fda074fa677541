package load

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/fleet"
	"github.com/hanzoai/deploy/projection"
)

// chaosScale sizes the fault scenarios. DEPLOYD_CHAOS_SCALE=full is the
// figures make chaos promises; mid a run a shared machine can take; unset,
// a smoke that make test runs (a tiny fleet, tens of clients, seconds).
type chaosScale struct {
	name                 string
	apps, replicas       int
	killClients          int // scenario 1
	stormClients         int // scenario 2
	relistClients        int // scenario 3
	slowClients          int // scenario 4, a tenth of them slow
	loadClients          int // scenario 5, streaming while bad input comes
	rate                 int // changes/s of scenarios 1 and 5
	stormRate            int // changes/s of scenario 2 (see chaosStorm)
	slowRate             int // changes/s of scenario 4
	relistRate           int // changes/s of scenario 3
	stormWindow          time.Duration
	steady               time.Duration // how long a steady state is measured
	badRequests          int
	converge, slowBudget time.Duration // deadlines
	// tenant: the clients are members of the acme org and the changes go
	// to its Apps (every change reaches every client), while deployd holds
	// the whole fleet; else SuperAdmins watching a fleet small enough that
	// thousands of them can each take its burst.
	tenant bool
}

var chaosScales = map[string]chaosScale{
	"": {name: "smoke", apps: 30, replicas: 4, killClients: 20, stormClients: 40, relistClients: 20, slowClients: 20,
		loadClients: 10, rate: 50, stormRate: 50, slowRate: 200, relistRate: 100, stormWindow: 2 * time.Second, steady: time.Second,
		badRequests: 3000, converge: 30 * time.Second, slowBudget: 45 * time.Second},
	"mid": {name: "mid", apps: 2000, replicas: 1, killClients: 500, stormClients: 1000, relistClients: 300, slowClients: 300,
		loadClients: 100, rate: 100, stormRate: 100, slowRate: 200, relistRate: 500, stormWindow: 15 * time.Second, steady: 5 * time.Second,
		badRequests: 20000, converge: 3 * time.Minute, slowBudget: 90 * time.Second, tenant: true},
	"full": {name: "full", apps: 10000, replicas: 10, killClients: 2000, stormClients: 10000, relistClients: 1000, slowClients: 1000,
		loadClients: 500, rate: 100, stormRate: 20, slowRate: 100, relistRate: 1000, stormWindow: 30 * time.Second, steady: 10 * time.Second,
		badRequests: 100000, converge: 10 * time.Minute, slowBudget: 5 * time.Minute, tenant: true},
}

// chaosRow is one line of the summary table.
type chaosRow struct {
	scenario, checked, result, converge string
	notes                               []string
}

// chaosEnv is what the scenarios share: one fleet, one deployd, one
// changer; each scenario brings its own clients and stops them.
type chaosEnv struct {
	sc   chaosScale
	c    *clustertest.Cluster
	id   *identity
	d    *deployd
	ch   *changer
	apps *appIndex
	// namespace holds the Apps the clients see ("" for all of them).
	namespace string
	token     string
	hc        *http.Client
}

// TestChaos runs the fault scenarios against the built binary, a real API
// server and etcd, each under load, each judged against the API server's
// own LIST at the end (see each scenario's doc comment for its promise).
// It prints a summary table, also written to $DEPLOYD_CHAOS_OUT when set.
func TestChaos(t *testing.T) {
	sc, ok := chaosScales[os.Getenv("DEPLOYD_CHAOS_SCALE")]
	if !ok {
		t.Fatalf("DEPLOYD_CHAOS_SCALE=%q: want full, mid or nothing (a smoke)", os.Getenv("DEPLOYD_CHAOS_SCALE"))
	}
	files := raiseOpenFiles(t)
	t.Logf("scale %s: %d Apps × %d pods; open files %d", sc.name, sc.apps, sc.replicas, files)
	c := fleetCluster(t, sc.apps, sc.replicas)
	id := startIdentity(t)
	d := startDeployd(t, buildDeployd(t), c.Kubeconfig, id, withMetrics(t))
	user, namespace := superAdmin, metav1.NamespaceAll
	if sc.tenant {
		// A SuperAdmin's burst at 10,000 Apps is 25 MB: thousands of them
		// reconnecting would measure loopback copies, not deployd.
		user, namespace = acmeMember, fleet.NamespaceAcme
	}
	ch := newChangerIn(t, c, namespace)
	keys := make([]string, len(ch.apps))
	for i, a := range ch.apps {
		keys[i] = a.Namespace + "/" + a.Name
	}
	e := &chaosEnv{sc: sc, c: c, id: id, d: d, ch: ch, apps: newAppIndex(keys),
		namespace: namespace, token: id.token(t, user, 4*time.Hour), hc: newStreamHTTPClient(false)}

	scenarios := []struct {
		name string
		run  func(*testing.T, *chaosEnv, *chaosRow)
	}{
		{"kill", chaosKill},
		{"storm", chaosStorm},
		{"relist", chaosRelist},
		{"slow", chaosSlow},
		{"badinput", chaosBadInput},
	}
	var rows []chaosRow
	for _, s := range scenarios {
		row := chaosRow{scenario: s.name, converge: "—"}
		t.Run(s.name, func(t *testing.T) {
			start := time.Now()
			defer func() {
				row.result = "pass"
				if t.Failed() {
					row.result = "**FAIL**"
				}
				t.Logf("%s: %s in %s; converged %s; %s", s.name, row.result, time.Since(start).Round(time.Millisecond), row.converge, strings.Join(row.notes, "; "))
			}()
			s.run(t, e, &row)
		})
		rows = append(rows, row)
	}
	table := chaosTable(sc, rows)
	t.Logf("faults, scale %s:\n%s", sc.name, table)
	if out := os.Getenv("DEPLOYD_CHAOS_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func chaosTable(sc chaosScale, rows []chaosRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Fleet: %d Apps × %d pods (scale %s), %s.\n\n", sc.apps, sc.replicas, sc.name, time.Now().UTC().Format(time.DateOnly))
	b.WriteString("| scenario | what was checked | result | time to converge |\n|---|---|---|---|\n")
	for _, r := range rows {
		res := r.result
		if len(r.notes) > 0 {
			res += ": " + strings.Join(r.notes, "; ")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.scenario, r.checked, res, r.converge)
	}
	return b.String()
}

func (r *chaosRow) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// clients starts n clients of the applications stream as the scale's
// caller (a SuperAdmin, or an acme member); they stop when the test ends, and stop returns once
// they all have.
func (e *chaosEnv) clients(t *testing.T, n int, hc *http.Client) (cs []*esClient, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	for range n {
		c := newESClient(e.d.Base+"/v1/deploy/stream/applications", e.token, hc, e.apps)
		c.start(ctx)
		cs = append(cs, c)
	}
	stop = func() {
		cancel()
		for _, c := range cs {
			<-c.done
		}
	}
	t.Cleanup(stop)
	return cs, sync.OnceFunc(stop)
}

// waitAll waits until cond holds for every client, up to timeout.
func waitAll(t *testing.T, cs []*esClient, timeout time.Duration, what string, cond func(int, *esClient) bool) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	next := 0
	ok := waitFor(ctx, func() bool {
		for next < len(cs) && cond(next, cs[next]) {
			next++
		}
		return next == len(cs)
	})
	if !ok {
		t.Errorf("%d of %d clients not %s within %s", len(cs)-next, len(cs), what, timeout)
	}
	return ok
}

// runChanger changes the fleet at rate until the returned stop is called;
// stop returns once no change is in flight from the changer (one it gave
// up on may still be committed by the API server: see truth).
func (e *chaosEnv) runChanger(t *testing.T, rate int) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { e.ch.run(ctx, rate, max(8, rate/10)) })
	return sync.OnceFunc(func() { cancel(); wg.Wait() })
}

// truth lists the fleet's Apps from the API server: the tag of each, and
// the other rows a view may hold (CD Applications, Middlewares).
func (e *chaosEnv) truth(t *testing.T) *truth {
	t.Helper()
	// A change whose PATCH the stopped changer gave up on may still be
	// committed after it returned: the API server finishes a write whose
	// client went away. The truth is the LIST once it holds still: the
	// same tags twice, settleGap apart.
	const settleGap = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), e.sc.converge)
	defer cancel()
	tr := e.listTruth(t)
	for {
		select {
		case <-ctx.Done():
			t.Fatalf("the API server's Apps did not hold still for %s within %s after the changes stopped", settleGap, e.sc.converge)
		case <-time.After(settleGap):
		}
		next := e.listTruth(t)
		if slices.Equal(next.tags, tr.tags) {
			return next
		}
		tr = next
	}
}

// listTruth is one LIST of the Apps (and the names of the other row kinds).
func (e *chaosEnv) listTruth(t *testing.T) *truth {
	t.Helper()
	dyn := e.c.Dynamic()
	list, err := dyn.Resource(projection.KindApp.GVR()).Namespace(e.namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list Apps: %v", err)
	}
	tr := &truth{tags: make([]uint64, len(e.apps.keys)), others: map[string]bool{}}
	for _, it := range list.Items {
		ix, ok := e.apps.idx[it.GetNamespace()+"/"+it.GetName()]
		if !ok {
			t.Errorf("App %s/%s appeared during the run", it.GetNamespace(), it.GetName())
			continue
		}
		tag, _, _ := unstructured.NestedString(it.Object, "spec", "image", "tag")
		tr.tags[ix] = tagHash([]byte(tag))
	}
	for _, k := range []projection.Kind{projection.KindCDApplication, projection.KindMiddleware} {
		l, err := dyn.Resource(k.GVR()).Namespace(e.namespace).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			continue // a CRD not served: no row of that kind
		}
		for _, it := range l.Items {
			tr.others[it.GetNamespace()+"/"+it.GetName()] = true
		}
	}
	return tr
}

// converge waits until every client's view equals tr and returns how long
// it took, counted from its call (after truth has settled); on the deadline
// it reports the clients that differ.
func (e *chaosEnv) converge(t *testing.T, cs []*esClient, tr *truth) (time.Duration, bool) {
	t.Helper()
	start := time.Now()
	ok := waitAll(t, cs, e.sc.converge, "equal to the API server's LIST", func(_ int, c *esClient) bool {
		m, w, x := c.diff(tr)
		return m+w+x == 0
	})
	took := time.Since(start)
	regress := 0
	for _, c := range cs {
		c.mu.Lock()
		regress += c.regress
		c.mu.Unlock()
	}
	if regress > 0 {
		t.Errorf("%d event ids went backwards within a stream", regress)
	}
	if !ok {
		bad := 0
		for _, c := range cs {
			if m, w, x := c.diff(tr); m+w+x > 0 {
				if bad < 3 {
					t.Errorf("a view differs from the API server: %d Apps missing, %d with another tag, %d rows of no kind listed", m, w, x)
				}
				bad++
			}
		}
		t.Errorf("%d of %d views differ from the API server's LIST", bad, len(cs))
	}
	return took, ok
}

// loadFor lets the load run for d: a span of time under load, which is
// what is measured, not a stand-in for a condition.
func loadFor(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// withMetrics gives deployd a metrics listener on a free loopback port.
func withMetrics(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "DEPLOYD_METRICS_LISTEN=" + addr
}

// metricsClient opens a connection per scrape: an idle kept-alive one
// would be a goroutine of deployd's, counted in go_goroutines.
// A fleet's scrape is megabytes (an info series per App), read while
// deployd serves thousands of streams: the timeout is generous.
var metricsClient = &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}

// metric reads one figure (summed over its label sets) from deployd's
// metrics listener.
func (d *deployd) metric(tb testing.TB, name string) float64 {
	tb.Helper()
	resp, err := metricsClient.Get("http://" + d.metricsAddr() + "/metrics")
	if err != nil {
		tb.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	sum, found := 0.0, false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if !strings.HasPrefix(rest, " ") && !strings.HasPrefix(rest, "{") {
			continue
		}
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil {
			sum, found = sum+v, true
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatalf("metrics: reading the scrape: %v", err)
	}
	if !found {
		tb.Fatalf("metrics: no %s", name)
	}
	return sum
}

// cpuSampler records deployd's CPU use in 1-second samples (CPU seconds
// per second) until stop.
type cpuSampler struct {
	mu      sync.Mutex
	samples []float64
	stop    func()
}

func sampleCPU(t *testing.T, pid int) *cpuSampler {
	s := &cpuSampler{}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		last, at := procCPU(t, pid), time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				cpu := procCPU(t, pid)
				s.mu.Lock()
				s.samples = append(s.samples, (cpu-last).Seconds()/now.Sub(at).Seconds())
				s.mu.Unlock()
				last, at = cpu, now
			}
		}
	})
	s.stop = sync.OnceFunc(func() { cancel(); wg.Wait() })
	t.Cleanup(s.stop)
	return s
}

// mean and peak of the samples taken so far.
func (s *cpuSampler) figures() (mean, peak float64, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.samples {
		mean += v
		peak = max(peak, v)
	}
	if len(s.samples) > 0 {
		mean /= float64(len(s.samples))
	}
	return mean, peak, len(s.samples)
}

// percentile of ds (sorted in place); 0 when empty.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(float64(len(ds))*p))]
}

// panicked reports a panic or a recovered handler panic in deployd's log.
func (d *deployd) panicked() bool {
	s := d.log.String()
	return d.panics() || strings.Contains(s, "handler panicked") || strings.Contains(s, "panic serving")
}

// listenOverflows is the host's TcpExtListenOverflows: SYNs dropped
// because a listen queue was full. false when /proc/net/netstat does not
// say.
func listenOverflows() (int64, bool) {
	b, err := os.ReadFile("/proc/net/netstat")
	if err != nil {
		return 0, false
	}
	return parseListenOverflows(string(b))
}

// parseListenOverflows reads ListenOverflows from /proc/net/netstat's
// text: a "TcpExt:" line of names followed by a "TcpExt:" line of values.
func parseListenOverflows(netstat string) (int64, bool) {
	var names []string
	for line := range strings.Lines(netstat) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "TcpExt:" {
			continue
		}
		if names == nil {
			names = f[1:]
			continue
		}
		for i, name := range names {
			if name == "ListenOverflows" && i+1 < len(f) {
				v, err := strconv.ParseInt(f[i+1], 10, 64)
				return v, err == nil
			}
		}
		return 0, false
	}
	return 0, false
}
