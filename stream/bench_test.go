package stream_test

import (
	"bytes"
	"context"
	"fmt"
	"math/bits"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hanzoai/deploy/stream"
)

// benchViews are 20 distinct views: SuperAdmin and tenant scopes with
// different filters and field whitelists.
var benchViews = func() []struct{ id, query string } {
	var out []struct{ id, query string }
	for _, q := range []string{"", "fields=result.type,result.application.metadata.name,result.application.status.sync.status", "projects=shop", "selector=hanzo.ai/env%3Dmain", "appNamespace=tenant-acme", "fields=-result.application.status.history", "name=app-01", "selector=hanzo.ai/org+in+(acme,globex)"} {
		out = append(out, struct{ id, query string }{"all", q})
	}
	for _, org := range []string{"acme", "globex", "initech"} {
		for _, q := range []string{"", "fields=result.type,result.application.metadata.name", "projects=shop", "selector=hanzo.ai/env%3Dmain"} {
			out = append(out, struct{ id, query string }{org, q})
		}
	}
	return out
}()

// benchWriter is an in-memory flushing ResponseWriter standing in for a
// connection: on each flush it records, for every event frame written
// since the last one, the time since the event was published.
type benchWriter struct {
	header    http.Header
	published []atomic.Int64 // Unix ns by position-first
	first     uint64
	pending   []uint64
	id        uint64 // the id line just written
	latencies latencyHistogram
	events    atomic.Int64
	ready     atomic.Bool // the burst ended
}

func (w *benchWriter) Header() http.Header { return w.header }
func (w *benchWriter) WriteHeader(int)     {}

func (w *benchWriter) Write(b []byte) (int, error) {
	// An event's id comes in its own write, just before its data.
	if rest, ok := bytes.CutPrefix(b, []byte("id: ")); ok {
		i := bytes.IndexByte(rest, '\n')
		rev, _ := strconv.ParseUint(string(rest[:i]), 10, 64)
		w.id = 0
		switch {
		case rev < w.first:
			w.ready.Store(true) // the end of the burst
		case i+1 == len(rest):
			w.id = rev
		}
		return len(b), nil
	}
	if w.id != 0 && bytes.HasPrefix(b, []byte("data: ")) {
		w.pending = append(w.pending, w.id)
	}
	w.id = 0
	return len(b), nil
}

func (w *benchWriter) Flush() {
	if len(w.pending) == 0 {
		return
	}
	now := time.Now().UnixNano()
	for _, rev := range w.pending {
		w.latencies.add(time.Duration(now - w.published[rev-w.first].Load()))
	}
	w.events.Add(int64(len(w.pending)))
	w.pending = w.pending[:0]
}

// BenchmarkFanout: 2,000 subscribers over 20 distinct views, 1,000 changes
// a second. Subscribers are in-memory flushing writers served by
// ServeApplications — the HTTP code path without the socket. Reports the
// event-to-client latency (publish to flush), CPU per delivered event, and
// encodings per event, which must equal the number of views that see it.
func BenchmarkFanout(b *testing.B) {
	b.ReportAllocs()
	const subscribers, rate = 2000, 1000
	maxChanges := 60 * rate
	f := newFleet(42, 50)
	e := newEnv(b, stream.Options{}, f)
	first := e.store.Snapshot().Position.First() + 1
	published := make([]atomic.Int64, maxChanges)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	writers := make([]*benchWriter, subscribers)
	specs := make([]stream.Request, len(benchViews))
	var served sync.WaitGroup
	for i := range subscribers {
		v := benchViews[i%len(benchViews)]
		r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/v1/deploy/stream/applications?"+v.query, nil)
		req, err := stream.ParseRequest(r, nil)
		if err != nil {
			b.Fatal(err)
		}
		req.Scope = scopeOf(b, v.id)
		specs[i%len(benchViews)] = req
		w := &benchWriter{header: http.Header{}, published: published, first: first}
		writers[i] = w
		served.Go(func() {
			if err := e.hub.ServeApplications(w, r, req); err != nil {
				b.Error(err)
			}
		})
	}
	defer served.Wait()
	defer cancel()
	waitFor(b, 120*time.Second, "every subscriber to join its view", func() bool {
		st := e.hub.Stats()
		return st.Joined == subscribers && st.Views == len(benchViews)
	})
	before := e.hub.Stats()
	cpu0 := processCPU()
	start := time.Now()
	changes := 0
	for b.Loop() {
		if changes == maxChanges {
			b.Fatalf("more than %d changes: run with a shorter -benchtime", maxChanges)
		}
		if d := time.Until(start.Add(time.Duration(changes) * time.Second / rate)); d > 0 {
			time.Sleep(d) // pace the writer at rate
		}
		deltas, err := e.store.Apply(f.nextAppChange())
		if err != nil {
			b.Fatal(err)
		}
		now := time.Now().UnixNano()
		for _, d := range deltas {
			published[d.Position.First()-first].Store(now)
		}
		e.hub.Publish(deltas)
		e.mu.Lock()
		e.deltas = append(e.deltas, deltas...)
		e.mu.Unlock()
		changes++
	}
	elapsed := time.Since(start)
	// The oracle: which views see each event, and how many subscribers.
	deltas := e.published()
	var seenByViews, deliveries int64
	want := make([]int64, subscribers)
	for _, d := range deltas {
		for vi, req := range specs {
			if d.New != nil && stream.Visible(req.Scope, d.New) && req.Filter.Matches(d.New) {
				seenByViews++
				for i := vi; i < subscribers; i += len(benchViews) {
					want[i]++
					deliveries++
				}
			}
		}
	}
	waitFor(b, 60*time.Second, "every event to reach every subscriber", func() bool {
		for i, w := range writers {
			if w.events.Load() < want[i] {
				return false
			}
		}
		return true
	})
	cpu := processCPU() - cpu0
	after := e.hub.Stats()
	cancel()
	served.Wait()

	if after.CutOff != before.CutOff {
		b.Fatalf("%d subscribers were cut off", after.CutOff-before.CutOff)
	}
	encodings := int64(after.Encodings - before.Encodings)
	if encodings != seenByViews {
		b.Fatalf("encoded %d frames for %d events; the views that see them number %d", encodings, len(deltas), seenByViews)
	}
	var all latencyHistogram
	for _, w := range writers {
		all.merge(&w.latencies)
	}
	pct := func(p float64) float64 { return float64(all.quantile(p)) / float64(time.Millisecond) }
	n := float64(len(deltas))
	b.ReportMetric(n/elapsed.Seconds(), "changes/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(pct(1), "max-ms")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(deliveries), "cpu-ns/delivery")
	b.ReportMetric(cpu.Seconds()/elapsed.Seconds(), "cores")
	b.ReportMetric(float64(encodings)/n, "encodings/event")
	b.ReportMetric(float64(seenByViews)/n, "views-seeing/event")
	b.ReportMetric(float64(deliveries)/n, "deliveries/event")
	if testing.Verbose() {
		fmt.Printf("%d events, %d deliveries, %d encodings, p99 %.1f ms\n", len(deltas), deliveries, encodings, pct(0.99))
	}
}

// latencyHistogram counts durations in log-linear buckets: 64 linear
// buckets of 16 µs below 1,024 µs, then 64 per power of two (about 1.5%
// wide). Small enough to keep one per subscriber.
type latencyHistogram struct {
	counts [64 + 64*24]uint32
	max    time.Duration
}

func bucketOf(d time.Duration) int {
	us := uint64(d / time.Microsecond)
	if us < 1024 {
		return int(us / 16)
	}
	octave := bits.Len64(us) - 11 // 0 for [1024, 2048)
	if octave >= 24 {
		return 64 + 64*24 - 1
	}
	return 64 + octave*64 + int(us>>(octave+4))&63
}

// lower is the smallest duration of bucket i.
func lower(i int) time.Duration {
	if i < 64 {
		return time.Duration(i*16) * time.Microsecond
	}
	octave, m := (i-64)/64, (i-64)%64
	return time.Duration((64+m)<<(octave+4)) * time.Microsecond
}

func (h *latencyHistogram) add(d time.Duration) {
	h.counts[bucketOf(d)]++
	h.max = max(h.max, d)
}

func (h *latencyHistogram) merge(o *latencyHistogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.max = max(h.max, o.max)
}

// quantile returns the lower bound of the bucket holding quantile q (the
// maximum for q = 1).
func (h *latencyHistogram) quantile(q float64) time.Duration {
	if q >= 1 {
		return h.max
	}
	var total uint64
	for _, c := range h.counts {
		total += uint64(c)
	}
	rank := uint64(q * float64(total))
	var seen uint64
	for i, c := range h.counts {
		if seen += uint64(c); seen > rank {
			return lower(i)
		}
	}
	return h.max
}

func TestLatencyHistogram(t *testing.T) {
	for _, d := range []time.Duration{0, 15 * time.Microsecond, time.Millisecond, 1500 * time.Microsecond, 99 * time.Millisecond, 3 * time.Second} {
		i := bucketOf(d)
		if lo := lower(i); lo > d || (i+1 < 64+64*24 && lower(i+1) <= d) {
			t.Errorf("%v in bucket %d [%v, %v)", d, i, lo, lower(i+1))
		}
	}
}
