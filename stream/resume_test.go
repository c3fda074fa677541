package stream_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/stream"
	"github.com/hanzoai/deploy/stream/streamtest"
)

// TestResumeAfterRandomCuts: during the writes, each client's connection is
// cut at a random byte many times (a partial frame is dropped, as a
// browser drops it) and it reconnects with Last-Event-ID, keeping the list
// URL as EventSource does. Zero duplicates, zero gaps, same final state.
func TestResumeAfterRandomCuts(t *testing.T) {
	e := newEnv(t, stream.Options{Heartbeat: 20 * time.Millisecond}, newFleet(2, 25))
	done := e.write(1000, loadDuration())
	var wg sync.WaitGroup
	results := make([]*client, len(identities))
	afters := make([]uint64, len(identities))
	connects := make([]int, len(identities))
	errs := make([]error, len(identities))
	writerDone := make(chan struct{})
	for i, id := range identities {
		apps, n := e.list(id)
		c := newClient(id, apps)
		results[i], afters[i] = c, n
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), 7))
			url := "/apps?resourceVersion=" + strconv.FormatUint(n, 10)
			wantN := -1 // known once the writer is done
			caughtUp := func() bool {
				if wantN < 0 {
					select {
					case <-writerDone:
						wantN = len(expected(e.published(), id, n))
					default:
						return false
					}
				}
				return len(c.events) >= wantN
			}
			for {
				if caughtUp() {
					return
				}
				connects[i]++
				h := http.Header{}
				if c.lastID != "" {
					h.Set("Last-Event-ID", c.lastID)
				}
				budget := int64(100 + r.IntN(12_000))
				if wantN >= 0 {
					budget = 1 << 30 // let it catch up
				}
				if err := readFor(t.Context(), e, url, id, h, budget, c, caughtUp); err != nil {
					errs[i] = err
					return
				}
				if connects[i] > 100_000 {
					errs[i] = errors.New("no progress")
					return
				}
			}
		})
	}
	<-done
	close(writerDone)
	wg.Wait()
	final := e.store.Snapshot()
	deltas := e.published()
	for i, id := range identities {
		if errs[i] != nil {
			t.Fatalf("%s: %v", id, errs[i])
		}
		c := results[i]
		seen := map[uint64]bool{}
		for _, ev := range c.events {
			if ev.Rev == 0 {
				continue // not the last of its position: no id
			}
			if seen[ev.Rev] {
				t.Errorf("%s: event id %d received twice", id, ev.Rev)
			}
			seen[ev.Rev] = true
		}
		if diff := cmp.Diff(expected(deltas, id, afters[i]), c.events); diff != "" {
			t.Errorf("%s: events differ from the oracle (-want +got):\n%s", id, diff)
		}
		if diff := cmp.Diff(visibleState(final, id), c.apps); diff != "" {
			t.Errorf("%s: final state differs (-want +got):\n%s", id, diff)
		}
		t.Logf("%s: %d events over %d connections", id, len(c.events), connects[i])
	}
	if st := e.hub.Stats(); st.Resets != 0 {
		t.Errorf("got %d resets, want none: every id was in the ring", st.Resets)
	}
}

// readFor reads one connection until budget bytes were read (a cut at a
// random point), the stream ends, or, when draining, enough holds.
func readFor(ctx context.Context, e *env, url, id string, h http.Header, budget int64, c *client, enough func() bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+url, nil)
	if err != nil {
		return err
	}
	req.Header = h
	req.Header.Set("X-Identity", id)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New("status " + resp.Status)
	}
	rd := streamtest.NewReader(io.LimitReader(resp.Body, budget))
	for {
		if enough() {
			return nil
		}
		f, err := rd.Next()
		if err != nil {
			return nil // cut (or the end of the stream): reconnect
		}
		if err := frameApply(c, f); err != nil {
			return err
		}
	}
}

// TestResetWhenTooOld: without a History, a position older than the ring,
// one from before this replica's initial lists, and one newer than the
// cluster's (after ResumeWait) all get "event: reset" and then the full
// ADDED burst, whose last event carries the snapshot's position.
func TestResetWhenTooOld(t *testing.T) {
	e := newEnv(t, stream.Options{RingEvents: 10, ResumeWait: 50 * time.Millisecond}, newFleet(3, 5))
	listed := e.store.Snapshot().Position.First()
	// One change at a time, each taken in by the hub before the next: a
	// hub more than RingEvents deltas behind drops them and starts its
	// ring over (see Publish), which would leave it shorter than 10.
	for range 40 {
		e.apply(e.fleet.next())
		waitFor(t, 5*time.Second, "the hub to fan out", func() bool { return e.hub.Stats().Revision == e.store.Snapshot().Revision })
	}
	if n := e.hub.Stats().RingLen; n != 10 {
		t.Fatalf("the ring holds %d records, want 10", n)
	}
	cur := e.store.Snapshot().Position.First()
	for _, tc := range []struct {
		name string
		id   uint64
	}{
		{"older than the ring", listed + 1},
		{"before the initial lists", listed - 7},
		{"newer than the cluster", cur + 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, id := range identities {
				checkResetBurst(t, e, id, "Last-Event-ID", tc.id)
				checkResetBurst(t, e, id, "resourceVersion", tc.id)
			}
		})
	}
	// An id the ring still holds resumes without a reset.
	before := e.hub.Stats().Resets
	c := newClient("all", nil)
	c.lenient = true // it holds no list
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	resp, rd, err := e.dial(ctx, "/apps", "all", http.Header{"Last-Event-ID": {strconv.FormatUint(cur-3, 10)}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	want := expected(e.published(), "all", cur-3)
	for len(c.events) < len(want) {
		f, err := rd.Next()
		if err != nil {
			t.Fatal(err)
		}
		if f.Event == "reset" {
			t.Fatal("got a reset for an id the ring holds")
		}
		if err := frameApply(c, f); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(want, c.events); diff != "" {
		t.Errorf("resume from the ring (-want +got):\n%s", diff)
	}
	if got := e.hub.Stats().Resets; got != before {
		t.Errorf("got %d resets, want %d", got, before)
	}
}

func checkResetBurst(t *testing.T, e *env, id, how string, pos uint64) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	path, h := "/apps", http.Header{}
	if how == "Last-Event-ID" {
		h.Set("Last-Event-ID", strconv.FormatUint(pos, 10))
	} else {
		path += "?resourceVersion=" + strconv.FormatUint(pos, 10)
	}
	resp, rd, err := e.dial(ctx, path, id, h)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	f, err := rd.Next()
	if err != nil || f.Retry != "3000" {
		t.Fatalf("%s %s=%d: first frame %+v, %v; want retry: 3000", id, how, pos, f, err)
	}
	if f, err = rd.Next(); err != nil || f.Event != "reset" || f.Data != "{}" {
		t.Fatalf("%s %s=%d: second frame %+v, %v; want event: reset", id, how, pos, f, err)
	}
	snap := e.store.Snapshot()
	c := newClient(id, map[projection.AppKey]string{{Namespace: "stale", Name: "app"}: "{}"})
	if err := frameApply(c, f); err != nil {
		t.Fatal(err)
	}
	for c.lastID == "" {
		f, err := rd.Next()
		if err != nil {
			t.Fatal(err)
		}
		if err := frameApply(c, f); err != nil {
			t.Fatal(err)
		}
	}
	if c.lastID != strconv.FormatUint(snap.Position.First(), 10) {
		t.Errorf("%s %s=%d: burst ends at id %s, want the snapshot's %d", id, how, pos, c.lastID, snap.Position.First())
	}
	if diff := cmp.Diff(visibleState(snap, id), c.apps); diff != "" {
		t.Errorf("%s %s=%d: burst differs from the snapshot (-want +got):\n%s", id, how, pos, diff)
	}
}

// TestRingAge: the ring forgets events older than RingAge (driven by the
// fake clock), and an id among them resets.
func TestRingAge(t *testing.T) {
	clock := streamtest.NewClock(time.Unix(1_760_000_000, 0))
	e := newEnv(t, stream.Options{Clock: clock, RingAge: 5 * time.Minute}, newFleet(4, 3))
	start := e.store.Snapshot().Position.First()
	for range 5 {
		e.apply(e.fleet.next())
	}
	waitFor(t, 5*time.Second, "the hub to fan out", func() bool { return e.hub.Stats().Revision == e.store.Snapshot().Revision })
	if got := e.hub.Stats().RingLen; got != 5 {
		t.Fatalf("ring holds %d, want 5", got)
	}
	clock.Advance(5*time.Minute + time.Second)
	e.apply(e.fleet.next())
	waitFor(t, 5*time.Second, "old events to leave the ring", func() bool { return e.hub.Stats().RingLen == 1 })
	checkResetBurst(t, e, "all", "Last-Event-ID", start+1)
}
