package stream_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/stream"
	"github.com/hanzoai/deploy/stream/streamtest"
)

// twoClusters is a configuration of two clusters, in-cluster and staging.
func twoClusters() projection.Config {
	cfg := projection.DefaultConfig()
	cfg.BaseRevision = base
	cfg.ClusterName = "in-cluster"
	cfg.Clusters = []projection.ClusterRef{{Name: "staging", Server: "https://staging.example.com:6443", Namespaces: projection.DefaultNamespaces()}}
	return cfg
}

// replica is one deployd's store and hub over the two clusters, served
// with the clusters' names.
type replica struct {
	store *projection.Store
	hub   *stream.Hub
	srv   *httptest.Server
}

func newReplica(t *testing.T, initial []projection.Change) *replica {
	t.Helper()
	return newReplicaWith(t, initial, stream.Options{Batch: -1}, nil)
}

// newReplicaWith is newReplica with the hub's options, told it synced at
// listed(the fold's position) (nil: the fold's position).
func newReplicaWith(t *testing.T, initial []projection.Change, opts stream.Options, listed func(projection.Position) projection.Position) *replica {
	t.Helper()
	return newReplicaOf(t, projection.NewStore(twoClusters()), initial, opts, listed)
}

// newReplicaOf is newReplicaWith over store.
func newReplicaOf(t *testing.T, store *projection.Store, initial []projection.Change, opts stream.Options, listed func(projection.Position) projection.Position) *replica {
	t.Helper()
	r := &replica{store: store}
	if _, err := r.store.Apply(initial...); err != nil {
		t.Fatal(err)
	}
	r.hub = stream.NewHub(r.store, opts)
	at := r.store.Snapshot().Position
	if listed != nil {
		at = listed(at)
	}
	r.hub.Synced(at)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); r.hub.Run(ctx) }()
	names := r.store.Config().ClusterNames()
	mux := http.NewServeMux()
	mux.HandleFunc("/apps", func(w http.ResponseWriter, req *http.Request) {
		sr, err := stream.ParseRequest(req, names)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		sr.Scope = scopeOf(t, req.Header.Get("X-Identity"))
		serveError(w, r.hub.ServeApplications(w, req, sr))
	})
	r.srv = httptest.NewServer(mux)
	t.Cleanup(func() { cancel(); <-ran; r.srv.Close() })
	return r
}

// apply folds changes and hands the deltas to the hub, then waits until
// they are fanned out.
func (r *replica) apply(t *testing.T, changes ...projection.Change) {
	t.Helper()
	deltas, err := r.store.Apply(changes...)
	if err != nil {
		t.Fatal(err)
	}
	r.hub.Publish(deltas)
	rev := deltas[len(deltas)-1].Revision
	waitFor(t, 5*time.Second, "the change to be fanned out", func() bool { return r.hub.Stats().Revision >= rev })
}

// read opens a stream as identity (resuming from lastID when set) and
// reads n events, returning them with the last id seen.
func (r *replica) read(t *testing.T, identity, lastID string, n int) ([]streamtest.Frame, string) {
	t.Helper()
	return r.readSome(t, identity, lastID, n, true)
}

// readSome is read; more events may follow unless exact.
func (r *replica) readSome(t *testing.T, identity, lastID string, n int, exact bool) ([]streamtest.Frame, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.srv.URL+"/apps", nil)
	req.Header.Set("X-Identity", identity)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := r.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %s", resp.Status)
	}
	rd := streamtest.NewReader(resp.Body)
	var out []streamtest.Frame
	id := lastID
	for len(out) < n {
		f, err := rd.Next()
		if err != nil {
			t.Fatalf("after %d of %d events: %v", len(out), n, err)
		}
		if f.HasID {
			id = f.ID
		}
		if f.HasData {
			out = append(out, f)
		}
	}
	if !exact {
		return out, id
	}
	// Whatever else arrives within a moment is more than was due.
	extra := make(chan streamtest.Frame, 1)
	go func() {
		for {
			f, err := rd.Next()
			if err != nil {
				return
			}
			if f.HasData {
				extra <- f
				return
			}
		}
	}()
	select {
	case f := <-extra:
		t.Errorf("an event beyond the %d due: %s", n, f.Data)
	case <-time.After(300 * time.Millisecond):
	}
	return out, id
}

// cluster2 makes objects of two clusters, each with its own
// resourceVersions (the same numbers on purpose: they are never compared).
type cluster2 struct{ rv [2]int }

func (c *cluster2) app(cluster int, ns, name, org, tag string) projection.Change {
	c.rv[cluster]++
	s := &appState{ns: projection.QualifyNamespace(ns, []string{"", "staging"}[cluster]), name: name, org: org, tag: tag, ready: 1}
	o := s.object()
	o.ResourceVersion = strconv.Itoa(1000 + c.rv[cluster])
	return projection.Change{Op: projection.Upsert, Object: o}
}

// TestTwoClustersStream: one projection over two clusters holds the same
// App names of both, distinct; a tenant sees its own Apps in both and no
// other; a client resumes on another replica, which folded the clusters'
// changes in another order, and receives exactly the changes it had not
// seen: none twice, none lost.
func TestTwoClustersStream(t *testing.T) {
	var c cluster2
	initial := []projection.Change{
		c.app(0, "hanzo", "iam", "", "v1"),
		c.app(1, "hanzo", "iam", "", "v1"),
		c.app(0, "tenant-acme", "web", "acme", "v1"),
		c.app(1, "tenant-acme", "web", "acme", "v1"),
		c.app(1, "tenant-globex", "api", "globex", "v1"),
	}
	a, b := newReplica(t, initial), newReplica(t, initial)

	snap := a.store.Snapshot()
	if got := snap.Position.String(); got != "in-cluster=1002,staging=1003" {
		t.Errorf("position %s, want in-cluster=1002,staging=1003", got)
	}
	if snap.Get("hanzo", "iam") == nil || snap.Get("hanzo.staging", "iam") == nil {
		t.Fatal("hanzo/iam of both clusters is not held")
	}
	d := snap.Get("hanzo.staging", "iam").Destination()
	if d.Name != "staging" || d.Server != "https://staging.example.com:6443" || d.Namespace != "hanzo" {
		t.Errorf("staging's destination: %+v", d)
	}
	if d := snap.Get("hanzo", "iam").Destination(); d.Name != "in-cluster" || d.Server != "https://kubernetes.default.svc" || d.Namespace != "hanzo" {
		t.Errorf("in-cluster's destination: %+v", d)
	}
	keys := func(fs []streamtest.Frame) map[string]bool { return eventKeys(t, fs) }
	all, _ := a.read(t, "all", "", 5)
	if got := keys(all); len(got) != 5 || !got["ADDED hanzo/iam"] || !got["ADDED hanzo.staging/iam"] || !got["ADDED tenant-globex.staging/api"] {
		t.Errorf("the SuperAdmin's burst: %v", got)
	}
	acme, _ := a.read(t, "acme", "", 2)
	if got := keys(acme); !got["ADDED tenant-acme/web"] || !got["ADDED tenant-acme.staging/web"] {
		t.Errorf("acme's burst: %v", got)
	}
	globex, _ := a.read(t, "globex", "", 1)
	if got := keys(globex); !got["ADDED tenant-globex.staging/api"] {
		t.Errorf("globex's burst: %v", got)
	}

	// A client at the burst's position; then staging changes, then
	// in-cluster, on replica a — the other order on replica b.
	_, at0 := a.read(t, "all", "", 5)
	stagingChange, homeChange := c.app(1, "hanzo", "iam", "", "v2"), c.app(0, "hanzo", "iam", "", "v2")
	a.apply(t, stagingChange)
	a.apply(t, homeChange)
	b.apply(t, homeChange)
	b.apply(t, stagingChange)
	if !a.store.Snapshot().Position.Equal(b.store.Snapshot().Position) {
		t.Fatalf("the replicas' positions differ: %s, %s", a.store.Snapshot().Position, b.store.Snapshot().Position)
	}

	// It saw the staging change on a, then moved to b: only in-cluster's
	// change is due.
	first, at1 := a.readSome(t, "all", at0, 1, false)
	if got := keys(first); !got["MODIFIED hanzo.staging/iam"] {
		t.Fatalf("first event on a: %v", got)
	}
	rest, atEnd := b.read(t, "all", at1, 1)
	if got := keys(rest); !got["MODIFIED hanzo/iam"] {
		t.Errorf("resumed on b after staging's change: %v, want in-cluster's alone", got)
	}
	if atEnd != b.store.Snapshot().Position.String() {
		t.Errorf("the last id %s, want b's position %s", atEnd, b.store.Snapshot().Position)
	}
	// Resuming again from there: nothing is due, on either replica.
	b.read(t, "all", atEnd, 0)
	a.read(t, "all", atEnd, 0)
	// From the burst's position on b: both, once each.
	both, _ := b.read(t, "all", at0, 2)
	if got := keys(both); !got["MODIFIED hanzo/iam"] || !got["MODIFIED hanzo.staging/iam"] {
		t.Errorf("resumed on b from the burst: %v", got)
	}
	// A tenant's change in staging reaches the tenant, not another.
	_, acmeAt := b.read(t, "acme", "", 2)
	b.apply(t, c.app(1, "tenant-acme", "web", "acme", "v3"))
	got, _ := b.read(t, "acme", acmeAt, 1)
	if k := keys(got); !k["MODIFIED tenant-acme.staging/web"] {
		t.Errorf("acme after its staging change: %v", k)
	}
	_, globexAt := b.read(t, "globex", "", 1)
	b.read(t, "globex", globexAt, 0)
}
