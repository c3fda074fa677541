package stream_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/r3labs/sse/v2"
	"go.uber.org/goleak"
)

// These tests record why stream does not use the server of
// github.com/r3labs/sse/v2 (see doc.go); they exercise v2.10.0 as is.

// frameWriter is an in-memory flushing ResponseWriter. While hold is set,
// every Write waits for release.
type frameWriter struct {
	header  http.Header
	hold    bool
	release chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
	writes  atomic.Int64
}

func newFrameWriter(hold bool) *frameWriter {
	return &frameWriter{header: http.Header{}, hold: hold, release: make(chan struct{})}
}

func (w *frameWriter) Header() http.Header { return w.header }
func (w *frameWriter) WriteHeader(int)     {}
func (w *frameWriter) Flush()              {}
func (w *frameWriter) Write(b []byte) (int, error) {
	if w.hold {
		<-w.release
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if bytes.HasPrefix(b, []byte("id: ")) {
		w.writes.Add(1)
	}
	return w.buf.Write(b)
}

func (w *frameWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestR3labsFanOutBlocksOnOneStalledClient: with r3labs' server, one
// subscriber that stops reading (its write blocks) stops delivery to every
// other subscriber of the stream after 64 events (stream.go: the fan-out
// loop sends to each subscriber's channel of 64 while blocking), and then
// Publish itself blocks the caller — our projection writer.
func TestR3labsFanOutBlocksOnOneStalledClient(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	var subscribed atomic.Int64
	srv := sse.NewWithCallback(func(string, *sse.Subscriber) { subscribed.Add(1) }, nil)
	srv.AutoReplay = false // its replay log never shrinks
	srv.BufferSize = 1
	srv.CreateStream("apps")

	stalled, healthy := newFrameWriter(true), newFrameWriter(false)
	var served sync.WaitGroup
	ctxS, cancelS := context.WithCancel(t.Context())
	ctxH, cancelH := context.WithCancel(t.Context())
	serve := func(ctx context.Context, w http.ResponseWriter) {
		served.Go(func() {
			srv.ServeHTTP(w, httptest.NewRequestWithContext(ctx, http.MethodGet, "/?stream=apps", nil))
		})
	}
	serve(ctxS, stalled) // first: the fan-out reaches it before the healthy one
	waitFor(t, 5*time.Second, "the stalled subscriber", func() bool { return subscribed.Load() == 1 })
	serve(ctxH, healthy)
	waitFor(t, 5*time.Second, "the healthy subscriber", func() bool { return subscribed.Load() == 2 })

	const events = 200
	var published atomic.Int64
	publisherDone := make(chan struct{})
	go func() {
		defer close(publisherDone)
		for range events {
			srv.Publish("apps", &sse.Event{Data: []byte(`{"result":{}}`)})
			published.Add(1)
		}
	}()
	waitFor(t, 5*time.Second, "the fan-out to stall", func() bool { return healthy.writes.Load() >= 60 })
	// A negative needs a bounded wait: Publish does not return while one
	// subscriber is stalled.
	select {
	case <-publisherDone:
		t.Fatal("Publish did not block on the stalled subscriber; the r3labs server behaves differently from v2.10.0")
	case <-time.After(300 * time.Millisecond):
	}
	if got := healthy.writes.Load(); got >= events || published.Load() >= events {
		t.Fatalf("healthy subscriber got %d of %d events while another was stalled; want it starved", got, events)
	}
	t.Logf("one stalled subscriber: the healthy one received %d of %d events and Publish blocked after %d", healthy.writes.Load(), events, published.Load())

	close(stalled.release) // the stalled client reads again: everything flows
	<-publisherDone
	waitFor(t, 5*time.Second, "the healthy subscriber to catch up", func() bool { return healthy.writes.Load() == events })
	cancelS()
	cancelH()
	served.Wait()
	srv.Close()
	goleak.VerifyNone(t, leaks)
}

// TestR3labsEventLogRenumbers: with the default AutoReplay, r3labs' event
// log overwrites each event's id with its own index (event_log.go), so a
// revision id cannot survive, and ids restart at 0 in every process.
func TestR3labsEventLogRenumbers(t *testing.T) {
	srv := sse.New()
	srv.CreateStream("apps")
	srv.Publish("apps", &sse.Event{ID: []byte("1000123"), Data: []byte("x")})
	w := newFrameWriter(false)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.ServeHTTP(w, httptest.NewRequestWithContext(ctx, http.MethodGet, "/?stream=apps", nil))
	}()
	waitFor(t, 5*time.Second, "the replayed event", func() bool { return strings.Contains(w.String(), "data: x") })
	cancel()
	<-done
	srv.Close()
	if got := w.String(); !strings.HasPrefix(got, "id: 0\n") {
		t.Errorf("replayed frame %q: want the log's index 0 in place of id 1000123", got)
	}
}
