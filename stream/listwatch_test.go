package stream_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/r3labs/sse/v2"
	"gopkg.in/cenkalti/backoff.v1"

	"github.com/hanzoai/deploy/stream"
)

// loadDuration is how long the writer runs in the load tests.
func loadDuration() time.Duration {
	if testing.Short() {
		return 300 * time.Millisecond
	}
	return 1500 * time.Millisecond
}

// TestListThenWatchUnderLoad: while a writer applies about 1k changes/s, a
// client lists (snapshot, revision N), then watches from N with the r3labs
// client and applies every event. It must receive exactly the oracle's
// events after N and end with the final snapshot, for a SuperAdmin and two
// tenants.
func TestListThenWatchUnderLoad(t *testing.T) {
	e := newEnv(t, stream.Options{}, newFleet(1, 25))
	done := e.write(1000, loadDuration())

	type run struct {
		c     *client
		after uint64
		mu    sync.Mutex
		err   error
		stop  context.CancelFunc
		ended chan error
	}
	runs := map[string]*run{}
	for i, id := range identities {
		// Start each client at a different point of the writes.
		waitFor(t, 10*time.Second, "the writer to make progress", func() bool {
			return len(e.published()) >= 50*(i+1)
		})
		apps, n := e.list(id)
		ru := &run{c: newClient(id, apps), after: n, ended: make(chan error, 1)}
		runs[id] = ru
		ctx, cancel := context.WithCancel(t.Context())
		ru.stop = cancel
		sc := sse.NewClient(e.srv.URL+"/apps?resourceVersion="+strconv.FormatUint(n, 10), sse.ClientMaxBufferSize(1<<22))
		sc.Headers["X-Identity"] = id
		sc.ReconnectStrategy = backoff.WithContext(&backoff.StopBackOff{}, ctx) // any disconnect fails the test
		go func() {
			ru.ended <- sc.SubscribeWithContext(ctx, "", func(msg *sse.Event) {
				ru.mu.Lock()
				defer ru.mu.Unlock()
				if ru.err != nil {
					return
				}
				// r3labs copies the previous id into a frame without one;
				// every data frame here carries its own.
				ru.err = ru.c.apply(string(msg.ID), len(msg.ID) > 0, string(msg.Event), string(msg.Data))
			})
		}()
	}
	<-done
	deltas := e.published()
	final := e.store.Snapshot()
	for _, id := range identities {
		ru := runs[id]
		want := expected(deltas, id, ru.after)
		waitFor(t, 30*time.Second, id+" to receive every event", func() bool {
			ru.mu.Lock()
			defer ru.mu.Unlock()
			return ru.err != nil || len(ru.c.events) >= len(want)
		})
		ru.stop()
		if err := <-ru.ended; err != nil && err != context.Canceled {
			t.Errorf("%s: stream ended with %v", id, err)
		}
		ru.mu.Lock()
		if ru.err != nil {
			t.Fatalf("%s: %v", id, ru.err)
		}
		if diff := cmp.Diff(want, ru.c.events); diff != "" {
			t.Errorf("%s: events after %d differ from the oracle (-want +got):\n%s", id, ru.after, diff)
		}
		if diff := cmp.Diff(visibleState(final, id), ru.c.apps); diff != "" {
			t.Errorf("%s: final state differs from the final snapshot (-want +got):\n%s", id, diff)
		}
		t.Logf("%s: listed at %d, applied %d events; holds %d apps at %d", id, ru.after, len(ru.c.events), len(ru.c.apps), final.Revision)
		ru.mu.Unlock()
	}
	if st := e.hub.Stats(); st.Resets != 0 || st.CutOff != 0 {
		t.Errorf("got %d resets and %d cut-offs, want none", st.Resets, st.CutOff)
	}
}
