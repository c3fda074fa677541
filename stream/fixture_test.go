package stream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/stream"
	"github.com/hanzoai/deploy/stream/streamtest"
)

// base is the stores' base revision: ids at or below it are "from before
// this process".
const base = 1_000_000

// The identities the tests watch with.
var identities = []string{"all", "acme", "globex"}

func scopeOf(t testing.TB, id string) auth.Scope {
	t.Helper()
	p := &auth.Principal{Subject: id, Org: id}
	if id == "all" {
		p = &auth.Principal{Subject: "root", Org: "admin", SuperAdmin: true}
	}
	sc, err := auth.ScopeFor(p)
	if err != nil {
		t.Fatalf("scope for %s: %v", id, err)
	}
	return sc
}

// sees is the tests' own statement of the tenancy rule, independent of the
// code under test: a SuperAdmin sees every row; a member of org sees the
// Apps and sites of tenant-<org> labelled with org, and no CD Application.
func sees(id string, a *projection.App) bool {
	if id == "all" {
		return true
	}
	return a.Row != projection.RowCD && a.Namespace == "tenant-"+id && a.Org == id
}

// appState is what the fleet generator knows of one App.
type appState struct {
	ns, name, org, project, tag string
	ready                       int32
	cm                          int // the ConfigMap's resourceVersion: a tree-only change
	present                     bool
}

func (s *appState) uid() string { return s.ns + "-" + s.name }

// clusterRV is the tests' API server: every write gets the next
// resourceVersion, as one cluster's writes do.
var clusterRV atomic.Uint64

func init() { clusterRV.Store(5_000) }

func nextRV() string { return strconv.FormatUint(clusterRV.Add(1), 10) }

func (s *appState) object() *projection.Object {
	var labels projection.Labels
	if s.project != "" {
		labels = append(labels, projection.Label{Key: projection.LabelPartOf, Value: s.project})
	}
	if s.org != "" {
		labels = append(labels, projection.Label{Key: projection.LabelOrg, Value: s.org})
	}
	return &projection.Object{
		Kind: projection.KindApp, Namespace: s.ns, Name: s.name, UID: s.uid(), ResourceVersion: nextRV(),
		Generation: 1, Created: 1_760_000_000, Labels: labels,
		Spec: &projection.AppSpec{Repository: "ghcr.io/hanzoai/" + s.name, Tag: s.tag, Replicas: 1, Role: "service",
			HasStatus: true, Phase: "Running", ReadyReplicas: s.ready, ObservedGeneration: 1},
	}
}

func (s *appState) configMap() *projection.Object {
	return &projection.Object{
		Kind: projection.KindConfigMap, Namespace: s.ns, Name: s.name + "-replicate-config", UID: s.uid() + "-cm",
		ResourceVersion: nextRV(), Created: 1_760_000_000,
		Owners: []projection.OwnerRef{{Kind: "App", Name: s.name, UID: s.uid(), Controller: true}},
	}
}

// fleet generates changes to a set of Apps: version bumps, readiness,
// tree-only changes, org moves (in and out of a tenant's scope), project
// moves, deletions and re-creations.
type fleet struct {
	apps []*appState
	r    *rand.Rand
	n    int
}

func newFleet(seed uint64, perNamespace int) *fleet {
	f := &fleet{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	for _, ns := range []string{"hanzo", "tenant-acme", "tenant-globex", "tenant-initech"} {
		org := ""
		if ns != "hanzo" {
			org = ns[len("tenant-"):]
		}
		for i := range perNamespace {
			f.apps = append(f.apps, &appState{ns: ns, name: fmt.Sprintf("app-%02d", i), org: org, project: "shop", tag: "v1.0.0", ready: 1, present: true})
		}
	}
	return f
}

func (f *fleet) initial() []projection.Change {
	var out []projection.Change
	for _, a := range f.apps {
		out = append(out, projection.Change{Op: projection.Upsert, Object: a.object()}, projection.Change{Op: projection.Upsert, Object: a.configMap()})
	}
	return out
}

var orgs = []string{"acme", "globex", "initech", ""}

// nextAppChange returns a version bump of a random present App: one
// MODIFIED that every scope seeing the App sees.
func (f *fleet) nextAppChange() projection.Change {
	f.n++
	for {
		a := f.apps[f.r.IntN(len(f.apps))]
		if a.present {
			a.tag = fmt.Sprintf("v2.%d.0", f.n)
			return projection.Change{Op: projection.Upsert, Object: a.object()}
		}
	}
}

// next returns one random change.
func (f *fleet) next() projection.Change {
	f.n++
	a := f.apps[f.r.IntN(len(f.apps))]
	if !a.present {
		a.present = true
		return projection.Change{Op: projection.Upsert, Object: a.object()}
	}
	switch k := f.r.IntN(100); {
	case k < 35:
		a.tag = fmt.Sprintf("v1.%d.0", f.n)
	case k < 55:
		a.ready = 1 - a.ready
	case k < 70:
		a.cm++
		return projection.Change{Op: projection.Upsert, Object: a.configMap()}
	case k < 85:
		a.org = orgs[f.r.IntN(len(orgs))]
	case k < 92:
		a.project = []string{"shop", "ops", ""}[f.r.IntN(3)]
	default:
		a.present = false
		return projection.Change{Op: projection.Delete, Object: a.object()}
	}
	return projection.Change{Op: projection.Upsert, Object: a.object()}
}

// env is a store, a running hub and an HTTP server in front of it, with a
// record of every delta published (the oracle's input).
type env struct {
	t     testing.TB
	store *projection.Store
	hub   *stream.Hub
	srv   *httptest.Server
	fleet *fleet

	mu     sync.Mutex
	deltas []projection.Delta
}

func newEnv(t testing.TB, opts stream.Options, f *fleet, configure ...func(*http.Server)) *env {
	t.Helper()
	cfg := projection.DefaultConfig()
	cfg.BaseRevision = base
	e := &env{t: t, store: projection.NewStore(cfg), fleet: f}
	if f != nil {
		if _, err := e.store.Apply(f.initial()...); err != nil {
			t.Fatal(err)
		}
	}
	e.hub = stream.NewHub(e.store, opts)
	// The initial lists are folded: from here the hub's ring holds every
	// change, as a watcher's OnReady tells it.
	e.hub.Synced(e.store.Snapshot().Position)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); e.hub.Run(ctx) }()
	e.srv = httptest.NewUnstartedServer(hubHandler(t, e.hub))
	for _, c := range configure {
		c(e.srv.Config)
	}
	e.srv.Start()
	t.Cleanup(func() {
		cancel()
		<-ran
		e.srv.Close()
	})
	return e
}

// newHubServer serves a hub with hubHandler until the test ends.
func newHubServer(t testing.TB, hub *stream.Hub) *httptest.Server {
	srv := httptest.NewServer(hubHandler(t, hub))
	t.Cleanup(srv.Close)
	return srv
}

// hubHandler stands in for the Echo handlers: the identity comes from a
// header (the tests' stand-in for a validated token).
func hubHandler(t testing.TB, hub *stream.Hub) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/apps", func(w http.ResponseWriter, r *http.Request) {
		req, err := stream.ParseRequest(r, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req.Scope = scopeOf(t, r.Header.Get("X-Identity"))
		if x := r.Header.Get("X-Expiry"); x != "" {
			req.Expiry, _ = time.Parse(time.RFC3339Nano, x)
		}
		serveError(w, hub.ServeApplications(w, r, req))
	})
	mux.HandleFunc("/tree", func(w http.ResponseWriter, r *http.Request) {
		req := stream.TreeRequest{
			Scope: scopeOf(t, r.Header.Get("X-Identity")),
			Key:   projection.AppKey{Namespace: r.URL.Query().Get("namespace"), Name: r.URL.Query().Get("name")},
		}
		if x := r.Header.Get("X-Expiry"); x != "" {
			req.Expiry, _ = time.Parse(time.RFC3339Nano, x)
		}
		serveError(w, hub.ServeTree(w, r, req))
	})
	return mux
}

func serveError(w http.ResponseWriter, err error) {
	switch {
	case err == nil:
	case errors.Is(err, stream.ErrNotFound):
		http.Error(w, "not found", http.StatusNotFound)
	case errors.Is(err, stream.ErrExpired):
		http.Error(w, "expired", http.StatusUnauthorized)
	case errors.Is(err, stream.ErrHubStopped):
		http.Error(w, "stopping", http.StatusServiceUnavailable)
	default:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// apply is the single writer: Apply, then Publish.
func (e *env) apply(changes ...projection.Change) []projection.Delta {
	e.t.Helper()
	deltas, err := e.store.Apply(changes...)
	if err != nil {
		e.t.Errorf("apply: %v", err)
	}
	e.mu.Lock()
	e.deltas = append(e.deltas, deltas...)
	e.mu.Unlock()
	e.hub.Publish(deltas)
	return deltas
}

// write applies random changes at about rate per second for d, in its own
// goroutine; the channel closes when it is done.
func (e *env) write(rate int, d time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		end := time.Now().Add(d)
		for time.Now().Before(end) {
			<-tick.C
			e.apply(e.fleet.next())
		}
	}()
	return done
}

func (e *env) published() []projection.Delta {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.deltas)
}

// list is GET applications for an identity: the visible rows of the
// current snapshot and its revision.
func (e *env) list(id string) (map[projection.AppKey]string, uint64) {
	snap := e.store.Snapshot()
	return visibleState(snap, id), snap.Position.First()
}

func visibleState(snap *projection.Snapshot, id string) map[projection.AppKey]string {
	out := map[projection.AppKey]string{}
	for a := range snap.Apps() {
		if sees(id, a) {
			out[a.Key()] = string(a.ApplicationJSON())
		}
	}
	for _, a := range snap.CDApplications() {
		if sees(id, a) {
			out[a.Key()] = string(a.ApplicationJSON())
		}
	}
	return out
}

// event is one applications event as a client applies it.
type event struct {
	Rev  uint64
	Type string
	Key  projection.AppKey
	App  string
}

func (ev event) String() string { return fmt.Sprintf("%d %s %s", ev.Rev, ev.Type, ev.Key) }

// expected is the oracle: the events an identity must receive after
// position after, derived from the deltas with the tests' own rule. The
// last event of a position carries it as its id; the others carry none.
func expected(deltas []projection.Delta, id string, after uint64) []event {
	var out []event
	for _, d := range deltas {
		if d.Position.First() <= after {
			continue
		}
		oldSeen := d.Old != nil && sees(id, d.Old)
		newSeen := d.New != nil && sees(id, d.New)
		var ev event
		switch {
		case oldSeen && newSeen && d.AppChanged:
			ev = event{d.Position.First(), "MODIFIED", d.Key, string(d.New.ApplicationJSON())}
		case newSeen && !oldSeen:
			ev = event{d.Position.First(), "ADDED", d.Key, string(d.New.ApplicationJSON())}
		case oldSeen && !newSeen:
			ev = event{d.Position.First(), "DELETED", d.Key, string(d.Old.ApplicationJSON())}
		default:
			continue
		}
		if n := len(out); n > 0 && out[n-1].Rev == ev.Rev {
			out[n-1].Rev = 0
		}
		out = append(out, ev)
	}
	return out
}

// wireEvent is the data of an applications event.
type wireEvent struct {
	Result struct {
		Type        string          `json:"type"`
		Application json.RawMessage `json:"application"`
	} `json:"result"`
}

type wireMeta struct {
	Metadata struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
}

// client is a watcher's state: the applications it holds and every event
// it applied. apply checks each frame: well formed, and for a tenant, of
// its own tenant only.
type client struct {
	id     string
	apps   map[projection.AppKey]string
	events []event
	lastID string
	resets int
	// lenient: the client holds no list, so ADDED/MODIFIED/DELETED are
	// not checked against what it holds.
	lenient bool
}

func newClient(id string, apps map[projection.AppKey]string) *client {
	if apps == nil {
		apps = map[projection.AppKey]string{}
	}
	return &client{id: id, apps: apps}
}

// apply takes one frame: its id (when it has one), its event name and its
// data.
func (c *client) apply(id string, hasID bool, name, data string) error {
	if hasID {
		c.lastID = id
	}
	if name == "reset" {
		c.resets++
		clear(c.apps)
		return nil
	}
	if data == "" {
		return nil
	}
	var we wireEvent
	if err := json.Unmarshal([]byte(data), &we); err != nil {
		return fmt.Errorf("frame data %q: %w", data, err)
	}
	var m wireMeta
	if err := json.Unmarshal(we.Result.Application, &m); err != nil {
		return fmt.Errorf("application of %q: %w", data, err)
	}
	if c.id != "all" {
		if m.Metadata.Namespace != "tenant-"+c.id || m.Metadata.Labels[projection.LabelOrg] != c.id {
			return fmt.Errorf("identity %s received an application of another tenant: %s/%s labels %v", c.id, m.Metadata.Namespace, m.Metadata.Name, m.Metadata.Labels)
		}
	}
	k := projection.AppKey{Namespace: m.Metadata.Namespace, Name: m.Metadata.Name}
	var rev uint64
	if hasID {
		rev, _ = strconv.ParseUint(id, 10, 64)
	}
	ev := event{Rev: rev, Type: we.Result.Type, Key: k, App: string(we.Result.Application)}
	_, held := c.apps[k]
	held = held || c.lenient
	switch ev.Type {
	case "ADDED":
		if held && !c.lenient {
			return fmt.Errorf("%s: ADDED for an application held already", ev)
		}
		c.apps[k] = ev.App
	case "MODIFIED":
		if !held {
			return fmt.Errorf("%s: MODIFIED for an application not held", ev)
		}
		c.apps[k] = ev.App
	case "DELETED":
		if !held {
			return fmt.Errorf("%s: DELETED for an application not held", ev)
		}
		delete(c.apps, k)
	default:
		return fmt.Errorf("frame with event type %q", ev.Type)
	}
	c.events = append(c.events, ev)
	return nil
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// dial opens a stream with a hand-written reader.
func (e *env) dial(ctx context.Context, path, identity string, header http.Header) (*http.Response, *streamtest.Reader, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+path, nil)
	if err != nil {
		return nil, nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("X-Identity", identity)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		return nil, nil, err
	}
	return resp, streamtest.NewReader(resp.Body), nil
}

func frameApply(c *client, f streamtest.Frame) error {
	return c.apply(f.ID, f.HasID, f.Event, f.Data)
}
