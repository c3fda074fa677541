package load

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// chaosKill: kill -9 deployd while clients stream and the fleet changes,
// then start it again. Promise: every client reconnects by itself (after
// the advised retry, with jitter), the new process resumes it from its
// Last-Event-ID without a reset (a position of the cluster, older than the
// new process: caught up from the API server's history), and its view
// equals the API server's LIST. Converge is from the new process's start
// to the last client's view equal to that LIST (the changes stop once
// every client has reconnected).
func chaosKill(t *testing.T, e *chaosEnv, row *chaosRow) {
	n, rate := e.sc.killClients, e.sc.rate
	row.scenario = "1. kill -9 deployd"
	row.checked = fmt.Sprintf("%d streaming clients, %d changes/s: each reconnects by itself and resumes from its last id on the new process (caught up from the API server's history, no reset), view = API server LIST", n, rate)
	cs, stopClients := e.clients(t, n, e.hc)
	defer stopClients()
	if !waitAll(t, cs, e.sc.converge, "synced", func(_ int, c *esClient) bool { return c.synced() }) {
		return
	}
	stopChanger := e.runChanger(t, rate)
	defer stopChanger()
	loadFor(t.Context(), e.sc.steady)

	killAt := time.Now()
	e.d.kill()
	restartAt := time.Now()
	prev := e.d.tb
	e.d.tb = t
	e.d.start()
	e.d.tb = prev
	ready := time.Since(restartAt)
	waitAll(t, cs, e.sc.converge, "reconnected", func(_ int, c *esClient) bool {
		for _, cn := range c.connsSince(killAt) {
			if cn.Status == http.StatusOK {
				return true
			}
		}
		return false
	})
	stopChanger()
	tr := e.truth(t)
	_, ok := e.converge(t, cs, tr)
	took := time.Since(restartAt)

	resumed, refused, failed, resets := 0, 0, 0, 0
	for _, c := range cs {
		first := true
		for _, cn := range c.connsSince(killAt) {
			switch {
			case cn.Status == 0:
				failed++
			case cn.Status != http.StatusOK:
				refused++
			case first:
				first = false
				if cn.Reset {
					resets++
				} else if !cn.Sent.isZero() {
					resumed++
				}
			}
		}
	}
	// The new process started after the clients' positions: it proves
	// what changed since from the API server's history, which etcd still
	// holds.
	if resets > 0 || resumed != n {
		t.Errorf("%d of %d clients resumed from their last id by the new process, %d were told reset; want all resumed, none reset", resumed, n, resets)
	}
	if e.d.panicked() {
		t.Errorf("deployd's log shows a panic:\n%s", tail(e.d.log.String(), 30))
	}
	row.note("%d/%d resumed from their last id, %d told reset; %d connection attempts failed while it was down, %d refused", resumed, n, resets, failed, refused)
	row.note("%d changes sent (%d failed); ready %s after start", e.ch.Sent.Load(), e.ch.Failed.Load(), ready.Round(time.Millisecond))
	if ok {
		row.converge = took.Round(time.Millisecond).String() + " from restart"
	}
}

// chaosStorm: every client's connection drops and reconnects with
// Last-Event-ID at a random moment of the storm window, while the fleet
// changes. Promise: each is served from the ring (no reset, its first
// event after the position it sent: the ids continue), none is refused,
// and its view equals the API server's LIST. Figure: deployd's peak 1-s
// CPU during the storm ÷ its mean 1-s CPU in the steady state before it.
//
// The change rate is the storm's own (stormRate): at full scale 20
// changes/s to the clients' org, so the 10,000 clients together read
// 200,000 events/s, what scenario 1's 2,000 clients read at 100/s. At
// 100/s they would have to read 1,000,000 events/s in this one process,
// on the two cores deployd and the API server also use. They could not:
// deployd rightly cut all 10,000 off as slow, and their reconnecting at
// once overflowed the listen queue, which measured the client process,
// not the storm. Also noted: how many streams deployd cut off during the
// storm, and the host's TcpExtListenOverflows (SYNs dropped because a
// listen queue was full; a dropped SYN is retried by the kernel, so it
// fails a connection only when the retries outlast the 5 s dial timeout).
func chaosStorm(t *testing.T, e *chaosEnv, row *chaosRow) {
	n, rate := e.sc.stormClients, e.sc.stormRate
	row.scenario = "2. reconnect storm"
	row.checked = fmt.Sprintf("%d clients reconnect within %s with Last-Event-ID, %d changes/s: no reset, ids continue, none refused, view = LIST", n, e.sc.stormWindow, rate)
	cs, stopClients := e.clients(t, n, e.hc)
	defer stopClients()
	if !waitAll(t, cs, e.sc.converge, "synced", func(_ int, c *esClient) bool { return c.synced() }) {
		return
	}
	stopChanger := e.runChanger(t, rate)
	defer stopChanger()
	steady := sampleCPU(t, e.d.PID())
	loadFor(t.Context(), e.sc.steady)
	steady.stop()
	steadyCPU, _, _ := steady.figures()
	resets0 := e.d.metric(t, "deployd_stream_resets_total")
	cutoffs0 := e.d.metric(t, "deployd_stream_cutoffs_total")
	overflows0, haveOverflows := listenOverflows()

	stormAt := time.Now()
	storm := sampleCPU(t, e.d.PID())
	dropAt := make([]time.Time, n)
	var mu sync.Mutex
	for i, c := range cs {
		off := time.Duration(rand.Int64N(int64(e.sc.stormWindow)))
		tm := time.AfterFunc(off, func() {
			mu.Lock()
			dropAt[i] = time.Now()
			mu.Unlock()
			c.drop(0)
		})
		defer tm.Stop()
	}
	waitAll(t, cs, e.sc.stormWindow+e.sc.converge, "reconnected", func(i int, c *esClient) bool {
		mu.Lock()
		at := dropAt[i]
		mu.Unlock()
		if at.IsZero() {
			return false
		}
		for _, cn := range c.connsSince(at) {
			if cn.Status == http.StatusOK && !cn.First.isZero() {
				return true
			}
		}
		return false
	})
	storm.stop()
	_, peak, samples := storm.figures()
	cutoffs := e.d.metric(t, "deployd_stream_cutoffs_total") - cutoffs0
	overflows, _ := listenOverflows()
	stopChanger()
	tr := e.truth(t)
	took, ok := e.converge(t, cs, tr)

	resumed, reset, refused, failed, gaps := 0, 0, 0, 0, 0
	for _, c := range cs {
		for _, cn := range c.connsSince(stormAt) {
			switch {
			case cn.Status == 0:
				failed++
			case cn.Status != http.StatusOK:
				refused++
			case cn.Reset:
				reset++
			case !cn.First.isZero() && cn.Sent.covers(cn.First):
				gaps++
			default:
				resumed++
			}
		}
	}
	if reset+refused+failed+gaps > 0 {
		t.Errorf("after the storm: %d reconnections told reset, %d refused, %d failed, %d served an id not after their position", reset, refused, failed, gaps)
	}
	if r := e.d.metric(t, "deployd_stream_resets_total") - resets0; r != 0 {
		t.Errorf("deployd counted %v resets during the storm", r)
	}
	ratio := "n/a"
	if steadyCPU > 0 {
		ratio = fmt.Sprintf("%.1f", peak/steadyCPU)
	}
	row.note("%d resumed from the ring, %d reset, %d refused, %d failed", resumed, reset, refused, failed)
	row.note("CPU peak %.2f s/s ÷ steady %.3f s/s = %s (%d 1-s samples)", peak, steadyCPU, ratio, samples)
	row.note("%d changes/s; %v streams cut off by deployd during the storm", rate, cutoffs)
	if haveOverflows {
		row.note("the host's listen-queue overflows during the storm: %d", overflows-overflows0)
	}
	if ok {
		row.converge = took.Round(time.Millisecond).String() + " after the changes stopped"
	}
}

// chaosRelist: etcd compacted and the API server restarted while the fleet
// changes fast. deployd's watches end and cannot resume (410 Gone: the
// API server's watch cache starts afresh and etcd has dropped the history),
// so it relists.
//
// "Every change" here means every change deployd's projection published:
// each client receives, in order, every revision after its position, or is
// told reset and given the whole current state. Versions the API server
// wrote while deployd's watch was down and overwrote before the relist
// never reach deployd (the relist returns only the latest version of each
// object; the watch that would have carried them is gone with the
// compacted history), so they are no change of deployd's and no client can
// see them; what is checked is that nothing deployd published is skipped
// (a resumed connection's first id is after the position it sent) and that
// the end state equals the API server's LIST.
//
// Goroutines: deployd's go_goroutines with the clients connected and the
// fleet quiet, before and after; after may exceed before by at most
// goroutineSlack, waited for with a deadline (connections to the API
// server being re-established and handlers returning take a moment). A
// leak per client, per change or per watch restart (16 kinds) exceeds it.
func chaosRelist(t *testing.T, e *chaosEnv, row *chaosRow) {
	const goroutineSlack = 10
	n, rate := e.sc.relistClients, e.sc.relistRate
	row.scenario = "3. API server restart + etcd compaction"
	row.checked = fmt.Sprintf("%d clients, %d changes/s: deployd relists, each connection resumes without a gap or is reset, view = LIST, goroutines not grown (≤ +%d)", n, rate, goroutineSlack)
	cs, stopClients := e.clients(t, n, e.hc)
	defer stopClients()
	if !waitAll(t, cs, e.sc.converge, "synced", func(_ int, c *esClient) bool { return c.synced() }) {
		return
	}
	g0 := e.d.metric(t, "go_goroutines")
	relists0 := e.d.metric(t, "deployd_informer_relists_total")
	sent0 := e.ch.Sent.Load()
	stormAt := time.Now()
	stopChanger := e.runChanger(t, rate)
	defer stopChanger()
	loadFor(t.Context(), e.sc.steady/2)
	rev := e.c.CompactEtcd(t)
	e.c.RestartAPIServer(t)
	loadFor(t.Context(), e.sc.steady/2)
	stopChanger()
	tr := e.truth(t)
	took, ok := e.converge(t, cs, tr)

	relists := e.d.metric(t, "deployd_informer_relists_total") - relists0
	if relists == 0 {
		t.Errorf("deployd did not relist after the compaction (at etcd revision %d) and the restart", rev)
	}
	resumed, reset, gaps := tallyResumes(cs, stormAt)
	if gaps > 0 {
		t.Errorf("%d resumed connections were served an id not after their position", gaps)
	}
	ctx, cancel := context.WithTimeout(t.Context(), e.sc.converge)
	defer cancel()
	var g1 float64
	if !waitFor(ctx, func() bool {
		g1 = e.d.metric(t, "go_goroutines")
		return g1 <= g0+goroutineSlack
	}) {
		t.Errorf("deployd's goroutines grew from %v to %v after the storm (slack %d)", g0, g1, goroutineSlack)
	}
	row.note("%v relists; %d changes sent (%d failed); %d connections resumed, %d reset", relists, e.ch.Sent.Load()-sent0, e.ch.Failed.Load(), resumed, reset)
	row.note("goroutines %v before, %v after", g0, g1)
	if ok {
		row.converge = took.Round(time.Millisecond).String() + " after the changes stopped"
	}
}

// chaosSlow: a tenth of the clients start reading at 1 KB/s while the
// fleet changes. Promise: the others are not delayed (figure: their p99
// change-to-client latency with the slow ones ÷ without, the same clients
// in both phases) and never cut off; deployd cuts the slow ones off (their
// queue fills) and, once their link recovers, they resume with
// Last-Event-ID (answered 200, no reset, the next id after their position)
// and every view, slow ones' too, equals the API server's LIST.
//
// A slow client moves to a slow link (it reconnects with its position over
// a socket with a small window and small segments; see
// newStreamHTTPClient) and reads 1 KB/s there. Why the link recovers:
// deployd ends a cut-off stream, but the kernels still hold what deployd
// wrote before its queue filled (about 90 KB over the slow link), and the
// end of the stream comes after it; at 1 KB/s that is a minute and a half
// per client, at full speed a moment. A slow client is cut off
// at most once per connection, and it cannot reconnect before it reads the
// end: so deployd's cut-off count rising by the number of slow clients,
// while no full-speed client's stream ended, is each slow one cut off.
func chaosSlow(t *testing.T, e *chaosEnv, row *chaosRow) {
	n, rate := e.sc.slowClients, e.sc.slowRate
	nSlow := max(1, n/10)
	row.scenario = "4. slow clients"
	row.checked = fmt.Sprintf("%d of %d clients read at 1 KB/s, %d changes/s: the others' p99 ÷ p99 without, none of them cut off; slow ones cut off, resume, view = LIST", nSlow, n, rate)
	fast, stopFast := e.clients(t, n-nSlow, e.hc)
	defer stopFast()
	slow, stopSlow := e.clients(t, nSlow, e.hc)
	defer stopSlow()
	all := append(slices.Clone(fast), slow...)
	start := time.Now()
	if !waitAll(t, all, e.sc.converge, "synced", func(_ int, c *esClient) bool { return c.synced() }) {
		return
	}
	stopChanger := e.runChanger(t, rate)
	defer stopChanger()
	for _, c := range fast {
		c.measure.Store(true)
	}
	// Changes flow (after the API server's restart the changer's first
	// requests may wait on a connection that is gone): a change reached a
	// client; what was measured before that is dropped.
	ctxA, cancelA := context.WithTimeout(t.Context(), e.sc.converge)
	defer cancelA()
	if !waitFor(ctxA, func() bool {
		fast[0].mu.Lock()
		defer fast[0].mu.Unlock()
		return len(fast[0].lat) > 0
	}) {
		t.Fatalf("no change reached a client in %s", e.sc.converge)
	}
	loadFor(t.Context(), e.sc.steady) // the changer reaches its pace
	for _, c := range fast {
		c.takeLatencies()
	}
	read0, at0 := fast[0].bytesRead.Load(), time.Now()
	loadFor(t.Context(), e.sc.steady)
	streamRate := float64(fast[0].bytesRead.Load()-read0) / time.Since(at0).Seconds()
	var without, with []time.Duration
	for _, c := range fast {
		without = append(without, c.takeLatencies()...)
	}
	cut0 := e.d.metric(t, "deployd_stream_cutoffs_total")
	slowAt := time.Now()
	slowLink := newStreamHTTPClient(true)
	for _, c := range slow {
		c.goSlow(1<<10, slowLink)
	}
	ctx, cancel := context.WithTimeout(t.Context(), e.sc.slowBudget)
	defer cancel()
	minEnd := slowAt.Add(e.sc.steady)
	var cutoffs float64
	if !waitFor(ctx, func() bool {
		cutoffs = e.d.metric(t, "deployd_stream_cutoffs_total") - cut0
		return cutoffs >= float64(nSlow) && time.Now().After(minEnd)
	}) {
		t.Errorf("deployd cut off %v of %d slow clients within %s", cutoffs, nSlow, e.sc.slowBudget)
	}
	phaseB := time.Since(slowAt)
	for _, c := range fast {
		c.measure.Store(false)
		with = append(with, c.takeLatencies()...)
	}
	recoverAt := time.Now()
	for _, c := range slow {
		c.slow.Store(0)
	}
	waitAll(t, slow, e.sc.converge, "resumed", func(_ int, c *esClient) bool {
		for _, cn := range c.connsSince(recoverAt) {
			if cn.Status == http.StatusOK && !cn.First.isZero() {
				return true
			}
		}
		return false
	})
	stopChanger()
	tr := e.truth(t)
	took, ok := e.converge(t, all, tr)

	fastCut := 0
	for _, c := range fast {
		for _, cn := range c.connsSince(start) {
			if !cn.Ended.IsZero() {
				fastCut++
			}
		}
	}
	if fastCut > 0 {
		t.Errorf("%d streams of full-speed clients ended while slow ones were cut off", fastCut)
	}
	resumes, resets, gaps := tallyResumes(slow, slowAt)
	if resets+gaps > 0 {
		t.Errorf("slow clients: %d connections told reset, %d served an id not after their position", resets, gaps)
	}
	p99a, p99b := percentile(without, 0.99), percentile(with, 0.99)
	ratio := "n/a"
	if p99a > 0 {
		ratio = fmt.Sprintf("%.2f", float64(p99b)/float64(p99a))
	}
	if len(without) == 0 || len(with) == 0 {
		t.Errorf("no latency measured: %d events without slow clients, %d with", len(without), len(with))
	}
	row.note("others' p99 %s with ÷ %s without = %s (p50 %s and %s; %d and %d events)", p99b.Round(time.Microsecond), p99a.Round(time.Microsecond), ratio,
		percentile(with, 0.5).Round(time.Microsecond), percentile(without, 0.5).Round(time.Microsecond), len(with), len(without))
	row.note("%v cut off by deployd in %s at 1 KB/s (the stream runs at %.0f KB/s), %d connections of slow clients resumed from the ring, %d reset", cutoffs, phaseB.Round(time.Millisecond), streamRate/1024, resumes, resets)
	if ok {
		row.converge = took.Round(time.Millisecond).String() + " after the changes stopped"
	}
}

// tallyResumes sorts the answered connections the clients made since t:
// resumed from the ring (a position sent, its first id after it), told
// reset, or served a gap (a first id not after the position sent).
func tallyResumes(cs []*esClient, t time.Time) (resumed, reset, gaps int) {
	for _, c := range cs {
		for _, cn := range c.connsSince(t) {
			switch {
			case cn.Status != http.StatusOK:
			case cn.Reset:
				reset++
			case !cn.First.isZero() && cn.Sent.covers(cn.First):
				gaps++
			case !cn.Sent.isZero():
				resumed++
			}
		}
	}
	return resumed, reset, gaps
}
