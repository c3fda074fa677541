package load

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/hanzoai/deploy/cluster/clustertest"
)

// Streams across replicas of two clusters: several deployd processes,
// each reading the same two API servers (each its own etcd), behind one
// Service, must be one stream to a client, as with one cluster
// (streams_replicas_test.go). An id is one resourceVersion per cluster
// ("home=<rv>,staging=<rv>"); the counts are the same, judged part by
// part: an event by its own cluster's part of its position, an id going
// back when any part does, and a view at position P compared with each
// cluster's LIST at its part of P (the second cluster's namespaces
// qualified, <namespace>.staging).

// clusterNames are the clusters' names: DEPLOY_CLUSTER_NAME, then the
// clusters file's.
var clusterNames = []string{"home", "staging"}

// TestStreamsTwoClustersReplicas: two API servers holding the same fleet
// (the same App names in both, Apps of the tenants acme, globex and
// initech), three replicas reading both behind a Service, clients (half
// SuperAdmins, half members of acme) reconnecting through it.
//
//   - one cluster changes, the other does not: home's Apps change while
//     staging is idle; every connection is cut, then a replica is killed
//     (kill -9) and started again. The clients resume on other replicas.
//   - one cluster goes away: staging's API server stops while home keeps
//     changing; home's changes reach the clients within 1 s (each client's
//     latency of every change is checked). A replica killed and started
//     while staging is down is ready without it (staging is reported, not
//     waited for) and resumes the clients it is sent. Staging's API server
//     comes back and its Apps change at once, before the replicas' watches
//     of it are back, and then with home's, so the replicas fold the two
//     clusters' changes interleaved in different orders; every connection
//     is cut again.
//
// Promise: no reset, no id back, no duplicate, no stale event, no gap (a
// view sampled at its position equals both clusters' LISTs there), and at
// the end, with the changes stopped, every view equals both API servers'
// current LISTs in its scope. DEPLOYD_STREAMS_CLUSTERS_APPS (Apps per
// cluster, default 200) and DEPLOYD_STREAMS_CLUSTERS_CLIENTS (default 40)
// size it.
//
// A replica that first reads the returning cluster after it is ready folds
// its initial lists at once (its rows go out complete, at one position),
// and the rows' condition of the cluster not answering, each replica's
// own observation, is marked in the ids ("staging=<rv>~<since>"): a
// condition the client holds is not sent again, one it lacks is.
func TestStreamsTwoClustersReplicas(t *testing.T) {
	const rate = 20 // changes a second in each cluster that changes
	apps := clustertest.EnvInt(t, "DEPLOYD_STREAMS_CLUSTERS_APPS", 200)
	n := clustertest.EnvInt(t, "DEPLOYD_STREAMS_CLUSTERS_CLIENTS", 40)
	raiseOpenFiles(t)
	began := time.Now()
	cls := fleetClusters(t, 2, apps)
	home, staging := cls[0], cls[1]
	e := newClustersEnv(t, clusterNames, home, staging)
	ds := []*deployd{e.replica(), e.replica(), e.replica()}
	px := newRRProxy(t, ds...)
	px.WaitReady(t, 10*time.Second)
	cs, stopClients := e.startScopedClients(px.Base, n, func(i int) string {
		if i%2 == 0 {
			return ""
		}
		return "acme"
	})
	defer stopClients()
	all := esClients(cs)
	if !waitAll(t, all, time.Minute, "synced", func(_ int, c *esClient) bool { return c.synced() }) {
		return
	}
	for _, c := range cs {
		if p := c.position(); p[0] == 0 || p[1] == 0 {
			t.Fatalf("a client (org %q) holds position %s: want a part of each cluster", c.org, p.format(e.apps.clusters))
		}
	}
	t.Logf("%d clients synced through the proxy (two clusters of %d Apps each, %d indexed) %s after the start; a client's id: %s",
		n, apps, len(e.apps.keys), time.Since(began).Round(time.Millisecond), cs[0].position().format(e.apps.clusters))
	gaps := e.sampleGaps(cs, time.Second)

	// streaming waits until every client streams again after act.
	streaming := func(what string) {
		t.Helper()
		waitAll(t, all, time.Minute, "streaming again after "+what, func(_ int, c *esClient) bool { return c.synced() })
	}
	// settle stops the changes, waits until the API servers hold still
	// and every view equals their LISTs, and logs the phase's counts.
	settle := func(name string, before streamCounts, at time.Time, stop ...func()) {
		t.Helper()
		for _, f := range stop {
			f()
		}
		// A watch of a cluster that came back may wait out client-go's
		// backoff (up to 30 s) before it lists again.
		now := e.settled(30 * time.Second)
		took, ok := e.converge(cs, now, 90*time.Second)
		after := countStreams(cs)
		t.Logf("%s: %s; converged %s after the changes stopped (%v); since the phase began: %d connections (%d resumed), %d resets, %d ids back, %d duplicates, %d stale, %d condition changes alone; connections per replica so far %v",
			name, time.Since(at).Round(time.Millisecond), took.Round(time.Millisecond), ok, after.conns-before.conns, after.resumed-before.resumed,
			after.resets-before.resets, after.idBack-before.idBack, after.dups-before.dups, after.stale-before.stale, after.conditions-before.conditions, px.Spread())
	}

	// Phase 1: home changes, staging is idle.
	stagingAt := staging1(cs)
	before, at := countStreams(cs), time.Now()
	stopHome := e.runChangerOf(0, rate)
	loadFor(t.Context(), 2*time.Second)
	t.Logf("phase 1: cut %d connections", px.Cut())
	streaming("the cut")
	loadFor(t.Context(), time.Second)
	ds[0].kill()
	restart := time.Now()
	ds[0].start()
	t.Logf("phase 1: replica 1 killed (kill -9), ready %s after its start", time.Since(restart).Round(time.Millisecond))
	streaming("the kill")
	loadFor(t.Context(), 2*time.Second)
	settle("phase 1 (home changes, staging idle; a cut and a kill -9)", before, at, stopHome)
	if got := staging1(cs); !slices.Equal(got, stagingAt) {
		t.Errorf("staging's part of the clients' positions moved while staging was idle: %v, then %v", stagingAt, got)
	}

	// Phase 2: staging goes away and comes back.
	before, at = countStreams(cs), time.Now()
	stopHome = e.runChangerOf(0, rate)
	loadFor(t.Context(), time.Second)
	e.down[1].Store(true)
	staging.StopAPIServer(t)
	stoppedAt := time.Now()
	lat := &clientLatencies{}
	lat.measure(cs, 3*time.Second)
	ds[1].kill()
	restart = time.Now()
	ds[1].start()
	readyIn := time.Since(restart)
	t.Logf("phase 2: staging's API server stopped; replica 2 killed %s later and ready %s after its start",
		restart.Sub(stoppedAt).Round(time.Millisecond), readyIn.Round(time.Millisecond))
	if readyIn > 30*time.Second {
		t.Errorf("replica 2, started while staging is down, was ready %s after its start; want staging reported, not waited for (within 30 s)", readyIn.Round(time.Millisecond))
	}
	t.Logf("phase 2: cut %d connections while staging is down", px.Cut())
	streaming("the cut while staging is down")
	lat.measure(cs, 3*time.Second)
	staging.StartAPIServer(t)
	// At once, before the replicas' watches of staging are back: Apps of
	// the fleet's end, which the changer below does not reach in the
	// seconds it runs, so the end's LISTs hold these very changes.
	back := time.Now()
	for i := range 20 {
		e.chs[1].changeNow(t, e.chs[1].apps[len(e.chs[1].apps)-1-3*i], 10*time.Second)
	}
	e.down[1].Store(false)
	t.Logf("phase 2: staging's API server started %s after it stopped; %d of its Apps changed in the %s after (%d attempts refused)",
		back.Sub(stoppedAt).Round(time.Millisecond), e.chs[1].Sent.Load(), time.Since(back).Round(time.Millisecond), e.chs[1].Failed.Load())
	stopStaging := e.runChangerOf(1, rate/2)
	loadFor(t.Context(), 2*time.Second)
	t.Logf("phase 2: cut %d connections while both clusters change", px.Cut())
	streaming("the cut while both clusters change")
	loadFor(t.Context(), 2*time.Second)
	settle("phase 2 (staging stopped and started; a kill -9 and cuts meanwhile)", before, at, stopHome, stopStaging)
	gaps.stop()

	s := countStreams(cs)
	t.Logf("totals: %s; %d changes to home, %d to staging", s, e.chs[0].Sent.Load(), e.chs[1].Sent.Load())
	t.Logf("gap samples: %d views checked at their position, %d differ, %d positions not listable, %d rounds skipped while staging was down; proxy: %d connections per replica, %d dials refused, %d connections without a backend",
		gaps.checked.Load(), gaps.bad.Load(), gaps.unlistable.Load(), gaps.skipped.Load(), px.Spread(), px.Refused(), px.Unserved())
	for _, note := range gaps.notes {
		t.Log("gap sample: " + note)
	}
	t.Logf("with staging down, home's changes reached the clients in: %s", lat)
	t.Logf("the whole test took %s", time.Since(began).Round(time.Millisecond))
	if s.resets != 0 {
		t.Errorf("%d resets across the clients, want 0", s.resets)
	}
	if s.idBack != 0 || s.regress != 0 || s.badIDs != 0 {
		t.Errorf("ids went back: %d below the client's position, %d within a stream, %d no position of the two clusters; want 0", s.idBack, s.regress, s.badIDs)
	}
	if s.dups != 0 || s.stale != 0 {
		t.Errorf("%d duplicates and %d stale events, want 0", s.dups, s.stale)
	}
	if gaps.bad.Load() != 0 || gaps.unlistable.Load() != 0 {
		t.Errorf("gaps: %d views differ from the clusters at their position, %d positions are no listable revision; want 0", gaps.bad.Load(), gaps.unlistable.Load())
	}
	if gaps.checked.Load() == 0 {
		t.Error("no view was sampled at its position")
	}
	if s.sentNo0 != 0 {
		t.Errorf("%d reconnections sent no Last-Event-ID", s.sentNo0)
	}
	if s.resumed < 2*n {
		t.Errorf("%d connections resumed with Last-Event-ID, want at least %d (two cuts of %d clients)", s.resumed, 2*n, n)
	}
	if lat.n == 0 {
		t.Error("no change of home reached a client while staging was down")
	}
	if lat.max > time.Second {
		t.Errorf("with staging down, a change of home reached a client %s after it was made; want within 1 s (%s)", lat.max.Round(time.Millisecond), lat)
	}
	for _, note := range s.notes {
		t.Log("fault: " + note)
	}
	for i, d := range ds {
		if d.panics() {
			t.Errorf("replica %d's log shows a panic:\n%s", i+1, tail(d.log.String(), 30))
		} else if t.Failed() {
			t.Logf("replica %d's log ends:\n%s", i+1, tail(d.log.String(), 30))
		}
	}
}

// fleetClusters starts n API servers, each holding the fleet of apps
// Apps with one pod each, from a copy of one cached etcd snapshot
// (clustertest.FleetSnapshot; the first run loads and caches it): two
// etcds holding the same objects, resourceVersions and UIDs included, as
// a cluster restored from another's etcd does: no position compares the
// resourceVersions, and the fold tells the UIDs apart by namespace.
func fleetClusters(t *testing.T, n, apps int) []*clustertest.Cluster {
	t.Helper()
	cs := make([]*clustertest.Cluster, n)
	for i := range cs {
		cs[i] = clustertest.Start(t, clustertest.FleetSnapshot(apps, 1))
	}
	return cs
}

// changeNow changes app, trying again (every 50 ms, for up to within)
// while the API server refuses: it may serve its resources a moment after
// it answers ready.
func (ch *changer) changeNow(t *testing.T, app types.NamespacedName, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; {
		sent := ch.Sent.Load()
		if ch.change(t.Context(), app); ch.Sent.Load() > sent {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s could not be changed within %s", app, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// position is the client's position.
func (c *esClient) position() esPos {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastID
}

// staging1 is each client's part of the second cluster.
func staging1(cs []scopedClient) []uint64 {
	out := make([]uint64, len(cs))
	for i, c := range cs {
		out[i] = c.position()[1]
	}
	return out
}

// clientLatencies gathers the latencies of stamped changes the clients saw.
type clientLatencies struct {
	all []time.Duration
	n   int
	max time.Duration
}

// measure records, for d, the latency of every change sent in that time
// that reaches a client (from the moment it was sent to the API server).
func (l *clientLatencies) measure(cs []scopedClient, d time.Duration) {
	from := time.Now().UnixNano()
	for _, c := range cs {
		c.takeLatencies()
		c.measureFrom.Store(from)
		c.measure.Store(true)
	}
	time.Sleep(d)
	for _, c := range cs {
		c.measure.Store(false)
		for _, v := range c.takeLatencies() {
			l.all = append(l.all, v)
			l.n++
			l.max = max(l.max, v)
		}
	}
}

func (l *clientLatencies) String() string {
	if l.n == 0 {
		return "no change"
	}
	return fmt.Sprintf("%d changes seen by clients: p50 %s, p99 %s, max %s", l.n, percentile(l.all, 0.5).Round(time.Microsecond),
		percentile(l.all, 0.99).Round(time.Microsecond), l.max.Round(time.Microsecond))
}

// TestESTrackClusters pins the counts of two clusters' positions on a
// scripted stream: an event is judged by its own cluster's part of its
// id, so a resume that dropped staging's part of the id (the server
// replaying staging's Apps the client already holds, at staging's part it
// already had) counts duplicates although home's part moved on; an id
// whose staging part goes back counts an id back; a change of
// status.conditions alone is counted apart; the second cluster's Apps are
// qualified.
func TestESTrackClusters(t *testing.T) {
	app := func(typ, ns, rv, tag, extra string) string {
		return fmt.Sprintf(`data: {"result":{"type":%q,"application":{"metadata":{"name":"a","namespace":%q,"resourceVersion":%q},"status":{"sync":{"status":"Synced","revision":%q}%s}}}}`+"\n",
			typ, ns, rv, tag, extra)
	}
	cond := `,"conditions":[{"type":"ComparisonError","message":"cluster staging has not answered since 2026-01-01T00:00:00Z"}]`
	script := []struct{ want, frames string }{
		{"", "retry: 1\n\n" + app("ADDED", "n", "5", "t1", "") + "\n" + app("ADDED", "n.staging", "7", "s1", "") + "\nid: home=5,staging=7\n\n" +
			app("MODIFIED", "n", "9", "t2", "") + "\nid: home=9,staging=7\n\n" +
			// staging stops answering and answers again: its App carries a
			// condition, then none, at no new position.
			app("MODIFIED", "n.staging", "7", "s1", cond) + "\nid: home=9,staging=7\n\n" +
			app("MODIFIED", "n.staging", "7", "s1", "") + "\nid: home=9,staging=7\n\n"},
		// The resume dropped staging's part: staging's App again at staging=7, home's new change.
		{"home=9,staging=7", app("MODIFIED", "n", "11", "t3", "") + "\n" + app("ADDED", "n.staging", "7", "s1", "") + "\nid: home=11,staging=7\n\n" +
			// An id going back in staging's part alone.
			": heartbeat\nid: home=11,staging=6\n\n" + app("MODIFIED", "n", "12", "t4", "") + "\nid: home=12,staging=7\n\n"},
	}
	var conn atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(conn.Add(1)) - 1
		if i >= len(script) {
			<-r.Context().Done()
			return
		}
		if got := r.Header.Get("Last-Event-ID"); got != script[i].want {
			t.Errorf("connection %d: Last-Event-ID %q, want %q", i+1, got, script[i].want)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, script[i].frames)
	}))
	defer srv.Close()
	apps := newClustersAppIndex(clusterNames, []string{"n/a", "n.staging/a"})
	c := newTrackedClient(srv.URL+streamsPath, "token", http.DefaultClient, apps)
	ctx, cancel := context.WithCancel(t.Context())
	c.start(ctx)
	wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer wcancel()
	want := esPos{12, 7}
	waitFor(wctx, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.lastID == want && conn.Load() > 2 })
	cancel()
	<-c.done
	s := countStreams([]scopedClient{{esClient: c}})
	if s.dups != 1 || s.stale != 0 || s.conditions != 2 || s.idBack != 1 || s.regress != 1 || s.resets != 0 || s.badIDs != 0 || c.lastID != want || c.lastText != "home=12,staging=7" {
		t.Errorf("counts: %s; last id %v (%q)", s, c.lastID, c.lastText)
	}
	if got := (esPos{12, 7}).format(clusterNames); got != "home=12,staging=7" {
		t.Errorf("format: %q", got)
	}
	for _, bad := range []string{"home=1,prod=2", "home=x", "home"} {
		if _, ok := parseESPos([]byte(bad), clusterNames); ok {
			t.Errorf("%q parsed as a position of %v", bad, clusterNames)
		}
	}
}
