package stream_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/stream"
	"github.com/hanzoai/deploy/stream/streamtest"
)

// drainWatcher is one stream read to its end: the data of the last event
// it received, whether the drain's comment came last, and when it ended on
// the test's clock.
type drainWatcher struct {
	tree     bool
	mu       sync.Mutex
	lastData string
	comment  bool
	ended    time.Time
	err      error
}

func (w *drainWatcher) done() (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ended, !w.ended.IsZero()
}

// openDrainStreams opens apps applications streams and trees tree streams
// of a SuperAdmin, waits until all are live, and reads each to its end in
// its own goroutine.
func openDrainStreams(t *testing.T, e *env, clock *streamtest.Clock, apps, trees int) []*drainWatcher {
	t.Helper()
	var ws []*drainWatcher
	for i := range apps + trees {
		w := &drainWatcher{tree: i >= apps}
		path := "/apps"
		if w.tree {
			path = "/tree?namespace=tenant-acme&name=app-0" + strconv.Itoa(i%3)
		}
		resp, rd, err := e.dial(t.Context(), path, "all", nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", path, resp.Status)
		}
		t.Cleanup(func() { resp.Body.Close() })
		ws = append(ws, w)
		go func() {
			for {
				f, err := rd.Next()
				w.mu.Lock()
				if err != nil {
					w.ended, w.err = clock.Now(), err
					w.mu.Unlock()
					return
				}
				if f.HasData {
					w.lastData = f.Data
				}
				w.comment = slices.Contains(f.Comments, "drain")
				w.mu.Unlock()
			}
		}()
	}
	waitFor(t, 10*time.Second, "every stream to be live", func() bool {
		st := e.hub.Stats()
		return st.Joined == apps && st.TreeSubscribers == trees
	})
	return ws
}

// refused checks that a new stream of each kind is refused with 503, and
// that ServeApplications says why.
func refused(t *testing.T, e *env) {
	t.Helper()
	for _, path := range []string{"/apps", "/tree?namespace=tenant-acme&name=app-01"} {
		resp, _, err := e.dial(t.Context(), path, "all", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("a new stream %s while draining: %s, want 503", path, resp.Status)
		}
	}
	req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/apps", nil)
	err := e.hub.ServeApplications(httptest.NewRecorder(), req, stream.Request{Scope: scopeOf(t, "all")})
	if !errors.Is(err, stream.ErrDraining) || !errors.Is(err, stream.ErrHubStopped) {
		t.Errorf("ServeApplications while draining: %v, want ErrDraining (an ErrHubStopped)", err)
	}
}

// TestDrain: 20 streams (16 applications, 4 trees) drained over 2 s of the
// hub's clock end one by one across the window, none before it starts; each
// applications stream receives the change queued to it before it ends; new
// streams are refused from the start; Drain returns once all have ended,
// and nothing is left behind.
func TestDrain(t *testing.T) {
	const (
		apps, trees = 16, 4
		n           = apps + trees
		over        = 2 * time.Second
		step        = 100 * time.Millisecond
	)
	clock := streamtest.NewClock(time.Unix(1_760_000_000, 0))
	e := newEnv(t, stream.Options{Clock: clock}, newFleet(12, 3))
	leaks := goleak.IgnoreCurrent()
	ws := openDrainStreams(t, e, clock, apps, trees)
	if e.hub.Draining() {
		t.Fatal("Draining before Drain")
	}

	start := clock.Now()
	drained := make(chan struct{})
	go func() { defer close(drained); e.hub.Drain(context.Background(), over) }()
	if !clock.WaitFor(t.Context(), 0, n) {
		t.Fatal("the drain scheduled no end")
	}
	if !e.hub.Draining() {
		t.Error("not Draining during the drain")
	}
	refused(t, e)

	ended := func() (k int) {
		for _, w := range ws {
			if _, ok := w.done(); ok {
				k++
			}
		}
		return k
	}
	perStep := map[time.Time]int{}
	for i := 0; time.Duration(i)*step < over; i++ {
		if k := ended(); k != n-pending(clock) {
			t.Fatalf("at %v: %d streams ended, %d ends due", clock.Now().Sub(start), k, n-pending(clock))
		}
		select {
		case <-drained:
			if k := ended(); k < n {
				t.Fatalf("Drain returned at %v with %d of %d streams open", clock.Now().Sub(start), n-k, n)
			}
		default:
		}
		// A change queued to every applications stream, then the clock
		// moves: a stream ended now writes the change first.
		change := e.fleet.nextAppChange()
		tag := `"` + change.Object.Spec.(*projection.AppSpec).Tag + `"`
		rev := e.apply(change)[0].Revision
		waitFor(t, 5*time.Second, "the change to be fanned out", func() bool { return e.hub.Stats().Revision >= rev })
		clock.Advance(step)
		due := n - pending(clock)
		waitFor(t, 10*time.Second, "the streams due to end", func() bool { return ended() == due })
		for _, w := range ws {
			at, _ := w.done()
			if at.Equal(clock.Now()) {
				perStep[at]++
				w.mu.Lock()
				if !w.tree && (!strings.Contains(w.lastData, tag) || !w.comment) {
					t.Errorf("a stream ended at %v after %q (drain comment last: %v), want the change to %s then the comment",
						at.Sub(start), w.lastData, w.comment, tag)
				}
				w.mu.Unlock()
			}
		}
	}
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
		t.Fatal("Drain did not return after every stream ended")
	}

	var first, last time.Time
	for i, w := range ws {
		at, ok := w.done()
		if !ok {
			t.Fatalf("stream %d never ended", i)
		}
		if !at.After(start) {
			t.Errorf("stream %d ended at the drain's start", i)
		}
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	if spread := last.Sub(first); spread < over/2 {
		t.Errorf("the streams ended within %v of each other, want them spread over %v", spread, over)
	}
	for at, k := range perStep {
		if k > 2 {
			t.Errorf("%d streams ended together at %v, want them one by one", k, at.Sub(start))
		}
	}
	refused(t, e)
	waitFor(t, 5*time.Second, "every stream to be gone from the hub", func() bool {
		st := e.hub.Stats()
		return st.Subscribers == 0 && st.Views == 0 && st.TreeSubscribers == 0
	})
	e.srv.Client().CloseIdleConnections()
	goleak.VerifyNone(t, leaks)
}

func pending(c *streamtest.Clock) int {
	_, timers := c.Pending()
	return timers
}

// TestDrainCutShort: when Drain's context ends, the streams not yet ended
// are cut off at once and Drain returns; with no window, every stream ends
// at once.
func TestDrainCutShort(t *testing.T) {
	for _, over := range []time.Duration{time.Hour, 0} {
		t.Run(over.String(), func(t *testing.T) {
			clock := streamtest.NewClock(time.Unix(1_760_000_000, 0))
			e := newEnv(t, stream.Options{Clock: clock}, newFleet(13, 3))
			ws := openDrainStreams(t, e, clock, 6, 2)
			ctx, cancel := context.WithCancel(t.Context())
			drained := make(chan struct{})
			go func() { defer close(drained); e.hub.Drain(ctx, over) }()
			if over > 0 {
				if !clock.WaitFor(t.Context(), 0, len(ws)) {
					t.Fatal("the drain scheduled no end")
				}
				refused(t, e)
				cancel()
			}
			select {
			case <-drained:
			case <-time.After(10 * time.Second):
				t.Fatal("Drain did not return")
			}
			cancel()
			waitFor(t, 10*time.Second, "every stream to end", func() bool {
				for _, w := range ws {
					if _, ok := w.done(); !ok {
						return false
					}
				}
				return true
			})
			if _, timers := clock.Pending(); timers != 0 {
				t.Errorf("%d drain timers left, want 0", timers)
			}
			refused(t, e)
		})
	}
}
