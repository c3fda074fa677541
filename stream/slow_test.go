package stream_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hanzoai/deploy/stream"
)

// TestStalledClientIsCutOff: one client that never reads, beside 100 that
// do. The stalled one is disconnected once its queue is full; the others
// receive every event, in order, while it is stalled.
func TestStalledClientIsCutOff(t *testing.T) {
	const readers, events, queue = 100, 600, 256
	e := newSmallBufferEnv(t, queue)
	from := e.store.Snapshot().Position.First()

	// The stalled client: sends the request and never reads.
	conn := stalled(t, e, fmt.Sprintf("GET /apps?resourceVersion=%d HTTP/1.1\r\nHost: x\r\nX-Identity: all\r\n\r\n", from))

	var received [readers]atomic.Int64
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errs := make(chan error, readers)
	for i := range readers {
		resp, rd, err := e.dial(ctx, "/apps?resourceVersion="+strconv.FormatUint(from, 10), "all", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		wg.Go(func() {
			want := from + 1
			for received[i].Load() < events {
				f, err := rd.Next()
				if err != nil {
					errs <- fmt.Errorf("reader %d after %d events: %w", i, received[i].Load(), err)
					return
				}
				if !f.HasData {
					continue
				}
				if f.ID != strconv.FormatUint(want, 10) {
					errs <- fmt.Errorf("reader %d: got id %s, want %d", i, f.ID, want)
					return
				}
				want++
				received[i].Add(1)
			}
		})
	}
	waitFor(t, 10*time.Second, "every stream to join its view", func() bool {
		st := e.hub.Stats()
		return st.Subscribers == readers+1 && st.Views == 1
	})
	go func() { // about 1,000 changes/s
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for range events {
			<-tick.C
			e.apply(e.fleet.nextAppChange())
		}
	}()
	waitFor(t, 30*time.Second, "the stalled client to be cut off", func() bool { return e.hub.Stats().CutOff == 1 })
	// Its connection ends: what was buffered, then EOF.
	drained := make(chan error, 1)
	go func() {
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, err := io.Copy(io.Discard, bufio.NewReader(conn))
		drained <- err
	}()
	// The others keep receiving while the stalled one is gone.
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range readers {
		if got := received[i].Load(); got != events {
			t.Errorf("reader %d received %d events, want %d", i, got, events)
		}
	}
	if err := <-drained; err != nil {
		t.Errorf("stalled connection: %v; want EOF", err)
	}
	if st := e.hub.Stats(); st.CutOff != 1 || st.SlowCutOff != 1 || st.Subscribers != readers {
		t.Errorf("got %d cut off (%d slow) and %d subscribers, want 1 (1 slow) and %d", st.CutOff, st.SlowCutOff, st.Subscribers, readers)
	}
	if st := e.hub.Stats(); st.Events < events || st.RingOldest.IsZero() || st.Encodings == 0 {
		t.Errorf("got %d events, ring oldest %v and %d encodings; want at least %d events, a ring and encodings", st.Events, st.RingOldest, st.Encodings, events)
	}
}

// TestStalledReplayIsCutOff: a client that resumes from far back and then
// stops reading is still replaying the ring (in no view, so no queue fills
// up) when the fleet moves on: once it has fallen more than a queue's worth
// of revisions further behind than where it started, it is cut off like a
// live subscriber, and its connection ends.
func TestStalledReplayIsCutOff(t *testing.T) {
	const backlog, more, queue = 2000, 600, 256
	e := newSmallBufferEnv(t, queue)
	from := e.store.Snapshot().Position.First()
	for range backlog {
		e.apply(e.fleet.nextAppChange())
	}
	waitFor(t, 10*time.Second, "the backlog in the ring", func() bool { return e.hub.Stats().Events >= backlog })

	conn := stalled(t, e, fmt.Sprintf("GET /apps HTTP/1.1\r\nHost: x\r\nX-Identity: all\r\nLast-Event-ID: %d\r\n\r\n", from))
	// It is served and replaying (not in a view), and has written part of
	// the ring before its socket filled.
	waitFor(t, 10*time.Second, "the stream to start replaying", func() bool {
		st := e.hub.Stats()
		return st.Subscribers == 1 && st.Joined == 0 && st.ReplayEncodings > 0
	})

	go func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for range more {
			<-tick.C
			e.apply(e.fleet.nextAppChange())
		}
	}()
	waitFor(t, 30*time.Second, "the stalled replay to be cut off", func() bool { return e.hub.Stats().SlowCutOff == 1 })
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.Copy(io.Discard, bufio.NewReader(conn)); err != nil {
		t.Errorf("stalled connection: %v; want EOF", err)
	}
}

// newSmallBufferEnv serves with 4 KiB socket write buffers, so a stalled
// client's writer blocks after a few kilobytes rather than megabytes.
func newSmallBufferEnv(t *testing.T, queue int) *env {
	return newEnv(t, stream.Options{QueueSize: queue}, newFleet(7, 5), func(s *http.Server) {
		s.ConnState = func(c net.Conn, s http.ConnState) {
			if tc, ok := c.(*net.TCPConn); ok && s == http.StateNew {
				_ = tc.SetWriteBuffer(4096)
			}
		}
	})
}

// stalled opens a connection with a small read buffer, sends request and
// reads nothing; the connection is closed when the test ends.
func stalled(t *testing.T, e *env, request string) net.Conn {
	conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	return conn
}
