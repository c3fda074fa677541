package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"github.com/hanzoai/deploy/cmd/deployd/internal/deploydbin"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hanzoai/deploy/auth/authtest"
	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/fleet"
	"github.com/hanzoai/deploy/projection"
)

// BenchmarkSSEClients measures what a live stream costs the server: a
// deployd process (the built binary, against a real API server holding a
// small fleet) takes DEPLOYD_SSE_CLIENTS (default 10,000) concurrent
// applications streams of an acme member, each receiving its burst; then one
// App is changed in the cluster and every client must receive the change.
// It reports the process's resident memory per client (the growth from
// before the first client to after the last burst, divided by the clients:
// everything the streams cost, garbage not yet collected included) and the
// change's latency from the patch to each client. The clients live in the
// test process, so only the server's memory is counted.
//
//	go test -run '^$' -bench SSEClients -benchtime 1x -timeout 30m ./cmd/deployd/
func BenchmarkSSEClients(b *testing.B) {
	clients := clustertest.EnvInt(b, "DEPLOYD_SSE_CLIENTS", 10_000)
	c := clustertest.Start(b)
	objs := fleet.RenderAll(fleet.Generate(1, 100))
	dyn := c.Dynamic()
	if err := fleet.NewLoader(dyn).Load(b.Context(), objs); err != nil {
		b.Fatal(err)
	}
	m, err := mockoidc.Run()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Shutdown() })
	bin := buildDeployd(b)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	base := "http://" + addr
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--listen", addr, "--metrics-listen=", "--kubeconfig", c.Kubeconfig)
	cmd.Env = append(os.Environ(), "LOG_LEVEL=warn", "DEPLOY_PUBLIC_URL="+base,
		"IAM_ENDPOINT="+m.Issuer(), "DEPLOY_IAM_CLIENT_ID="+m.ClientID, "DEPLOY_IAM_CLIENT_SECRET="+m.ClientSecret)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	waitHealthy(b, base, 2*time.Minute)

	token, err := authtest.IDToken(m, acmeMember, time.Now(), 2*time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	// The acme member's rows: the length of each burst.
	var list struct {
		Items []struct {
			Metadata struct{ Namespace, Name string }
		}
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/deploy/applications", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || len(list.Items) == 0 {
		b.Fatalf("the acme list: %v (%d rows)", err, len(list.Items))
	}
	burst := len(list.Items)
	target := list.Items[0].Metadata

	// A memory figure, not a condition: let the start's own allocations
	// settle before the baseline.
	time.Sleep(2 * time.Second)
	rss0, _ := clustertest.ProcMemory(b, cmd.Process.Pid)
	b.ResetTimer()

	// Each client counts its burst, then waits for the change to target.
	tr := &http.Transport{MaxConnsPerHost: 0, DisableCompression: true}
	hc := &http.Client{Transport: tr}
	var burstDone, changed sync.WaitGroup
	var ended atomic.Int64
	marker := fmt.Sprintf("v0.0.%d", time.Now().Unix())
	seen := make([]time.Time, clients)
	streamCtx, stopStreams := context.WithCancel(context.Background())
	defer stopStreams()
	burstDone.Add(clients)
	changed.Add(clients)
	dial := make(chan struct{}, 32) // connections opened at once
	for i := range clients {
		dial <- struct{}{}
		go func() {
			inBurst, gotChange := true, false
			defer func() {
				if inBurst {
					burstDone.Done()
				}
				if !gotChange {
					changed.Done()
				}
			}()
			req, _ := http.NewRequestWithContext(streamCtx, http.MethodGet, base+"/v1/deploy/stream/applications", nil)
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
			n := 0
			for sc.Scan() {
				line := sc.Text()
				if !strings.HasPrefix(line, "data:") {
					continue
				}
				if inBurst {
					if n++; n == burst {
						inBurst = false
						burstDone.Done()
					}
					continue
				}
				if !gotChange && strings.Contains(line, marker) && strings.Contains(line, `"name":"`+target.Name+`"`) {
					seen[i] = time.Now()
					gotChange = true
					changed.Done()
				}
			}
			if streamCtx.Err() == nil {
				ended.Add(1)
			}
		}()
	}
	burstDone.Wait()
	if n := ended.Load(); n > 0 {
		b.Fatalf("%d of %d streams failed or ended before their burst", n, clients)
	}
	time.Sleep(3 * time.Second) // the same settling before the second figure
	rss1, _ := clustertest.ProcMemory(b, cmd.Process.Pid)

	patch := fmt.Appendf(nil, `{"spec":{"image":{"tag":%q}}}`, marker)
	t0 := time.Now()
	if _, err := dyn.Resource(projection.KindApp.GVR()).Namespace(target.Namespace).
		Patch(b.Context(), target.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { changed.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
	}
	b.StopTimer()
	var lat []time.Duration
	for _, t := range seen {
		if !t.IsZero() {
			lat = append(lat, t.Sub(t0))
		}
	}
	if len(lat) != clients || ended.Load() > 0 {
		b.Fatalf("the change reached %d of %d clients; %d streams ended", len(lat), clients, ended.Load())
	}
	slices.Sort(lat)
	b.ReportMetric(float64(clients), "clients")
	b.ReportMetric(float64(burst), "events/burst")
	b.ReportMetric(float64(rss1-rss0)/float64(clients)/1024, "KiB-rss/client")
	b.ReportMetric(float64(rss1)/(1<<20), "MiB-rss")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
	b.ReportMetric(0, "ns/op")
}

// buildDeployd is the binary built the way the image does, once per test
// process (deploydbin).
func buildDeployd(tb testing.TB) string { return deploydbin.Path(tb) }

// waitHealthy waits for /v1/deploy/health to answer 200.
func waitHealthy(tb testing.TB, base string, timeout time.Duration) {
	tb.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := client.Get(base + "/v1/deploy/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("deployd was not healthy in %s: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
