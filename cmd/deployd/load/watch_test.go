package load

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/bits"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hanzoai/deploy/cluster/clustertest"
)

// latencies is a histogram of durations with atomic counters: eight
// buckets per power of two of microseconds, so a quantile read from it is
// at most 12.5 % above the truth and never below it.
type latencies struct {
	counts [512]atomic.Int64
	n, max atomic.Int64 // max in microseconds
}

func latencyBucket(us uint64) int {
	if us < 8 {
		return int(us)
	}
	e := bits.Len64(us) - 1
	return (e-2)*8 + int((us>>(e-3))&7)
}

// latencyBucketTop is the bucket's exclusive upper bound in microseconds.
func latencyBucketTop(i int) uint64 {
	if i < 8 {
		return uint64(i) + 1
	}
	e, sub := i/8+2, uint64(i%8)
	return (9 + sub) << (e - 3)
}

func (l *latencies) add(d time.Duration) {
	us := max(d.Microseconds(), 0)
	l.counts[latencyBucket(uint64(us))].Add(1)
	l.n.Add(1)
	for m := l.max.Load(); us > m && !l.max.CompareAndSwap(m, us); m = l.max.Load() {
	}
}

// quantile is the upper bound of the bucket holding the q-th sample,
// capped by the largest sample seen.
func (l *latencies) quantile(q float64) time.Duration {
	n := l.n.Load()
	if n == 0 {
		return 0
	}
	rank := int64(q*float64(n) + 0.5)
	rank = min(max(rank, 1), n)
	var seen int64
	for i := range l.counts {
		if seen += l.counts[i].Load(); seen >= rank {
			return min(time.Duration(latencyBucketTop(i))*time.Microsecond, l.maximum())
		}
	}
	return l.maximum()
}

func (l *latencies) maximum() time.Duration { return time.Duration(l.max.Load()) * time.Microsecond }

// watchers are N clients of one server's stream, each parsing only what
// it must: it finds the stamp in each line, and counts.
type watchers struct {
	hist      latencies
	since     atomic.Int64 // stamps older than this (Unix ns) are not counted
	delivered atomic.Int64
	connected atomic.Int64
	refused   atomic.Int64 // failed to connect, or answered other than 200
	ended     atomic.Int64 // ended by the server before the harness closed it
	silent    atomic.Int64 // connected, and closed without a counted event
	sample    atomic.Pointer[[]byte]
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// connectWatchers opens n streams with newRequest, 64 dials at a time, and
// waits until every one is connected or refused.
func connectWatchers(tb testing.TB, n int, hc *http.Client, newRequest func(context.Context) *http.Request) *watchers {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watchers{cancel: cancel}
	w.since.Store(time.Now().UnixNano())
	dial := make(chan struct{}, 64)
	for range n {
		dial <- struct{}{}
		w.wg.Go(func() { w.watch(ctx, hc, newRequest(ctx), dial) })
	}
	wait, stop := context.WithTimeout(tb.Context(), 2*time.Minute+time.Duration(n)*10*time.Millisecond)
	defer stop()
	if !waitFor(wait, func() bool { return w.connected.Load()+w.refused.Load() == int64(n) }) {
		tb.Fatalf("%d of %d streams connected, %d refused, after %s", w.connected.Load(), n, w.refused.Load(), time.Since(time.Unix(0, w.since.Load())))
	}
	return w
}

func (w *watchers) watch(ctx context.Context, hc *http.Client, req *http.Request, dial chan struct{}) {
	resp, err := hc.Do(req)
	<-dial
	if err != nil {
		w.refused.Add(1)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		w.refused.Add(1)
		return
	}
	w.connected.Add(1)
	counted := 0
	defer func() {
		if counted == 0 {
			w.silent.Add(1)
		}
	}()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4<<10), 8<<20)
	for sc.Scan() {
		line := sc.Bytes()
		t, ok := stampIn(line)
		if !ok || t.UnixNano() < w.since.Load() {
			continue
		}
		w.hist.add(time.Since(t))
		w.delivered.Add(1)
		counted++
		if w.sample.Load() == nil {
			frame := bytes.Clone(line)
			w.sample.CompareAndSwap(nil, &frame)
		}
	}
	if ctx.Err() == nil {
		w.ended.Add(1)
	}
}

// close ends every stream and waits (a bounded time) for its reader.
func (w *watchers) close(tb testing.TB) {
	tb.Helper()
	w.cancel()
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		tb.Fatal("stream readers did not end a minute after their streams were closed")
	}
}

// watchServer is one server under the fan-out test, as the window sees it.
type watchServer struct {
	name string
	pid  int   // the serving process
	also []int // other processes whose CPU the window reads (the API server behind deployd)
	hc   *http.Client
	open func(context.Context) *http.Request // a request for one stream, from now on
	// drive makes changes (or hands the limit frames) at rate until ctx
	// ends, adds the time each took to send to took, and returns how many
	// it sent.
	drive func(ctx context.Context, rate int, took *latencies) int64
}

// watchResult is what one window measured.
type watchResult struct {
	watchers, rate     int
	sent               int64 // changes made (or frames published) in the window
	delivered          int64
	refused, ended     int64
	silent             int64 // watchers that received no change
	p50, p99, max      time.Duration
	sendP50, sendP99   time.Duration // of the change's own request (PATCH, or POST to the limit)
	cpu                time.Duration // of the serving process, window and drain
	alsoCPU            []time.Duration
	elapsed            time.Duration // window and drain
	rssPerWatcher      float64       // bytes
	sample             []byte
	drainedWithin      bool
	windowSecs, drainS float64
}

func (r watchResult) expected() int64 { return r.sent * int64(r.watchers) }

// cpuPerEvent is the serving process's CPU per delivered event.
func (r watchResult) cpuPerEvent() time.Duration {
	if r.delivered == 0 {
		return 0
	}
	return r.cpu / time.Duration(r.delivered)
}

// measureWatch connects n watchers to s, drives changes at rate for d,
// then waits up to drain for what was sent to arrive, and closes them.
func measureWatch(tb testing.TB, s watchServer, n, rate int, d, drain time.Duration) watchResult {
	tb.Helper()
	rss0, _ := clustertest.ProcMemory(tb, s.pid)
	w := connectWatchers(tb, n, s.hc, s.open)
	rss1, _ := clustertest.ProcMemory(tb, s.pid)

	r := watchResult{watchers: n, rate: rate, rssPerWatcher: float64(rss1-rss0) / float64(n)}
	start := time.Now()
	w.since.Store(start.UnixNano())
	cpu0 := procCPU(tb, s.pid)
	also0 := make([]time.Duration, len(s.also))
	for i, pid := range s.also {
		also0[i] = procCPU(tb, pid)
	}
	ctx, stop := context.WithTimeout(tb.Context(), d)
	var took latencies
	r.sent = s.drive(ctx, rate, &took)
	r.sendP50, r.sendP99 = took.quantile(0.50), took.quantile(0.99)
	stop()
	r.windowSecs = time.Since(start).Seconds()
	drained, cancel := context.WithTimeout(tb.Context(), drain)
	r.drainedWithin = waitFor(drained, func() bool { return w.delivered.Load() >= r.sent*int64(n) })
	cancel()
	r.elapsed = time.Since(start)
	r.drainS = r.elapsed.Seconds() - r.windowSecs
	r.cpu = procCPU(tb, s.pid) - cpu0
	for i, pid := range s.also {
		r.alsoCPU = append(r.alsoCPU, procCPU(tb, pid)-also0[i])
	}
	r.delivered = w.delivered.Load()
	w.close(tb)
	r.refused, r.ended, r.silent = w.refused.Load(), w.ended.Load(), w.silent.Load()
	r.p50, r.p99, r.max = w.hist.quantile(0.50), w.hist.quantile(0.99), w.hist.maximum()
	if p := w.sample.Load(); p != nil {
		r.sample = *p
	}
	tb.Logf("%s: %d watchers, %d/s: sent %d in %.1fs, delivered %d of %d (drain %.1fs), p50 %s p99 %s max %s, cpu %s, refused %d, ended %d, silent %d",
		s.name, n, rate, r.sent, r.windowSecs, r.delivered, r.expected(), r.drainS, r.p50, r.p99, r.max, r.cpu, r.refused, r.ended, r.silent)
	return r
}

// publishAt hands the fan-out limit rate frames a second until ctx ends,
// each the sample frame with the stamp of the moment it was sent; it
// returns how many the limit took.
func publishAt(ctx context.Context, l *fanoutLimit, sample []byte, rate, workers int, took *latencies) int64 {
	i := bytes.Index(sample, []byte(stampPrefix))
	if i < 0 {
		panic(fmt.Sprintf("sample frame without a stamp: %.200q", sample))
	}
	head, tail := sample[:i], sample[i+len(stamp(time.Now())):]
	var sent atomic.Int64
	pace(ctx, rate, workers, func() {
		t0 := time.Now()
		frame := make([]byte, 0, len(sample)+16)
		frame = append(frame, "id: 1\n"...)
		frame = append(frame, head...)
		frame = append(frame, stamp(t0)...)
		frame = append(frame, tail...)
		frame = append(frame, "\n\n"...)
		if l.publish(frame) == nil {
			took.add(time.Since(t0))
			sent.Add(1)
		}
	})
	return sent.Load()
}

// pace calls f rate times a second until ctx ends, from workers
// goroutines; a beat with every worker busy is skipped.
func pace(ctx context.Context, rate, workers int, f func()) {
	jobs := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range jobs {
				f()
			}
		})
	}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			close(jobs)
			wg.Wait()
			return
		case <-tick.C:
			select {
			case jobs <- struct{}{}:
			default:
			}
		}
	}
}
