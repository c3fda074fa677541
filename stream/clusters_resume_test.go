package stream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/stream"
	"github.com/hanzoai/deploy/stream/streamtest"
)

// frames opens a stream as identity resuming from lastID and reads until
// n events with data have come, returning every frame read.
func (r *replica) frames(t *testing.T, identity, lastID string, n int) []streamtest.Frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.srv.URL+"/apps", nil)
	req.Header.Set("X-Identity", identity)
	req.Header.Set("Last-Event-ID", lastID)
	resp, err := r.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := streamtest.NewReader(resp.Body)
	var out []streamtest.Frame
	for data := 0; data < n; {
		f, err := rd.Next()
		if err != nil {
			t.Fatalf("after %d of %d events: %v", data, n, err)
		}
		out = append(out, f)
		if f.HasData {
			data++
		}
	}
	return out
}

// frameEvent reads a data frame: its type, its Application's
// "<namespace>/<name>" and the Application itself.
func frameEvent(t *testing.T, f streamtest.Frame) (typ, key string, app json.RawMessage) {
	t.Helper()
	var we wireEvent
	var m wireMeta
	if err := json.Unmarshal([]byte(f.Data), &we); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(we.Result.Application, &m); err != nil {
		t.Fatal(err)
	}
	return we.Result.Type, m.Metadata.Namespace + "/" + m.Metadata.Name, we.Result.Application
}

// eventKeys are the events' "<type> <namespace>/<name>" ("reset" for a
// reset).
func eventKeys(t *testing.T, fs []streamtest.Frame) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, f := range fs {
		if f.Event == "reset" {
			out["reset"] = true
			continue
		}
		typ, key, _ := frameEvent(t, f)
		out[typ+" "+key] = true
	}
	return out
}

// whenJoined runs do, in its own goroutine, once r's hub has a stream live
// in a view (or after 5 s); the channel closes when do has returned.
func whenJoined(r *replica, do func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		deadline := time.Now().Add(5 * time.Second)
		for r.hub.Stats().Joined == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		do()
	}()
	return done
}

// TestTwoClustersResumeIDsNeverGoBack: a client saw staging's change on
// replica a, which folded it before two changes of in-cluster; replica b
// folded them the other way round. Resuming on b, the client receives
// in-cluster's two changes, and every id it is given is at or past its
// position in each cluster: an id back in staging's part would, after a
// cut, have staging's change sent to it again. A resume from each id b
// gave is exact on either replica.
func TestTwoClustersResumeIDsNeverGoBack(t *testing.T) {
	var c cluster2
	initial := []projection.Change{
		c.app(0, "hanzo", "iam", "", "v1"),
		c.app(1, "hanzo", "iam", "", "v1"),
		c.app(0, "tenant-acme", "web", "acme", "v1"),
	}
	a, b := newReplica(t, initial), newReplica(t, initial)
	names := a.store.Config().ClusterNames()
	_, at0 := a.read(t, "all", "", 3)
	staging := c.app(1, "hanzo", "iam", "", "v2")
	home1, home2 := c.app(0, "hanzo", "iam", "", "v2"), c.app(0, "tenant-acme", "web", "acme", "v2")
	for _, ch := range []projection.Change{staging, home1, home2} {
		a.apply(t, ch)
	}
	for _, ch := range []projection.Change{home1, home2, staging} {
		b.apply(t, ch)
	}
	first, at1 := a.readSome(t, "all", at0, 1, false)
	if got := eventKeys(t, first); !got["MODIFIED hanzo.staging/iam"] {
		t.Fatalf("first event on a: %v", got)
	}

	last, err := projection.ParsePosition(at1, names)
	if err != nil {
		t.Fatal(err)
	}
	var given []string
	for _, f := range b.frames(t, "all", at1, 2) {
		if !f.HasID {
			continue
		}
		p, err := projection.ParsePosition(f.ID, names)
		if err != nil {
			t.Fatalf("id %q: %v", f.ID, err)
		}
		if !p.Covers(last) {
			t.Errorf("resumed on b from %s: id %s is behind %s", at1, p, last)
		}
		last = p
		given = append(given, f.ID)
	}
	if last.String() != b.store.Snapshot().Position.String() {
		t.Errorf("the last id %s, want b's position %s", last, b.store.Snapshot().Position)
	}
	// After the first of in-cluster's changes, only the second is due,
	// wherever the client resumes.
	for _, r := range []*replica{a, b} {
		got, _ := r.read(t, "all", given[0], 1)
		if k := eventKeys(t, got); !k["MODIFIED tenant-acme/web"] {
			t.Errorf("resumed from %s: %v, want in-cluster's tenant-acme/web alone", given[0], k)
		}
	}
}

// TestTwoClustersResumeBeforeTheRing: a client resumes on a replica whose
// fold holds its position but whose hub has not yet fanned out the last
// change (the change the client saw elsewhere, staging's, folded here
// after two of in-cluster's): it joins live before that change, and when
// the change comes live it is not sent again, as staging's part of the
// client's position covers it.
func TestTwoClustersResumeBeforeTheRing(t *testing.T) {
	var c cluster2
	initial := []projection.Change{
		c.app(0, "hanzo", "iam", "", "v1"),
		c.app(1, "hanzo", "iam", "", "v1"),
		c.app(0, "tenant-acme", "web", "acme", "v1"),
	}
	a, b := newReplica(t, initial), newReplica(t, initial)
	_, at0 := a.read(t, "all", "", 3)
	staging := c.app(1, "hanzo", "iam", "", "v2")
	home1, home2 := c.app(0, "hanzo", "iam", "", "v2"), c.app(0, "tenant-acme", "web", "acme", "v2")
	for _, ch := range []projection.Change{staging, home1, home2} {
		a.apply(t, ch)
	}
	b.apply(t, home1)
	b.apply(t, home2)
	// Folded, not yet handed to the hub.
	late, err := b.store.Apply(staging)
	if err != nil {
		t.Fatal(err)
	}
	_, at1 := a.readSome(t, "all", at0, 1, false)

	published := whenJoined(b, func() {
		b.hub.Publish(late)
	})
	got, last := b.read(t, "all", at1, 2)
	<-published
	if k := eventKeys(t, got); !k["MODIFIED hanzo/iam"] || !k["MODIFIED tenant-acme/web"] {
		t.Errorf("resumed on b from %s: %v, want in-cluster's two changes", at1, k)
	}
	if last != b.store.Snapshot().Position.String() {
		t.Errorf("the last id %s, want b's position %s", last, b.store.Snapshot().Position)
	}
}

// TestTwoClustersSyncedAtTheFold: a replica whose initial lists ended at
// a resourceVersion of staging newer than any object it folded (the API
// server's bookmarks, objects no row reads) resumes a client of another
// replica from its ring, and its heartbeat's id is never ahead of the
// records after it.
func TestTwoClustersSyncedAtTheFold(t *testing.T) {
	var c cluster2
	initial := []projection.Change{
		c.app(0, "hanzo", "iam", "", "v1"),
		c.app(1, "hanzo", "iam", "", "v1"),
	}
	a := newReplica(t, initial)
	b := newReplicaWith(t, initial, stream.Options{Batch: -1, Heartbeat: 20 * time.Millisecond}, func(p projection.Position) projection.Position {
		return p.With(1, p.Of(1)+40) // the lists' resourceVersion in staging
	})
	names := a.store.Config().ClusterNames()
	_, at0 := a.read(t, "all", "", 2)
	change := c.app(0, "hanzo", "iam", "", "v2")
	a.apply(t, change)
	go func() {
		time.Sleep(100 * time.Millisecond) // heartbeats first
		b.apply(t, change)
	}()
	var last projection.Position
	beats := 0
	for _, f := range b.frames(t, "all", "", 3) {
		if !f.HasID {
			continue
		}
		p, err := projection.ParsePosition(f.ID, names)
		if err != nil {
			t.Fatalf("id %q: %v", f.ID, err)
		}
		if !p.Covers(last) {
			t.Errorf("id %s after %s", p, last)
		}
		if !f.HasData {
			beats++
		}
		last = p
	}
	if beats == 0 {
		t.Error("no heartbeat with an id came before the change")
	}
	got, _ := b.read(t, "all", at0, 1)
	if k := eventKeys(t, got); !k["MODIFIED hanzo/iam"] {
		t.Errorf("resumed on b from a's %s: %v, want in-cluster's change alone", at0, k)
	}
	if s := b.hub.Stats(); s.Resets != 0 {
		t.Errorf("%d resets on b", s.Resets)
	}
}

// TestTwoClustersResumeWithoutACluster: a replica started while staging
// did not answer (synced without it) resumes a client that holds both
// clusters: in-cluster's changes come, staging's part of its id is kept;
// once staging answers, the objects the client already holds are not
// sent again, and staging's change after its position is.
func TestTwoClustersResumeWithoutACluster(t *testing.T) {
	var c cluster2
	home := []projection.Change{c.app(0, "hanzo", "iam", "", "v1"), c.app(0, "tenant-acme", "web", "acme", "v1")}
	staging := []projection.Change{c.app(1, "hanzo", "iam", "", "v1"), c.app(1, "tenant-acme", "web", "acme", "v1")}
	a := newReplica(t, slices.Concat(home, staging))
	b := newReplicaWith(t, home, stream.Options{Batch: -1}, func(p projection.Position) projection.Position { return p.With(1, 0) })
	names := a.store.Config().ClusterNames()
	_, at0 := a.read(t, "all", "", 4)
	change := c.app(0, "hanzo", "iam", "", "v2")
	a.apply(t, change)
	b.apply(t, change)
	got, at1 := b.read(t, "all", at0, 1)
	if k := eventKeys(t, got); !k["MODIFIED hanzo/iam"] {
		t.Errorf("resumed on b, which holds nothing of staging, from %s: %v, want in-cluster's change alone", at0, k)
	}
	p0, _ := projection.ParsePosition(at0, names)
	p1, _ := projection.ParsePosition(at1, names)
	if p1.Of(1) != p0.Of(1) || p1.Of(0) <= p0.Of(0) {
		t.Errorf("id %s after %s: want in-cluster's part past it and staging's kept", at1, at0)
	}

	// Staging answers: b folds its objects, then one of them changes.
	later := c.app(1, "tenant-acme", "web", "acme", "v2")
	a.apply(t, later)
	done := whenJoined(b, func() {
		b.apply(t, staging...)
		b.apply(t, later)
	})
	got, at2 := b.read(t, "all", at1, 1)
	<-done
	if k := eventKeys(t, got); !k["MODIFIED tenant-acme.staging/web"] {
		t.Errorf("once staging answers on b: %v, want staging's change alone", k)
	}
	if at2 != a.store.Snapshot().Position.String() {
		t.Errorf("the last id %s, want %s", at2, a.store.Snapshot().Position)
	}
	if s := b.hub.Stats(); s.Resets != 0 {
		t.Errorf("%d resets on b", s.Resets)
	}
}

// homeHistory is a History of a replica that holds nothing of staging
// (it did not answer): it answers in-cluster's rows at the recorded
// position, and fails for a position with a part of staging, as a
// cluster that does not answer would.
type homeHistory struct {
	at   projection.Position
	rows *stream.PastRows
}

func (h *homeHistory) RowsAt(_ context.Context, at projection.Position) (*stream.PastRows, error) {
	if at.Of(1) != 0 {
		return nil, fmt.Errorf("cluster staging: asked for %s: connection refused", at)
	}
	if at.Of(0) != h.at.Of(0) {
		return nil, fmt.Errorf("rows at %s: %w", at, stream.ErrHistoryGone)
	}
	return h.rows, nil
}

// TestTwoClustersHistoryWithoutACluster: a replica started while staging
// did not answer, and after the client's position (its ring does not
// cover it), catches the client up from in-cluster's history alone: no
// reset, in-cluster's change, staging's part of the id kept; once staging
// answers, what the client holds of it is not sent again.
func TestTwoClustersHistoryWithoutACluster(t *testing.T) {
	var c cluster2
	home := []projection.Change{c.app(0, "hanzo", "iam", "", "v1"), c.app(0, "tenant-acme", "web", "acme", "v1")}
	staging := []projection.Change{c.app(1, "hanzo", "iam", "", "v1"), c.app(1, "tenant-acme", "web", "acme", "v1")}
	a := newReplica(t, slices.Concat(home, staging))
	names := a.store.Config().ClusterNames()
	_, at0 := a.read(t, "all", "", 4)
	p0, _ := projection.ParsePosition(at0, names)
	hist := &homeHistory{at: p0}
	var roots []*projection.Object
	for app := range a.store.Snapshot().Apps() {
		if app.ClusterIndex() == 0 {
			roots = append(roots, app.Tree[0].Obj)
		}
	}
	hist.rows = &stream.PastRows{Rows: a.store.PastRows(roots)}
	change := c.app(0, "hanzo", "iam", "", "v2")
	a.apply(t, change)
	// b starts after the change, without staging: its ring begins after at0.
	b := newReplicaWith(t, append(slices.Clone(home), change), stream.Options{Batch: -1, History: hist, ResumeWait: 100 * time.Millisecond},
		func(p projection.Position) projection.Position { return p.With(1, 0) })
	got, at1 := b.read(t, "all", at0, 1)
	if k := eventKeys(t, got); !k["MODIFIED hanzo/iam"] {
		t.Errorf("caught up on b from %s: %v, want in-cluster's change alone", at0, k)
	}
	p1, _ := projection.ParsePosition(at1, names)
	if p1.Of(1) != p0.Of(1) || p1.Of(0) <= p0.Of(0) {
		t.Errorf("id %s after %s: want in-cluster's part past it and staging's kept", at1, at0)
	}
	later := c.app(1, "tenant-acme", "web", "acme", "v2")
	a.apply(t, later)
	done := whenJoined(b, func() {
		b.apply(t, staging...)
		b.apply(t, later)
	})
	got, _ = b.readSome(t, "all", at0, 2, true)
	<-done
	if k := eventKeys(t, got); len(k) != 2 || !k["MODIFIED hanzo/iam"] || !k["MODIFIED tenant-acme.staging/web"] {
		t.Errorf("from %s on b, staging answering meanwhile: %v, want in-cluster's change and staging's", at0, k)
	}
	if s := b.hub.Stats(); s.Resets != 0 || s.HistoryResumes != 2 {
		t.Errorf("%d resets and %d resumes from history on b, want none and 2", s.Resets, s.HistoryResumes)
	}
}

// TestTwoClustersHistoryOfTheClusterThatChanged: a replica whose ring
// does not cover a client's position catches it up from the history of
// the cluster that changed since alone: staging, which the client holds as
// the replica does, is not asked (its API server does not answer), and
// the client keeps its rows of it.
func TestTwoClustersHistoryOfTheClusterThatChanged(t *testing.T) {
	var c cluster2
	home := []projection.Change{c.app(0, "hanzo", "iam", "", "v1"), c.app(0, "tenant-acme", "web", "acme", "v1")}
	staging := []projection.Change{c.app(1, "hanzo", "iam", "", "v1"), c.app(1, "tenant-acme", "web", "acme", "v1")}
	a := newReplica(t, slices.Concat(home, staging))
	names := a.store.Config().ClusterNames()
	_, at0 := a.read(t, "all", "", 4)
	p0, _ := projection.ParsePosition(at0, names)
	hist := &homeHistory{at: p0}
	var roots []*projection.Object
	for app := range a.store.Snapshot().Apps() {
		if app.ClusterIndex() == 0 {
			roots = append(roots, app.Tree[0].Obj)
		}
	}
	hist.rows = &stream.PastRows{Rows: a.store.PastRows(roots)}
	change := c.app(0, "hanzo", "iam", "", "v2")
	a.apply(t, change)
	// b holds both clusters and starts after the change: its ring begins after at0.
	b := newReplicaWith(t, slices.Concat(home, staging, []projection.Change{change}), stream.Options{Batch: -1, History: hist}, nil)
	got, at1 := b.read(t, "all", at0, 1)
	if k := eventKeys(t, got); !k["MODIFIED hanzo/iam"] {
		t.Errorf("caught up on b from %s: %v, want in-cluster's change alone", at0, k)
	}
	if at1 != b.store.Snapshot().Position.String() {
		t.Errorf("the last id %s, want b's position %s", at1, b.store.Snapshot().Position)
	}
	if s := b.hub.Stats(); s.Resets != 0 || s.HistoryResumes != 1 {
		t.Errorf("%d resets and %d resumes from history on b, want none and 1", s.Resets, s.HistoryResumes)
	}
}
