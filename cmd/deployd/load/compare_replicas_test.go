package load

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hanzoai/deploy/cluster/clustertest"
)

// The side-by-side benchmark's replicas section (sideBySide runs it last,
// when compareConfig.upgradeClients > 0): deployd as several replicas
// behind one Service (newRRProxy), with upgradeClients SuperAdmin streams
// through it while Apps change at upgradeRate a second.
//
//   - API-server load by replicas: the API server's CPU a second, and all
//     replicas' together, in a window of watchTime with 1, 2 and 3
//     replicas serving the same clients (each replica is one more watch of
//     the fleet on the API server; the clients are spread over them).
//   - Rolling upgrade: with 3 replicas, each in turn gets SIGTERM, exits
//     and starts again (DEPLOYD_DRAIN_DELAY=1s, DEPLOYD_DRAIN_SPREAD=3s), as
//     a Deployment's rollout does. Figures: bytes the proxy relayed to the
//     clients, deployd's CPU (every process's, the ones that exited counted
//     to their exit) and the API server's, in the upgrade window and in a
//     steady window of watchTime just before it; and the resets the
//     clients were told in the upgrade (every reset is a full burst: at
//     10,000 Apps about 25 MB a SuperAdmin).
//
// The clients start at the position of a list (Last-Event-ID, no burst):
// a thousand SuperAdmin bursts of a large fleet would measure loopback.

// replicaFigures is what the replicas section measured.
type replicaFigures struct {
	clients, rate int
	window        time.Duration
	// by replica count 1, 2, 3: CPU seconds a second
	apiCPU, deploydCPU [3]float64
	// the rolling upgrade beside a steady window of the same length
	steadySecs, upgradeSecs               float64
	steadyBytes, upgradeBytes             int64
	steadyDeploydCPU, upgradeDeploydCPU   time.Duration
	steadyAPICPU, upgradeAPICPU           time.Duration
	upgradeResets, upgradeConns, exitSlow int
}

// replicaGroup is the replicas of one measurement and their CPU so far:
// for a process that exited, its CPU at exit.
type replicaGroup struct {
	tb testing.TB
	ds []*deployd
}

// cpu is the CPU every process of the group has used (the running ones
// so far, the ones that exited until their exit) plus done.
func (g *replicaGroup) cpu() time.Duration {
	var sum time.Duration
	for _, d := range g.ds {
		select {
		case <-d.exited:
			if st := d.cmd.ProcessState; st != nil {
				sum += st.UserTime() + st.SystemTime()
			}
		default:
			sum += procCPU(g.tb, d.PID())
		}
	}
	return sum
}

// measureReplicas runs the replicas section against the fleet of c.
func measureReplicas(tb testing.TB, cfg compareConfig, c *clustertest.Cluster, id *identity, bin string) *replicaFigures {
	tb.Helper()
	f := &replicaFigures{clients: cfg.upgradeClients, rate: cfg.upgradeRate, window: cfg.watchTime}
	apiPID := c.PIDs()["kube-apiserver"]
	root := id.token(tb, superAdmin, 12*time.Hour)
	ch := newChanger(tb, c)
	keys := make([]string, len(ch.apps))
	for i, a := range ch.apps {
		keys[i] = a.Namespace + "/" + a.Name
	}
	apps := newAppIndex(keys)
	hc := newStreamHTTPClient(false)
	listHC := &http.Client{Timeout: time.Minute}

	ctx, stopChanges := context.WithCancel(tb.Context())
	var wg sync.WaitGroup
	wg.Go(func() { ch.run(ctx, cfg.upgradeRate, max(8, cfg.upgradeRate/10)) })
	defer func() { stopChanges(); wg.Wait() }()

	g := &replicaGroup{tb: tb}
	var (
		cs      []*esClient
		stopCs  func()
		px      *clustertest.Service
		clients = func(base string) {
			rv := listRV(tb, listHC, base+"/v1/deploy/applications", root)
			cctx, cancel := context.WithCancel(tb.Context())
			cs = cs[:0]
			for range cfg.upgradeClients {
				cl := newESClient(base+streamsPath, root, hc, apps)
				if err := cl.resumeAt(rv); err != nil {
					tb.Fatalf("list resourceVersion: %v", err)
				}
				cl.start(cctx)
				cs = append(cs, cl)
			}
			stopCs = sync.OnceFunc(func() {
				cancel()
				for _, cl := range cs {
					<-cl.done
				}
			})
			tb.Cleanup(stopCs)
			if !waitAllTB(tb, cs, 10*time.Minute, func(cl *esClient) bool { return cl.synced() }) {
				tb.Fatalf("not every client of %d streamed within 10 minutes", cfg.upgradeClients)
			}
		}
	)
	for k := 1; k <= 3; k++ {
		g.ds = append(g.ds, startDeployd(tb, bin, c.Kubeconfig, id, drainEnv...))
		if stopCs != nil {
			stopCs()
		}
		px = newRRProxy(tb, g.ds...)
		px.WaitReady(tb, time.Minute)
		clients(px.Base)
		api0, d0, at := procCPU(tb, apiPID), g.cpu(), time.Now()
		loadFor(tb.Context(), cfg.watchTime)
		el := time.Since(at)
		f.apiCPU[k-1] = perSecond(procCPU(tb, apiPID)-api0, el)
		f.deploydCPU[k-1] = perSecond(g.cpu()-d0, el)
		tb.Logf("%d replica(s), %d SuperAdmin streams, %d changes/s: API server %.3f CPU s/s, deployd (all) %.3f", k, cfg.upgradeClients, cfg.upgradeRate, f.apiCPU[k-1], f.deploydCPU[k-1])
	}

	resets := func() (r, conns int) {
		for _, cl := range cs {
			cl.mu.Lock()
			r += cl.resets
			conns += len(cl.conns)
			cl.mu.Unlock()
		}
		return r, conns
	}
	// A steady window of watchTime, then the upgrade (the figures a
	// second compare the two).
	b0, api0, d0, at := px.ToClients(), procCPU(tb, apiPID), g.cpu(), time.Now()
	loadFor(tb.Context(), cfg.watchTime)
	f.steadySecs = time.Since(at).Seconds()
	f.steadyBytes, f.steadyAPICPU, f.steadyDeploydCPU = px.ToClients()-b0, procCPU(tb, apiPID)-api0, g.cpu()-d0

	r0, n0 := resets()
	b0, api0, at = px.ToClients(), procCPU(tb, apiPID), time.Now()
	// deployd's CPU in the upgrade: each old process from the window's
	// start to its exit, each new one from its start to the window's end.
	var old time.Duration
	starts := make([]time.Duration, len(g.ds))
	for i, d := range g.ds {
		starts[i] = procCPU(tb, d.PID())
	}
	for i, d := range g.ds {
		took, killed := terminate(d, 30*time.Second)
		if killed {
			f.exitSlow++
		}
		if st := d.cmd.ProcessState; st != nil {
			old += st.UserTime() + st.SystemTime() - starts[i]
		}
		d.start()
		tb.Logf("replica %d: exited %s after SIGTERM", i+1, took.Round(time.Millisecond))
	}
	if !waitAllTB(tb, cs, 5*time.Minute, func(cl *esClient) bool { return cl.synced() }) {
		tb.Errorf("not every client streamed again within 5 minutes of the upgrade")
	}
	f.upgradeSecs = time.Since(at).Seconds()
	f.upgradeDeploydCPU = old + g.cpu()
	f.upgradeBytes, f.upgradeAPICPU = px.ToClients()-b0, procCPU(tb, apiPID)-api0
	r1, n1 := resets()
	f.upgradeResets, f.upgradeConns = r1-r0, n1-n0
	for _, d := range g.ds {
		if d.panicked() {
			tb.Errorf("a replica panicked:\n%s", tail(d.log.String(), 30))
		}
	}
	stopCs()
	return f
}

// waitAllTB is waitAll for a testing.TB, without its report.
func waitAllTB(tb testing.TB, cs []*esClient, timeout time.Duration, cond func(*esClient) bool) bool {
	ctx, cancel := context.WithTimeout(tb.Context(), timeout)
	defer cancel()
	next := 0
	return waitFor(ctx, func() bool {
		for next < len(cs) && cond(cs[next]) {
			next++
		}
		return next == len(cs)
	})
}

// table is the section as markdown.
func (f *replicaFigures) table(cfg compareConfig) string {
	var b strings.Builder
	scale := fmt.Sprintf("%d Apps × %d pods, %s, %d cores", cfg.apps, cfg.replicas, time.Now().UTC().Format("2006-01-02"), runtime.NumCPU())
	fmt.Fprintf(&b, "### Replicas behind one Service (%s; %d SuperAdmin streams, %d changes/s)\n\n", scale, f.clients, f.rate)
	b.WriteString("| figure | 1 replica | 2 replicas | 3 replicas |\n|---|---:|---:|---:|\n")
	fmt.Fprintf(&b, "| API server CPU s/s (%s windows) | %s | %s | %s |\n", f.window, num(f.apiCPU[0]), num(f.apiCPU[1]), num(f.apiCPU[2]))
	fmt.Fprintf(&b, "| deployd CPU s/s, all replicas | %s | %s | %s |\n", num(f.deploydCPU[0]), num(f.deploydCPU[1]), num(f.deploydCPU[2]))
	b.WriteString("\n| figure | steady | rolling upgrade of 3 replicas |\n|---|---:|---:|\n")
	fmt.Fprintf(&b, "| window s | %s | %s |\n", num(f.steadySecs), num(f.upgradeSecs))
	fmt.Fprintf(&b, "| bytes to the clients | %d | %d |\n", f.steadyBytes, f.upgradeBytes)
	fmt.Fprintf(&b, "| bytes to the clients a second | %s | %s |\n", num(float64(f.steadyBytes)/f.steadySecs), num(float64(f.upgradeBytes)/f.upgradeSecs))
	fmt.Fprintf(&b, "| deployd CPU s (all processes) | %s | %s |\n", num(f.steadyDeploydCPU.Seconds()), num(f.upgradeDeploydCPU.Seconds()))
	fmt.Fprintf(&b, "| API server CPU s | %s | %s |\n", num(f.steadyAPICPU.Seconds()), num(f.upgradeAPICPU.Seconds()))
	fmt.Fprintf(&b, "| client connections made | — | %d |\n", f.upgradeConns)
	fmt.Fprintf(&b, "| resets told (each a full burst) | — | %d |\n", f.upgradeResets)
	if f.exitSlow > 0 {
		fmt.Fprintf(&b, "\n%d replica(s) needed SIGKILL 30 s after SIGTERM.\n", f.exitSlow)
	}
	return b.String()
}
