package stream_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/stream"
	"github.com/hanzoai/deploy/stream/streamtest"
)

// pastCluster is a History with the positions a test recorded: what a
// list at exactly that resourceVersion would answer. Any other position
// is gone, as after a compaction.
type pastCluster struct {
	mu    sync.Mutex
	at    map[uint64]*stream.PastRows
	calls atomic.Int64
}

func (p *pastCluster) record(store *projection.Store, snap *projection.Snapshot) {
	var roots []*projection.Object
	for a := range snap.Apps() {
		roots = append(roots, a.Tree[0].Obj)
	}
	for _, a := range snap.CDApplications() {
		roots = append(roots, a.Tree[0].Obj)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.at == nil {
		p.at = map[uint64]*stream.PastRows{}
	}
	p.at[snap.Position.First()] = &stream.PastRows{Rows: store.PastRows(roots)}
}

func (p *pastCluster) RowsAt(_ context.Context, at projection.Position) (*stream.PastRows, error) {
	pos := at.First()
	p.calls.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if rows, ok := p.at[pos]; ok {
		return rows, nil
	}
	return nil, fmt.Errorf("rows at %d: %w", pos, stream.ErrHistoryGone)
}

// TestResumeFromHistory: a client at a position the ring no longer holds
// (as on a replica that started after it) is caught up from the cluster's
// history without a reset: rows added, changed, deleted and moved in and
// out of its scope since, ending with exactly the rows a list shows now.
// A position the cluster no longer holds resets once.
func TestResumeFromHistory(t *testing.T) {
	hist := &pastCluster{}
	e := newEnv(t, stream.Options{RingEvents: 5, History: hist}, newFleet(21, 6))
	type held struct {
		apps map[projection.AppKey]string
		pos  uint64
	}
	start := map[string]held{}
	snap := e.store.Snapshot()
	hist.record(e.store, snap)
	for _, id := range identities {
		start[id] = held{visibleState(snap, id), snap.Position.First()}
	}
	// Enough changes of every kind (org and project moves, deletions,
	// re-creations, tree-only changes) to leave the ring behind.
	for range 300 {
		e.apply(e.fleet.next())
	}
	waitFor(t, 5*time.Second, "the hub to fan out", func() bool { return e.hub.Stats().Revision == e.store.Snapshot().Revision })
	final := e.store.Snapshot()
	for _, id := range identities {
		c := newClient(id, start[id].apps)
		readUntilID(t, e, "/apps", id, http.Header{"Last-Event-ID": {strconv.FormatUint(start[id].pos, 10)}}, c, final.Position.First())
		if c.resets != 0 {
			t.Errorf("%s: %d resets, want none", id, c.resets)
		}
		if diff := cmp.Diff(visibleState(final, id), c.apps); diff != "" {
			t.Errorf("%s: final state differs from the list (-want +got):\n%s", id, diff)
		}
		t.Logf("%s: %d events from the cluster's history", id, len(c.events))
	}
	st := e.hub.Stats()
	if st.HistoryResumes != uint64(len(identities)) || st.Resets != 0 {
		t.Errorf("%d history resumes and %d resets; want %d and none", st.HistoryResumes, st.Resets, len(identities))
	}
	if n := hist.calls.Load(); n != 1 {
		t.Errorf("the cluster was asked %d times for one position, want once", n)
	}
	// A position the cluster has compacted away: one reset, then the list.
	c := newClient("acme", map[projection.AppKey]string{{Namespace: "tenant-acme", Name: "stale"}: "{}"})
	readUntilID(t, e, "/apps", "acme", http.Header{"Last-Event-ID": {strconv.FormatUint(start["acme"].pos+1, 10)}}, c, final.Position.First())
	if c.resets != 1 {
		t.Errorf("compacted position: %d resets, want 1", c.resets)
	}
	if diff := cmp.Diff(visibleState(final, "acme"), c.apps); diff != "" {
		t.Errorf("after the reset (-want +got):\n%s", diff)
	}
}

// readUntilID applies a stream's frames to c until one carries id until.
func readUntilID(t *testing.T, e *env, path, id string, h http.Header, c *client, until uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	resp, rd, err := e.dial(ctx, path, id, h)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	want := strconv.FormatUint(until, 10)
	for c.lastID != want {
		f, err := rd.Next()
		if err != nil {
			t.Fatalf("%s: after %d events (last id %s, want %s): %v", id, len(c.events), c.lastID, want, err)
		}
		if err := frameApply(c, f); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBatchSharesOneID: the changes of one Apply share a position; only
// the last event of it carries the id, so a client cut off within it
// resumes from before it and misses none. Replayed from the ring, the
// batch has the same shape.
func TestBatchSharesOneID(t *testing.T) {
	e := newEnv(t, stream.Options{}, newFleet(5, 3))
	before := e.store.Snapshot().Position.First()
	check := func(rd *streamtest.Reader, pos uint64) {
		t.Helper()
		var frames []streamtest.Frame
		for len(frames) < 3 {
			f, err := rd.Next()
			if err != nil {
				t.Fatal(err)
			}
			if f.HasData {
				frames = append(frames, f)
			}
		}
		for i, f := range frames {
			if last := i == len(frames)-1; f.HasID != last || last && f.ID != strconv.FormatUint(pos, 10) {
				t.Errorf("event %d of 3: id %q (has %v); want one only on the last, %d", i+1, f.ID, f.HasID, pos)
			}
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	resp, live, err := e.dial(ctx, "/apps?resourceVersion="+strconv.FormatUint(before, 10), "all", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	waitFor(t, 5*time.Second, "the stream to join its view", func() bool { return e.hub.Stats().Joined == 1 })
	deltas := e.apply(e.fleet.nextAppChange(), e.fleet.nextAppChange(), e.fleet.nextAppChange())
	if len(deltas) != 3 || deltas[0].Position.First() != deltas[2].Position.First() {
		t.Fatalf("%d deltas at %d..%d; want 3 at one position", len(deltas), deltas[0].Position.First(), deltas[len(deltas)-1].Position.First())
	}
	check(live, deltas[0].Position.First())
	resp2, replay, err := e.dial(ctx, "/apps", "all", http.Header{"Last-Event-ID": {strconv.FormatUint(before, 10)}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	check(replay, deltas[0].Position.First())
}

// TestResumeWaitsForNewerPosition: a client that comes from a replica
// further ahead waits, up to ResumeWait, for this one to fold its
// position, then resumes from it without a reset; one that never comes is
// reset after the wait.
func TestResumeWaitsForNewerPosition(t *testing.T) {
	e := newEnv(t, stream.Options{ResumeWait: 3 * time.Second}, newFleet(6, 3))
	ahead := clusterRV.Load() + 1 // the next write's position
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(100 * time.Millisecond)
		e.apply(e.fleet.nextAppChange()) // reaches ahead
		time.Sleep(50 * time.Millisecond)
		e.apply(e.fleet.nextAppChange()) // the first change after it
	}()
	c := newClient("all", nil)
	c.lenient = true
	readUntilID(t, e, "/apps", "all", http.Header{"Last-Event-ID": {strconv.FormatUint(ahead, 10)}}, c, ahead+1)
	<-done
	if c.resets != 0 || len(c.events) != 1 {
		t.Errorf("%d resets and %d events; want none and the one change after the client's position", c.resets, len(c.events))
	}
	e2 := newEnv(t, stream.Options{ResumeWait: 100 * time.Millisecond}, newFleet(6, 3))
	c = newClient("all", nil)
	now := e2.store.Snapshot().Position.First()
	readUntilID(t, e2, "/apps", "all", http.Header{"Last-Event-ID": {strconv.FormatUint(now+50, 10)}}, c, now)
	if c.resets != 1 {
		t.Errorf("a position never reached: %d resets, want 1", c.resets)
	}
}

// TestResumeBeforeSynced: until the hub is told the initial lists are
// folded, it cannot tell what changed since any position: a resume waits
// for it (ResumeWait), then resets. After Synced the same position
// resumes, and one that comes while the hub is syncing waits for it.
func TestResumeBeforeSynced(t *testing.T) {
	f := newFleet(8, 2)
	e := unsyncedEnv(t, f, 100*time.Millisecond)
	pos := e.store.Snapshot().Position.First()
	c := newClient("all", map[projection.AppKey]string{})
	readUntilID(t, e, "/apps", "all", http.Header{"Last-Event-ID": {strconv.FormatUint(pos, 10)}}, c, pos)
	if c.resets != 1 {
		t.Errorf("never synced: %d resets, want 1", c.resets)
	}
	e.hub.Synced(projection.At(pos))
	e.apply(f.nextAppChange())
	c = newClient("all", visibleState(e.store.Snapshot(), "all"))
	c.lenient = true
	readUntilID(t, e, "/apps", "all", http.Header{"Last-Event-ID": {strconv.FormatUint(pos, 10)}}, c, e.store.Snapshot().Position.First())
	if c.resets != 0 || len(c.events) != 1 {
		t.Errorf("after Synced: %d resets and %d events; want none and 1", c.resets, len(c.events))
	}

	// A replica just ready, its hub not yet told: the resume waits.
	e = unsyncedEnv(t, newFleet(9, 2), 5*time.Second)
	pos = e.store.Snapshot().Position.First()
	go func() {
		time.Sleep(50 * time.Millisecond)
		e.hub.Synced(projection.At(pos))
		e.apply(e.fleet.nextAppChange())
	}()
	c = newClient("all", visibleState(e.store.Snapshot(), "all"))
	c.lenient = true
	readUntilID(t, e, "/apps", "all", http.Header{"Last-Event-ID": {strconv.FormatUint(pos, 10)}}, c, pos+1)
	if c.resets != 0 || len(c.events) != 1 {
		t.Errorf("synced during the wait: %d resets and %d events; want none and 1", c.resets, len(c.events))
	}
}

// unsyncedEnv is newEnv without the Synced call.
func unsyncedEnv(t *testing.T, f *fleet, wait time.Duration) *env {
	store := projection.NewStore(projection.DefaultConfig())
	if _, err := store.Apply(f.initial()...); err != nil {
		t.Fatal(err)
	}
	hub := stream.NewHub(store, stream.Options{ResumeWait: wait})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); hub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-ran })
	return &env{t: t, store: store, hub: hub, fleet: f, srv: newHubServer(t, hub)}
}
