package stream_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/stream"
	"github.com/hanzoai/deploy/stream/streamtest"
)

// manyClusters is a configuration of n clusters, the first's first, so
// many that a written position is longer than projection.CompactOver.
func manyClusters(n int) projection.Config {
	cfg := projection.DefaultConfig()
	cfg.BaseRevision = base
	cfg.ClusterName = "cluster-000"
	for i := 1; i < n; i++ {
		name := fmt.Sprintf("cluster-%03d", i)
		cfg.Clusters = append(cfg.Clusters, projection.ClusterRef{Name: name, Server: "https://" + name + ".example.com:6443", Namespaces: projection.DefaultNamespaces()})
	}
	return cfg
}

// appIn is an App of cluster i (of names) at resourceVersion rv.
func appIn(names []string, i int, ns, name string, rv int) projection.Change {
	cluster := names[i]
	if i == 0 {
		cluster = ""
	}
	s := &appState{ns: projection.QualifyNamespace(ns, cluster), name: name, org: "acme", tag: "v" + strconv.Itoa(rv), ready: 1}
	o := s.object()
	o.ResourceVersion = strconv.Itoa(rv)
	return projection.Change{Op: projection.Upsert, Object: o}
}

// TestCompactIDsOfManyClusters: over 60 clusters a stream's ids are
// compact ("@" and a digest), not 60 parts. A client resumes from one
// exactly on the replica that gave it, and on another replica that asks
// its peers (here the first replica's Book, as the peer route answers),
// which folded the same changes. A replica that can map the id back to
// no position resets the client; it never guesses.
func TestCompactIDsOfManyClusters(t *testing.T) {
	cfg := manyClusters(60)
	names := cfg.ClusterNames()
	var initial []projection.Change
	for i := range 10 {
		initial = append(initial, appIn(names, i*6, "tenant-acme", "api", 100+i))
	}
	mk := func(lookup func(ctx context.Context, id string) (string, error)) *replica {
		store := projection.NewStore(cfg)
		book := store.Positions()
		book.Lookup = lookup
		return newReplicaOf(t, store, initial, stream.Options{Batch: -1, Positions: book}, nil)
	}
	first := mk(nil)
	second := mk(func(_ context.Context, id string) (string, error) { return first.store.Positions().Written(id), nil })
	lone := mk(nil)

	frames, id := first.read(t, "all", "", 10)
	if !projection.IsID(id) || len(id) != 23 {
		t.Fatalf("the burst's id over %d clusters is %q (%d bytes): want a compact id, @ and 22 characters", len(names), short([]byte(id), 80), len(id))
	}
	if full := first.store.Snapshot().Position.String(); len(full) <= projection.CompactOver {
		t.Fatalf("the written position is %d bytes: the test needs one longer than %d", len(full), projection.CompactOver)
	}
	if len(frames) != 10 {
		t.Fatalf("burst of %d events, want 10", len(frames))
	}

	change := func(i, rv int) {
		c := appIn(names, i, "tenant-acme", "api", rv)
		first.apply(t, c)
		second.apply(t, c)
		lone.apply(t, c)
	}
	// The same replica maps its id back.
	change(12, 200)
	frames, id = first.read(t, "all", id, 1)
	if !strings.Contains(frames[0].Data, "v200") || frames[0].Event == "reset" {
		t.Fatalf("resumed on the replica that gave the id: %s %s, want the change to v200", frames[0].Event, short([]byte(frames[0].Data), 120))
	}
	if !projection.IsID(id) {
		t.Fatalf("the change's id %q is not compact", short([]byte(id), 80))
	}
	// Another replica asks its peers for it, and replays exactly what
	// followed: one change, not the one before it, no reset.
	change(30, 300)
	frames, id = second.read(t, "all", id, 1)
	if frames[0].Event == "reset" || !strings.Contains(frames[0].Data, "v300") {
		t.Fatalf("resumed on another replica: %s %s, want the change to v300 alone", frames[0].Event, short([]byte(frames[0].Data), 120))
	}
	if p, ok := second.store.Positions().Held(id); !ok || !p.Equal(second.store.Snapshot().Position) {
		t.Errorf("the second replica's id %q does not map back to its position", id)
	}
	// A replica no peer tells is honest: the client is reset.
	change(42, 400)
	frames, _ = lone.read(t, "all", id, 11)
	if frames[0].Event != "reset" {
		t.Fatalf("resumed from an id no replica holds: first %s %s, want event: reset", frames[0].Event, short([]byte(frames[0].Data), 120))
	}
	// A malformed compact id is the client's mistake: a 400 that says so.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, first.srv.URL+"/apps", nil)
	req.Header.Set("X-Identity", "all")
	req.Header.Set("Last-Event-ID", "@short")
	resp, err := first.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "compact id") {
		t.Errorf("Last-Event-ID @short: %s %q, want 400 naming the compact id", resp.Status, body)
	}
}

// short is b cut to n bytes, for a message.
func short(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// TestDrainHandsOutTheWholePosition: a drain's last frame carries the
// stream's id written whole, so a client of a replica that shuts down
// resumes on one that holds none of its compact ids.
func TestDrainHandsOutTheWholePosition(t *testing.T) {
	cfg := manyClusters(60)
	names := cfg.ClusterNames()
	initial := []projection.Change{appIn(names, 3, "tenant-acme", "api", 100)}
	store := projection.NewStore(cfg)
	r := newReplicaOf(t, store, initial, stream.Options{Batch: -1, Positions: store.Positions()}, nil)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, r.srv.URL+"/apps", nil)
	req.Header.Set("X-Identity", "all")
	resp, err := r.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := streamtest.NewReader(resp.Body)
	var ids []string
	for len(ids) == 0 {
		f, err := rd.Next()
		if err != nil {
			t.Fatal(err)
		}
		if f.HasID {
			ids = append(ids, f.ID)
		}
	}
	if !projection.IsID(ids[0]) {
		t.Fatalf("the burst's id %.40q is not compact", ids[0])
	}
	go r.hub.Drain(context.Background(), 10*time.Millisecond)
	for {
		f, err := rd.Next()
		if err != nil {
			break // the drain ended the stream
		}
		if f.HasID {
			ids = append(ids, f.ID)
		}
	}
	last := ids[len(ids)-1]
	p, err := projection.ParsePosition(last, names)
	if projection.IsID(last) || err != nil || !p.Equal(store.Snapshot().Position) {
		t.Fatalf("the drain's last id is %.60q (%v): want the position written whole, %.60q", last, err, store.Snapshot().Position.String())
	}
}
