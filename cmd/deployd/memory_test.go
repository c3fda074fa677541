package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/hanzoai/deploy/auth/authtest"
	"github.com/hanzoai/deploy/cluster/clustertest"
)

// BenchmarkMemory measures where a ready deployd's memory goes at fleet
// scale: the built binary, against a real API server holding
// DEPLOYD_MEMORY_APPS Apps (default 10,000) of DEPLOYD_MEMORY_REPLICAS pods
// (default 10), or against the cluster of DEPLOYD_MEMORY_KUBECONFIG as it
// is. For each run it reports the resident set when ready (health 200:
// every informer synced and the initial lists folded), the resident set
// once DEPLOYD_MEMORY_CLIENTS (default 2,000) applications streams of a
// tenant member have each received their burst, and the runtime's own
// account (heap in use after a collection, stacks, freed pages not yet
// returned). Then it fetches /debug/pprof/heap from the metrics listener
// (DEPLOY_PPROF=true), saves it under DEPLOYD_MEMORY_PROFILES (default a new
// directory in the system's temp dir; the path is logged), and logs
// inuse_space by owner and `go tool pprof -top -inuse_space`.
//
// DEPLOYD_MEMORY_BINARY names the binary to measure (default: built from
// this tree); DEPLOYD_MEMORY_BASELINE names another deployd binary (say, main's) to
// measure first on the same fleet in the same run, for a before/after;
// DEPLOYD_MEMORY_ENV adds space-separated KEY=VALUE settings to every run
// (GOGC=…, GOMEMLIMIT=…).
//
//	go test -run '^$' -bench '^BenchmarkMemory$' -benchtime 1x -timeout 2h ./cmd/deployd/
func BenchmarkMemory(b *testing.B) {
	clients := clustertest.EnvInt(b, "DEPLOYD_MEMORY_CLIENTS", 2_000)
	var kubeconfig string
	if kc := os.Getenv("DEPLOYD_MEMORY_KUBECONFIG"); kc != "" {
		kubeconfig = kc
	} else {
		kubeconfig, _ = loadFleet(b, clustertest.EnvInt(b, "DEPLOYD_MEMORY_APPS", 10_000), clustertest.EnvInt(b, "DEPLOYD_MEMORY_REPLICAS", 10))
	}
	dir := os.Getenv("DEPLOYD_MEMORY_PROFILES")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "deployd-memory-"); err != nil {
			b.Fatal(err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	m, err := mockoidc.Run()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Shutdown() })
	type binary struct {
		name, path string
		settles    bool
	}
	this := os.Getenv("DEPLOYD_MEMORY_BINARY")
	if this == "" {
		this = buildDeployd(b)
	}
	bins := []binary{{"this", this, true}}
	if base := os.Getenv("DEPLOYD_MEMORY_BASELINE"); base != "" {
		bins = append([]binary{{"baseline", base, false}}, bins...)
	}
	extra := strings.Fields(os.Getenv("DEPLOYD_MEMORY_ENV"))
	b.ResetTimer()
	var last memoryRun
	for i := range b.N {
		for _, bin := range bins {
			profile := filepath.Join(dir, fmt.Sprintf("%s-%d.heap.pb.gz", bin.name, i+1))
			r := measureMemory(b, bin.path, kubeconfig, bin.settles, m, clients, profile, extra)
			b.Logf("%s run %d: %s", bin.name, i+1, r)
			if bin.name == "this" {
				last = r
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(last.rssReady)/(1<<20), "MiB-rss-ready")
	b.ReportMetric(float64(last.rssClients)/(1<<20), "MiB-rss-clients")
	b.ReportMetric(float64(last.heapInuse)/(1<<20), "MiB-heap-inuse")
	b.ReportMetric(float64(last.peak)/(1<<20), "MiB-peak-rss")
	b.ReportMetric(0, "ns/op")
}

// memoryRun is one run's figures, in bytes.
type memoryRun struct {
	clients, burst             int
	ready                      time.Duration
	rssReady, rssClients, peak int64
	// streamCPU is the server's CPU time while the clients connected and
	// received their bursts.
	streamCPU time.Duration
	// The runtime's account, after the profile's collection when there is
	// a profile (collected), else as the scrape found it.
	heapInuse, stacks, idle, release, sys int64
	collected                             bool
	// rssFile is the resident set's file-backed part at the end: the
	// binary's own pages, not the fleet's.
	rssFile int64
}

func (r memoryRun) String() string {
	when := "after a collection"
	if !r.collected {
		when = "at the scrape (no collection forced)"
	}
	return fmt.Sprintf("ready in %s, rss %d MiB; with %d clients (bursts of %d) rss %d MiB, %.1f CPU s to serve them; peak %d MiB; "+
		"%s: heap in use %d MiB, stacks %d MiB, heap idle not returned %d MiB, all the runtime holds %d MiB; file-backed rss %d MiB",
		r.ready.Round(100*time.Millisecond), r.rssReady>>20, r.clients, r.burst, r.rssClients>>20, r.streamCPU.Seconds(), r.peak>>20,
		when, r.heapInuse>>20, r.stacks>>20, (r.idle-r.release)>>20, (r.sys-r.release)>>20, r.rssFile>>20)
}

// measureMemory starts bin against kubeconfig, measures it ready and with
// clients streams, and saves its heap profile to profile. With settles,
// ready also waits for the binary to log that it settled its memory after
// the initial fold (a binary built before that did not).
func measureMemory(b *testing.B, bin, kubeconfig string, settles bool, m *mockoidc.MockOIDC, clients int, profile string, extra []string) memoryRun {
	b.Helper()
	addr, maddr := freeAddr(b), freeAddr(b)
	base, mbase := "http://"+addr, "http://"+maddr
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--listen", addr, "--metrics-listen", maddr, "--kubeconfig", kubeconfig)
	cmd.Env = append(os.Environ(), "LOG_LEVEL=info", "DEPLOY_PPROF=true", "DEPLOY_PUBLIC_URL="+base,
		"IAM_ENDPOINT="+m.Issuer(), "DEPLOY_IAM_CLIENT_ID="+m.ClientID, "DEPLOY_IAM_CLIENT_SECRET="+m.ClientSecret)
	cmd.Env = append(cmd.Env, extra...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	settled := make(chan struct{})
	go watchLog(stderr, settled)
	var r memoryRun
	waitHealthy(b, base, 30*time.Minute)
	r.ready = time.Since(start)
	if settles {
		select {
		case <-settled:
		case <-time.After(time.Minute):
			b.Fatal("ready, but no \"memory settled\" in the log within a minute")
		}
	}
	r.rssReady, _ = clustertest.ProcMemory(b, cmd.Process.Pid)

	token, err := authtest.IDToken(m, acmeMember, time.Now(), 2*time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	r.clients = clients
	r.burst = listLength(b, base, token)
	cpu0 := procCPU(b, cmd.Process.Pid)
	stop := openStreams(b, base, token, clients, r.burst)
	defer stop()
	r.streamCPU = procCPU(b, cmd.Process.Pid) - cpu0
	r.rssClients, r.peak = clustertest.ProcMemory(b, cmd.Process.Pid)

	// ?gc=1: the profile is taken after a collection, so it is the live heap.
	if err := fetchTo(mbase+"/debug/pprof/heap?gc=1", profile); err != nil {
		b.Logf("no heap profile (%v): the binary may not serve DEPLOY_PPROF", err)
	} else {
		b.Logf("heap profile: %s", profile)
		logProfile(b, bin, profile)
		r.collected = true
	}
	st := goMemstats(b, mbase+"/metrics")
	r.heapInuse, r.stacks = st["go_memstats_heap_inuse_bytes"], st["go_memstats_stack_inuse_bytes"]
	r.idle, r.release = st["go_memstats_heap_idle_bytes"], st["go_memstats_heap_released_bytes"]
	r.sys = st["go_memstats_sys_bytes"]
	r.rssFile = procRssFile(b, cmd.Process.Pid)
	return r
}

// watchLog reads the process's JSON log: it closes settled at the "memory
// settled" line, and copies warnings and errors to the test's stderr.
func watchLog(r io.Reader, settled chan<- struct{}) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	once := false
	for sc.Scan() {
		line := sc.Text()
		if !once && strings.Contains(line, `"msg":"memory settled"`) {
			once = true
			close(settled)
		}
		if strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) {
			fmt.Fprintln(os.Stderr, line)
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// listLength is the number of Apps the token's list holds: each stream's
// burst.
func listLength(b *testing.B, base, token string) int {
	b.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/deploy/applications", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Items []json.RawMessage }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Items) == 0 {
		b.Fatalf("the list: %d, %v (%d rows)", resp.StatusCode, err, len(list.Items))
	}
	return len(list.Items)
}

// openStreams opens n applications streams and returns once each has
// received its burst of burst events (failing the benchmark if one ends
// first or they take longer than ten minutes); stop closes them.
func openStreams(b *testing.B, base, token string, n, burst int) (stop func()) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tr := &http.Transport{MaxConnsPerHost: 0, DisableCompression: true}
	hc := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	var bursts, ended atomic.Int64
	dial := make(chan struct{}, 32) // connections opened at once
	for range n {
		dial <- struct{}{}
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/deploy/stream/applications", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Accept", "text/event-stream")
			resp, err := hc.Do(req)
			<-dial
			if err != nil || resp.StatusCode != http.StatusOK {
				ended.Add(1)
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 0, 16<<10), 1<<20)
			seen := 0
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "data:") {
					if seen++; seen == burst {
						bursts.Add(1)
					}
				}
			}
			if ctx.Err() == nil {
				ended.Add(1)
			}
		})
	}
	stop = func() { cancel(); wg.Wait(); tr.CloseIdleConnections() }
	deadline := time.Now().Add(10 * time.Minute)
	for bursts.Load() < int64(n) {
		if e := ended.Load(); e > 0 {
			stop()
			b.Fatalf("%d of %d streams failed or ended before their burst", e, n)
		}
		if time.Now().After(deadline) {
			stop()
			b.Fatalf("%d of %d streams received their burst in ten minutes", bursts.Load(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return stop
}

// procRssFile is the file-backed part of a process's resident set.
func procRssFile(b *testing.B, pid int) int64 {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(raw)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "RssFile:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// procCPU is a process's CPU time (user and system) from /proc.
func procCPU(b testing.TB, pid int) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command's closing parenthesis; utime and
	// stime are the 14th and 15th of the line, in clock ticks (100 a
	// second on Linux).
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// fetchTo saves the body of a GET of url to path.
func fetchTo(url, path string) error {
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// goMemstats scrapes the go_memstats_* gauges of a metrics listener.
func goMemstats(b testing.TB, url string) map[string]int64 {
	b.Helper()
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		b.Fatalf("parse %s: %v", url, err)
	}
	out := map[string]int64{}
	for name, f := range fams {
		if strings.HasPrefix(name, "go_memstats_") && len(f.GetMetric()) == 1 {
			out[name] = int64(f.GetMetric()[0].GetGauge().GetValue())
		}
		if name == "go_gc_duration_seconds" && len(f.GetMetric()) == 1 {
			out["gc_cycles"] = int64(f.GetMetric()[0].GetSummary().GetSampleCount())
		}
	}
	return out
}
