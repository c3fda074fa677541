package stream_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/stream"
	"github.com/hanzoai/deploy/stream/streamtest"
)

// TestConnectDisconnectCycles: 1,000 streams of every kind come and go
// (some leave before reading a byte, some mid-burst, some after joining
// their view) while changes flow. Afterwards the hub holds no subscriber,
// no view and no tree subscription, and no goroutine is left behind.
func TestConnectDisconnectCycles(t *testing.T) {
	cycles := 1000
	if testing.Short() {
		cycles = 200
	}
	e := newEnv(t, stream.Options{Heartbeat: 5 * time.Millisecond}, newFleet(8, 10))
	client := e.srv.Client()
	leaks := goleak.IgnoreCurrent()
	stopWriter := make(chan struct{})
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopWriter:
				return
			case <-tick.C:
				e.apply(e.fleet.next())
			}
		}
	}()
	for i := range cycles {
		ctx, cancel := context.WithCancel(t.Context())
		id := identities[i%len(identities)]
		var path string
		h := http.Header{}
		switch i % 5 {
		case 0:
			path = "/apps"
		case 1: // distinct views, created and dropped
			path = fmt.Sprintf("/apps?projects=shop&selector=hanzo.ai/env%%3Dmain,x%%21%%3Dv%d", i)
		case 2:
			path = "/tree?namespace=tenant-" + []string{"acme", "acme", "globex"}[i%3] + "&name=app-0" + strconv.Itoa(i%10)
			id = []string{"all", "acme", "globex"}[i%3]
		case 3: // resume
			path = "/apps"
			h.Set("Last-Event-ID", strconv.FormatUint(e.store.Snapshot().Position.First()-uint64(i%7), 10))
		case 4:
			path = "/apps?fields=result.type,result.application.metadata.name&name=app-0" + strconv.Itoa(i%10)
		}
		resp, rd, err := e.dial(ctx, path, id, h)
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
			t.Fatalf("cycle %d %s: status %s", i, path, resp.Status)
		}
		// Leave at a different point each time: right away, after the
		// first frame, or once the stream is live.
		for n := i % 3; n > 0 && resp.StatusCode == http.StatusOK; n-- {
			if _, err := rd.Next(); err != nil {
				break
			}
		}
		cancel()
		resp.Body.Close()
	}
	close(stopWriter)
	<-writerDone
	waitFor(t, 20*time.Second, "every stream to be gone from the hub", func() bool {
		st := e.hub.Stats()
		return st.Subscribers == 0 && st.Views == 0 && st.TreeSubscribers == 0
	})
	client.CloseIdleConnections()
	goleak.VerifyNone(t, leaks)
	if st := e.hub.Stats(); st.CutOff != 0 {
		t.Errorf("%d streams were cut off, want none", st.CutOff)
	}
}

// TestExpiry: a stream ends at its credential's expiry, on the injected
// clock; an expired credential gets no stream at all.
func TestExpiry(t *testing.T) {
	clock := streamtest.NewClock(time.Unix(1_760_000_000, 0))
	e := newEnv(t, stream.Options{Clock: clock}, newFleet(9, 2))
	leaks := goleak.IgnoreCurrent()
	for _, path := range []string{"/apps", "/tree?namespace=tenant-acme&name=app-01"} {
		t.Run(path, func(t *testing.T) {
			_, timers := clock.Pending()
			h := http.Header{"X-Expiry": {clock.Now().Add(time.Hour).Format(time.RFC3339Nano)}}
			resp, rd, err := e.dial(t.Context(), path, "acme", h)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if _, err := rd.Next(); err != nil {
				t.Fatalf("first frame: %v", err)
			}
			if !clock.WaitFor(t.Context(), 0, timers+1) {
				t.Fatal("no expiry timer")
			}
			clock.Advance(59 * time.Minute)
			if st := e.hub.Stats(); st.Subscribers+st.TreeSubscribers != 1 {
				t.Fatalf("before the expiry: %+v, want the stream still served", st)
			}
			clock.Advance(time.Minute)
			for {
				if _, err := rd.Next(); err != nil {
					break // the stream ended
				}
			}
		})
	}
	// Already expired: refused before any byte (the handler's 401).
	h := http.Header{"X-Expiry": {clock.Now().Add(-time.Second).Format(time.RFC3339Nano)}}
	resp, _, err := e.dial(t.Context(), "/apps", "acme", h)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("expired credential: got %s, want 401", resp.Status)
	}
	waitFor(t, 5*time.Second, "the streams to leave", func() bool {
		st := e.hub.Stats()
		return st.Subscribers == 0 && st.TreeSubscribers == 0
	})
	if _, timers := clock.Pending(); timers != 0 {
		t.Errorf("%d expiry timers left, want 0", timers)
	}
	e.srv.Client().CloseIdleConnections()
	goleak.VerifyNone(t, leaks)
}

// TestHubStop: stopping the hub ends every stream, Run returns after their
// Serve calls did, and later streams are refused.
func TestHubStop(t *testing.T) {
	store := projection.NewStore(projection.DefaultConfig())
	if _, err := store.Apply(newFleet(10, 2).initial()...); err != nil {
		t.Fatal(err)
	}
	hub := stream.NewHub(store, stream.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() { defer close(ran); hub.Run(ctx) }()
	srv := newHubServer(t, hub)
	var readers []*streamtest.Reader
	for _, path := range []string{"/apps", "/apps?name=app-01", "/tree?namespace=tenant-acme&name=app-01"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+path, nil)
		req.Header.Set("X-Identity", "acme")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		rd := streamtest.NewReader(resp.Body)
		if _, err := rd.Next(); err != nil {
			t.Fatal(err)
		}
		readers = append(readers, rd)
	}
	cancel()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	for _, rd := range readers {
		for {
			if _, err := rd.Next(); err != nil {
				break // the stream ended
			}
		}
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/apps", nil)
	req.Header.Set("X-Identity", "acme")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("after stop: got %s, want 503", resp.Status)
	}
}
