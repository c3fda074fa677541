package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/hanzoai/deploy/auth/authtest"
	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/stream/streamtest"
)

// streamsFigures are what the streams under changes measured.
type streamsFigures struct {
	streams            int
	changes, perChange int // real changes made, events each (one per alias)
	due, delivered     int
	resets             int
	p50, p99, worst    time.Duration // change → client
	full, gzip, tenant listFigures   // taken while the streams were open
	team               listFigures
	// CPU over the changes: deployd's, and this process's (the streams'
	// reader and the lists' client), which shares the machine with it.
	serverCPU, clientCPU, window time.Duration
	gcCycles                     int64 // deployd's collections over the changes
	// other is the events of no change made, at every stream; relists
	// and restarts are deployd's informers' over the changes.
	other             int
	relists, restarts float64
	detail            listFigures
	// served is the same figures as deployd's access log has them.
	served struct{ full, gzip, tenant, team, detail listFigures }
}

// streamsUnderChanges opens n streams (SuperAdmins, each from the
// position of a list, as a dashboard does after its first list) on one
// replica, then changes one App a second for d, in turn in each real
// server: each change is an event in each alias of that server, so about
// clusters/servers events a second reach every stream. It measures, for
// every event at every stream, the time from the change to its arrival,
// counts what arrived and the resets, and times the lists and a detail
// while the streams are open.
//
// A CPU profile of deployd over the changes goes to profile + ".cpu.pb.gz",
// what it allocated meanwhile to profile + ".allocs.pb.gz".
func streamsUnderChanges(b *testing.B, bin string, setup serveSetup, m *mockoidc.MockOIDC, tokens listTokens, apis []*clustertest.Cluster, clusters int, apps []string, app listedApp, n int, d time.Duration, requests int, profile string) streamsFigures {
	b.Helper()
	p := startServe(b, bin, setup, m)
	defer p.stop()
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	pos := scalePosition(b, p.base, tokens.admin, appName(apps[0]))
	f := streamsFigures{streams: n}

	// sent[k] is when change k was made; each stream notes when each of
	// its events of change k arrived.
	var mu sync.Mutex
	sent := map[int]time.Time{}
	var took []time.Duration
	var got atomic.Int64 // events of the changes arrived, at every stream
	var wg sync.WaitGroup
	opened := make(chan struct{}, n)
	for range n {
		// Read where it arrives, one goroutine a stream: the client shares
		// the machine's two cores with deployd, and a hop through a channel
		// per frame woke a second goroutine a stream 100 times a second.
		resp := dialScaleStream(ctx, b, p.base, "resourceVersion="+url.QueryEscape(pos), tokens.admin, "")
		wg.Go(func() {
			defer resp.Body.Close()
			opened <- struct{}{}
			var mine []time.Duration
			resets, other := 0, 0
			rd := streamtest.NewReader(resp.Body)
			for {
				ev, err := rd.Next()
				if err != nil {
					break
				}
				at := time.Now()
				if ev.Event == "reset" {
					resets++
				}
				_, rest, ok := strings.Cut(ev.Data, `"bench-l`)
				if !ok {
					if ev.Data != "" && ev.Event == "" {
						other++
					}
					continue
				}
				num, _, _ := strings.Cut(rest, `"`)
				k, err := strconv.Atoi(num)
				if err != nil {
					continue
				}
				mu.Lock()
				t0, ok := sent[k]
				mu.Unlock()
				if ok {
					mine = append(mine, at.Sub(t0))
					got.Add(1)
				}
			}
			mu.Lock()
			took = append(took, mine...)
			f.resets += resets
			f.other += other
			mu.Unlock()
		})
	}
	for range n {
		<-opened
	}
	b.Logf("%d streams open from the list's position (%d bytes written whole)", n, len(pos))

	// The changes, one a second, while the lists are timed.
	began, cpu0, self0, gc0 := time.Now(), procCPU(b, p.pid), procCPU(b, os.Getpid()), goMemstats(b, p.metrics+"/metrics")["gc_cycles"]
	relists0, restarts0 := metricSum(b, p.metrics, "deployd_informer_relists_total"), metricSum(b, p.metrics, "deployd_watch_restarts_total")
	profiled := make(chan error, 2)
	for kind, path := range map[string]string{"profile": profile + ".cpu.pb.gz", "allocs": profile + ".allocs.pb.gz"} {
		go func() {
			profiled <- fetchTo(fmt.Sprintf("%s/debug/pprof/%s?seconds=%d", p.metrics, kind, int(d.Seconds())), path)
		}()
	}
	changed := make(chan struct{})
	var changeErr error
	go func() {
		defer close(changed)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		end := time.Now().Add(d)
		for k := 0; time.Now().Before(end); k++ {
			server := 1 + k%(len(apis)-1) // not server 0: the first cluster is one of its
			a := apps[k%len(apps)]
			mu.Lock()
			sent[k] = time.Now()
			mu.Unlock()
			if err := tagApp(ctx, apis[server], a, "bench-l"+strconv.Itoa(k)); err != nil {
				changeErr = err
				return
			}
			f.changes++
			f.due += n * aliasesOf(server, len(apis), clusters)
			<-tick.C
		}
	}()
	// Each figure twice: as this process took it, and as deployd's access
	// log says it served it. The streams' reader shares this process, and
	// the machine's two cores, with the lists' client.
	served := func(figure *listFigures, time func() listFigures) listFigures {
		from := len(p.logs.String())
		*figure = time()
		return servedTimes(b, p.logs, from, requests)
	}
	f.served.full = served(&f.full, func() listFigures { return timeList(b, p.base, tokens.admin, false, requests) })
	f.served.gzip = served(&f.gzip, func() listFigures { return timeList(b, p.base, tokens.admin, true, requests) })
	f.served.tenant = served(&f.tenant, func() listFigures { return timeList(b, p.base, tokens.tenant, false, requests) })
	f.served.team = served(&f.team, func() listFigures { return timeList(b, p.base, tokens.team, false, requests) })
	f.served.detail = served(&f.detail, func() listFigures { return timeDetail(b, p.base, tokens.admin, app, requests) })
	<-changed
	for range 2 {
		if err := <-profiled; err != nil {
			b.Logf("no profile of the changes: %v", err)
		}
	}
	f.window, f.serverCPU, f.clientCPU = time.Since(began), procCPU(b, p.pid)-cpu0, procCPU(b, os.Getpid())-self0
	f.gcCycles = goMemstats(b, p.metrics+"/metrics")["gc_cycles"] - gc0
	f.relists = metricSum(b, p.metrics, "deployd_informer_relists_total") - relists0
	f.restarts = metricSum(b, p.metrics, "deployd_watch_restarts_total") - restarts0
	if changeErr != nil {
		b.Fatal(changeErr)
	}
	// Every event of the last change has its time to arrive (the budget is
	// 1 s; 10 s at most), then the streams end.
	for deadline := time.Now().Add(10 * time.Second); got.Load() < int64(f.due) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	f.perChange = clusters / len(apis)
	f.delivered = len(took)
	slices.Sort(took)
	if len(took) > 0 {
		f.p50, f.p99, f.worst = took[len(took)/2], took[len(took)*99/100], took[len(took)-1]
	}
	return f
}

func (f streamsFigures) String() string {
	return fmt.Sprintf("%d streams, %d changes of %d events each (%d events a second): %d of %d events delivered, %d resets, %d events of no change made (relists %.0f, watch restarts %.0f); change → client p50 %s p99 %s worst %s; CPU over %s: deployd %.1f s (%d collections), the client %.1f s; with the streams open: full list p50 %s p99 %s, gzip p50 %s p99 %s, tenant's p50 %s p99 %s, the team's p50 %s p99 %s, detail p50 %s p99 %s; as deployd served them: full p50 %s p99 %s, gzip p50 %s p99 %s, tenant's p50 %s p99 %s, the team's p50 %s p99 %s, detail p50 %s p99 %s",
		f.streams, f.changes, f.perChange, f.perChange, f.delivered, f.due, f.resets, f.other, f.relists, f.restarts, ms(f.p50), ms(f.p99), ms(f.worst),
		f.window.Round(time.Second), f.serverCPU.Seconds(), f.gcCycles, f.clientCPU.Seconds(),
		ms(f.full.p50), ms(f.full.p99), ms(f.gzip.p50), ms(f.gzip.p99), ms(f.tenant.p50), ms(f.tenant.p99), ms(f.team.p50), ms(f.team.p99), ms(f.detail.p50), ms(f.detail.p99),
		ms(f.served.full.p50), ms(f.served.full.p99), ms(f.served.gzip.p50), ms(f.served.gzip.p99), ms(f.served.tenant.p50), ms(f.served.tenant.p99),
		ms(f.served.team.p50), ms(f.served.team.p99), ms(f.served.detail.p50), ms(f.served.detail.p99))
}

// servedTimes is what deployd's access log says of the last n requests
// of its log after its first from bytes (timeGET's, which made n + 3):
// each line's "ms", from the request's arrival to the handler's return.
// The log is written in batches, so it waits up to 5 s for the lines.
func servedTimes(b *testing.B, logs *authtest.LogBuffer, from, n int) listFigures {
	b.Helper()
	var took []time.Duration
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		took = took[:0]
		for line := range strings.Lines(logs.String()[from:]) {
			var l struct {
				Route string   `json:"route"`
				Ms    *float64 `json:"ms"`
			}
			if json.Unmarshal([]byte(line), &l) != nil || l.Ms == nil || !strings.HasPrefix(l.Route, "/api/v1/applications") {
				continue
			}
			took = append(took, time.Duration(*l.Ms*float64(time.Millisecond)))
		}
		if len(took) >= n+3 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("deployd's access log holds %d lines of the %d requests timed", len(took), n+3)
		}
	}
	took = took[len(took)-n:]
	slices.Sort(took)
	return listFigures{p50: took[len(took)/2], p99: took[len(took)*99/100]}
}
