package load

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hanzoai/deploy/auth/authtest"
	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/projection"
)

// Streams across replicas: several deployd processes, each with its own
// watch of one API server, behind one Service must be one stream to a
// client. An event's id and a list's metadata.resourceVersion are the
// cluster's own position (the newest resourceVersion the replica has
// folded), so any replica resumes any other's id: after a rolling upgrade,
// a kill -9, or onto a replica started after the client's position (from
// the API server's history while etcd still holds it; reset and a full
// burst once it does not). A list or a detail naming a newer revision than
// a replica has folded waits rather than answering older data, and two
// replicas at one position answer the same bytes.
//
// What the stream tests count, per client (esTrack, fed by esClient):
//
//   - reset: an "event: reset" (the client's position was not resumed).
//   - id back: an id (on any frame: data, id-only or heartbeat) below the
//     client's position at that moment, on any connection. A client's ids
//     never decrease across reconnects, whichever replica serves it.
//   - duplicate: a data event whose position is at or below the position
//     the client held when it arrived (its batch was already covered by an
//     id the client had been given) and that carries the version the
//     client already holds (the same Application JSON from metadata on:
//     the same metadata.resourceVersion and the same content; for DELETED,
//     an App the client no longer holds). An event's position is its
//     frame's id, or, for the data frames of a fold batch, the id of the
//     id-only frame that follows them. The same version sent again after
//     the position (a batch whose id frame a cut connection never
//     delivered, replayed on resume) is no duplicate: it is counted as
//     resent.
//   - stale: like a duplicate, at or below the client's position, but a
//     version other than the one it holds: a change the position says it
//     had, delivered late or out of order.
//   - gap: the client's view, sampled at a moment it holds a position P
//     with every event before it confirmed (no data frame awaiting its id,
//     no version applied past P by a connection that was cut), differs
//     from the API server's LIST of Apps at resourceVersion P
//     (resourceVersionMatch=Exact) filtered by the client's scope. P is a
//     cluster position, so the view at P is exactly the cluster at P: an
//     App missing, extra or at another tag is a change skipped (or one
//     from the future). At the end, with the changes stopped, every view
//     must equal the API server's current LIST in its scope (what
//     converge compares: each App's spec.image.tag, and no row of no
//     kind).
//
// With several clusters (streams_clusters_test.go) a position is one
// resourceVersion per cluster (esPos) and the counts are judged part by
// part: an event by its own cluster's part of its position, an id going
// back when any part does, and a view at P compared with each cluster's
// LIST at its part of P (another cluster's namespaces qualified
// <namespace>.<cluster>, a tenant seeing its namespace in each). A change
// of status.conditions alone (a cluster that does not answer, which each
// replica tells at no new position of it) is counted apart.

// streamsPath is the applications stream the clients read.
const streamsPath = "/v1/deploy/stream/applications"

// drainEnv makes a SIGTERM quick: fail readiness, serve 1 s more, end the
// streams over 3 s, exit.
var drainEnv = []string{"DEPLOYD_DRAIN_DELAY=1s", "DEPLOYD_DRAIN_SPREAD=3s"}

// Tenant members of the fleet's orgs besides acmeMember (harness_test.go).
var (
	globexMember  = authtest.User{Subject: "u-gina", Extra: map[string]any{"preferred_username": "gina", "owner": "globex"}}
	initechMember = authtest.User{Subject: "u-peter", Extra: map[string]any{"preferred_username": "peter", "owner": "initech"}}
)

// esPending is a data event applied but whose position has not come yet.
type esPending struct {
	identical, deleted bool
	// condition: the version held but for its status.conditions, with a
	// condition on either (see esTrack.held).
	condition bool
	cluster   uint8  // the App's cluster (appIndex.cluster)
	ix        int32  // the App
	rv        uint64 // the App's metadata.resourceVersion; 0 when none or not a number
}

// esTrack judges a client's events against its position (see the counts
// above). It is the esClient's, guarded by the client's mu.
//
// Positions are per cluster (esPos): an event is judged by its own
// cluster's part, and an id goes back when any part does. With one cluster
// that is the single number it was.
type esTrack struct {
	// held is by appIndex: a hash of the App version held (its JSON from
	// metadata on, status.conditions left out; bit 0 set), 0 none; conds
	// a hash of that version's status.conditions (0 none). A condition
	// (ComparisonError: the App's cluster has not answered since…) is each
	// replica's own, told when it finds the cluster gone and again when it
	// answers, at no new position of the cluster (two replicas that find
	// it gone in the same second tell the same bytes): the version held
	// again but for its conditions, with a condition on either, is counted
	// apart, neither duplicate nor stale.
	held     []uint64
	conds    []uint32
	lastType []byte  // by appIndex: 'A', 'M' or 'D', the type of the last event for it on this connection
	cluster  []uint8 // by appIndex: the App's cluster (appIndex.cluster)
	pending  []esPending
	// base is the position events are judged against: the newest of the
	// client's ids in each part, or zero after a reset or a start without
	// one. batchFrom is base before the id raisedBy last raised it on this
	// connection, so the frames of one batch that each carry its id are
	// judged as one.
	base, batchFrom, raisedBy esPos
	raisedOnConn              bool
	// The view is not the clusters at the position: void after a reset
	// until the burst's id; taintTo while it may hold versions a cut
	// connection applied past the position (per cluster, cleared by an id
	// at or past their resourceVersions); tainted for an unconfirmed
	// deletion or a version without a resourceVersion (cleared by a reset
	// or a burst).
	void, tainted bool
	taintTo       esPos

	// notes describe the first few faults, for a failure's message.
	notes []string
	keys  []string // appIndex.keys

	dups, stale, resent, idBack, absentDeletes, conditions, events int
	positioned                                                     bool // an id has come since the client started
	forgot                                                         int  // connections after one that sent no Last-Event-ID
}

var appSeed = maphash.MakeSeed()

func newESTrack(apps *appIndex) *esTrack {
	n := len(apps.keys)
	return &esTrack{held: make([]uint64, n), conds: make([]uint32, n), lastType: make([]byte, n), cluster: apps.cluster, keys: apps.keys}
}

// note keeps a fault's description, the first three.
func (t *esTrack) note(format string, args ...any) {
	if len(t.notes) < 3 {
		t.notes = append(t.notes, fmt.Sprintf(format, args...))
	}
}

var (
	fieldRV         = []byte(`"resourceVersion":"`)
	fieldConditions = []byte(`,"conditions":[`)
)

// versionHash is held's and conds' hashes of an App version (its JSON from
// metadata on).
func versionHash(version []byte) (uint64, uint32) {
	if i := bytes.Index(version, fieldConditions); i >= 0 {
		if j := bytes.Index(version[i:], []byte("}]")); j >= 0 {
			var h maphash.Hash
			h.SetSeed(appSeed)
			_, _ = h.Write(version[:i])
			_, _ = h.Write(version[i+j+2:])
			return h.Sum64() | 1, uint32(maphash.Bytes(appSeed, version[i:i+j+2])) | 1
		}
	}
	return maphash.Bytes(appSeed, version) | 1, 0
}

// event records a data event for the indexed App ix.
func (t *esTrack) event(ix int32, data []byte, deleted bool) {
	t.events++
	i := bytes.Index(data, fieldMeta)
	if i < 0 {
		return
	}
	version := data[i:]
	h, cond := versionHash(version)
	rv, _ := strconv.ParseUint(string(valueAfter(version, fieldRV)), 10, 64)
	p := esPending{deleted: deleted, rv: rv, cluster: t.cluster[ix], ix: ix}

	if deleted {
		p.identical = t.held[ix] == 0
		if t.held[ix] == 0 {
			t.absentDeletes++
		}
		t.held[ix], t.conds[ix] = 0, 0
		t.lastType[ix] = 'D'
	} else {
		p.identical = t.held[ix] == h && t.conds[ix] == cond
		p.condition = t.held[ix] == h && (t.conds[ix] != 0 || cond != 0)
		t.held[ix], t.conds[ix] = h, cond
		t.lastType[ix] = 'M'
		if bytes.Contains(data[:i], []byte(`"type":"ADDED"`)) {
			t.lastType[ix] = 'A'
		}
	}
	t.pending = append(t.pending, p)
}

// position is a frame with id id dispatched; last is the client's id
// before it (a reset's burst starts over: its id is no id back).
func (t *esTrack) position(last, id esPos) {
	if !id.covers(last) && !t.void {
		t.idBack++
		t.note("id %v after %v (%d events pending)", id, last, len(t.pending))
	}
	judge := t.base
	if id == t.raisedBy && t.raisedOnConn {
		judge = t.batchFrom
	}
	for _, p := range t.pending {
		covered := id[p.cluster] <= judge[p.cluster]
		switch {
		case p.condition:
			t.conditions++
		case covered && p.identical:
			t.dups++
			t.note("duplicate of %s (rv %d, deleted %v) at id %v, the client at %v", t.keys[p.ix], p.rv, p.deleted, id, judge)
		case covered:
			t.stale++
			t.note("stale %s (rv %d, deleted %v) at id %v, the client at %v", t.keys[p.ix], p.rv, p.deleted, id, judge)
		case p.identical && !p.deleted:
			t.resent++
		}
	}
	t.pending = t.pending[:0]
	if !t.base.covers(id) {
		t.batchFrom, t.base, t.raisedBy, t.raisedOnConn = t.base, t.base.max(id), id, true
	}
	t.void, t.positioned = false, true
	if id.covers(t.taintTo) {
		t.taintTo = esPos{}
	}
}

// connected is a new connection sending Last-Event-ID sent (zero: none).
func (t *esTrack) connected(sent esPos) {
	for _, p := range t.pending {
		// The last connection ended between these events and their id:
		// the view holds them, the position does not cover them yet.
		if p.deleted || p.rv == 0 {
			t.tainted = true
		} else {
			t.taintTo[p.cluster] = max(t.taintTo[p.cluster], p.rv)
		}
	}
	t.pending = t.pending[:0]
	t.raisedOnConn = false
	clear(t.lastType)
	if sent.isZero() && t.positioned {
		t.forgot++
	}
	if sent.isZero() {
		clear(t.held)
		clear(t.conds)
		t.base, t.void, t.tainted, t.taintTo = esPos{}, false, false, esPos{}
	}
}

// reset is an "event: reset": the view is cleared, a burst follows.
func (t *esTrack) reset() {
	clear(t.held)
	clear(t.conds)
	t.pending = t.pending[:0]
	t.base, t.void, t.tainted, t.taintTo = esPos{}, true, false, esPos{}
}

// clean reports whether the view is the clusters at the client's position.
func (t *esTrack) clean() bool {
	return !t.void && !t.tainted && t.taintTo.isZero() && len(t.pending) == 0
}

// scopedClient is a stream client and what its caller sees: org "" is a
// SuperAdmin (the whole fleet), else a member of that org.
type scopedClient struct {
	*esClient
	org string
}

func newTrackedClient(url, token string, hc *http.Client, apps *appIndex) *esClient {
	c := newESClient(url, token, hc, apps)
	c.track = newESTrack(apps)
	return c
}

// streamCounts sums the clients' tallies.
type streamCounts struct {
	clients, conns, ok, refused, failed, resumed, resets                 int
	idBack, dups, stale, resent, absentDeletes, regress, events, sentNo0 int
	conditions, badIDs                                                   int
	notes                                                                []string // the first few clients' fault notes
}

func countStreams(cs []scopedClient) streamCounts {
	var s streamCounts
	for _, c := range cs {
		c.mu.Lock()
		s.clients++
		s.resets += c.resets
		s.regress += c.regress
		s.badIDs += c.badIDs
		for _, cn := range c.conns {
			s.conns++
			switch {
			case cn.Status == 0:
				s.failed++
			case cn.Status != http.StatusOK:
				s.refused++
			default:
				s.ok++
				if !cn.Sent.isZero() && !cn.Reset {
					s.resumed++
				}
			}
		}
		if t := c.track; t != nil {
			s.idBack += t.idBack
			s.dups += t.dups
			s.stale += t.stale
			s.resent += t.resent
			s.absentDeletes += t.absentDeletes
			s.events += t.events
			s.sentNo0 += t.forgot
			s.conditions += t.conditions
			if len(s.notes) < 10 {
				for _, n := range t.notes {
					s.notes = append(s.notes, fmt.Sprintf("client %d (org %q): %s", s.clients, c.org, n))
				}
			}
		}
		c.mu.Unlock()
	}
	return s
}

func (s streamCounts) String() string {
	return fmt.Sprintf("%d clients, %d connections (%d answered 200, %d resumed with Last-Event-ID and no reset, %d refused, %d failed to connect); "+
		"%d data events; %d resets, %d ids back, %d duplicates, %d stale, %d resent after their position, %d within-stream id regressions, %d DELETED of an App not held, "+
		"%d condition changes alone, %d ids no position",
		s.clients, s.conns, s.ok, s.resumed, s.refused, s.failed, s.events, s.resets, s.idBack, s.dups, s.stale, s.resent, s.regress, s.absentDeletes,
		s.conditions, s.badIDs)
}

// --- the clusters' truth, by scope ---

// sees is auth.Scope.Sees for a SuperAdmin (org "") or a member of org: a
// tenant's namespace in every cluster (the namespace's own part).
func sees(org, namespace, orgLabel string) bool {
	ns, _ := projection.SplitNamespace(namespace)
	return org == "" || (orgLabel == org && ns == "tenant-"+org)
}

// appsAt is what LISTs of Apps held: the tag and org label of each
// indexed App, absent ones 0.
type appsAt struct {
	tags []uint64
	orgs []string
	// sig compares two lists' content (tags, labels, presence).
	sig string
}

// listApps is one LIST of the Apps of cluster (its index in
// apps.clusters), keyed as deployd names them: every other cluster's Apps
// are absent from it.
func listApps(ctx context.Context, c *clustertest.Cluster, apps *appIndex, cluster int, opts metav1.ListOptions) (*appsAt, error) {
	list, err := c.Dynamic().Resource(projection.KindApp.GVR()).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	name := ""
	if cluster > 0 {
		name = apps.clusters[cluster]
	}
	a := emptyApps(apps)
	var sig strings.Builder
	for _, it := range list.Items {
		key := projection.QualifyNamespace(it.GetNamespace(), name) + "/" + it.GetName()
		ix, ok := apps.idx[key]
		if !ok {
			return nil, fmt.Errorf("App %s is no App of the fleet's index", key)
		}
		tag, _, _ := unstructured.NestedString(it.Object, "spec", "image", "tag")
		a.tags[ix] = tagHash([]byte(tag))
		a.orgs[ix] = it.GetLabels()[projection.LabelOrg]
		fmt.Fprintf(&sig, "%s=%s@%s;", key, tag, a.orgs[ix])
	}
	a.sig = sig.String()
	return a, nil
}

// emptyApps holds no App.
func emptyApps(apps *appIndex) *appsAt {
	return &appsAt{tags: make([]uint64, len(apps.keys)), orgs: make([]string, len(apps.keys))}
}

// add puts another cluster's LIST into a.
func (a *appsAt) add(b *appsAt) {
	for ix, h := range b.tags {
		if h != 0 {
			a.tags[ix], a.orgs[ix] = h, b.orgs[ix]
		}
	}
	a.sig += b.sig + "|"
}

// scoped is the truth a member of org (or a SuperAdmin, "") compares with.
func (a *appsAt) scoped(apps *appIndex, org string, others map[string]bool) *truth {
	tr := &truth{tags: make([]uint64, len(a.tags)), others: others}
	for ix, h := range a.tags {
		ns, _, _ := strings.Cut(apps.keys[ix], "/")
		if h != 0 && sees(org, ns, a.orgs[ix]) {
			tr.tags[ix] = h
		}
	}
	return tr
}

// streamsEnv is what the tests share: one fleet per cluster (one cluster,
// or several that every replica reads), one identity provider, the built
// binary, and replicas of it.
type streamsEnv struct {
	t        *testing.T
	c        *clustertest.Cluster   // the first cluster
	clusters []*clustertest.Cluster // every cluster, the first's first
	// down marks a cluster whose API server is stopped on purpose: no
	// view is compared with it until it is back.
	down   []atomic.Bool
	env    []string // every replica's besides drainEnv: the clusters it reads
	id     *identity
	bin    string
	apps   *appIndex
	ch     *changer   // the first cluster's
	chs    []*changer // by cluster
	others map[string]bool
	tokens map[string]string // by org ("" SuperAdmin)
	hc     *http.Client
}

func newStreamsEnv(t *testing.T, apps int) *streamsEnv {
	t.Helper()
	return newClustersEnv(t, nil, fleetCluster(t, apps, 1))
}

// newClustersEnv is the env of clusters cs, named names (nil with one
// cluster; the first's name is DEPLOY_CLUSTER_NAME, the others are in a
// clusters file): every replica reads them all.
func newClustersEnv(t *testing.T, names []string, cs ...*clustertest.Cluster) *streamsEnv {
	t.Helper()
	if len(cs) > 1 && len(names) != len(cs) {
		t.Fatalf("%d clusters named %v", len(cs), names)
	}
	e := &streamsEnv{t: t, c: cs[0], clusters: cs, down: make([]atomic.Bool, len(cs)), id: startIdentity(t), bin: buildDeployd(t), hc: newStreamHTTPClient(false)}
	if len(cs) > 1 {
		var file strings.Builder
		file.WriteString("clusters:\n")
		for i, c := range cs[1:] {
			fmt.Fprintf(&file, "- name: %s\n  kubeconfig: %s\n", names[i+1], c.Kubeconfig)
		}
		path := filepath.Join(t.TempDir(), "clusters.yaml")
		if err := os.WriteFile(path, []byte(file.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		e.env = []string{"DEPLOY_CLUSTER_NAME=" + names[0], "DEPLOY_CLUSTERS_FILE=" + path}
	}
	qualify := func(i int, ns string) string {
		if i == 0 {
			return ns
		}
		return projection.QualifyNamespace(ns, names[i])
	}
	var keys []string
	e.others = map[string]bool{}
	for i, c := range cs {
		ch := newChanger(t, c)
		e.chs = append(e.chs, ch)
		for _, a := range ch.apps {
			keys = append(keys, qualify(i, a.Namespace)+"/"+a.Name)
		}
		for _, k := range []projection.Kind{projection.KindCDApplication, projection.KindMiddleware} {
			l, err := c.Dynamic().Resource(k.GVR()).List(t.Context(), metav1.ListOptions{})
			if err != nil {
				continue // a CRD not served: no row of that kind
			}
			for _, it := range l.Items {
				e.others[qualify(i, it.GetNamespace())+"/"+it.GetName()] = true
			}
		}
	}
	e.ch = e.chs[0]
	e.apps = newClustersAppIndex(names, keys)
	e.tokens = map[string]string{}
	for org, u := range map[string]authtest.User{"": superAdmin, "acme": acmeMember, "globex": globexMember, "initech": initechMember} {
		e.tokens[org] = e.id.token(t, u, 4*time.Hour)
	}
	return e
}

// replica starts one more deployd reading the clusters.
func (e *streamsEnv) replica(env ...string) *deployd {
	e.t.Helper()
	return startDeployd(e.t, e.bin, e.c.Kubeconfig, e.id, slices.Concat(drainEnv, e.env, env)...)
}

// listAll is every cluster's Apps now.
func (e *streamsEnv) listAll(ctx context.Context) (*appsAt, error) {
	all := emptyApps(e.apps)
	for i, c := range e.clusters {
		a, err := listApps(ctx, c, e.apps, i, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("cluster %d: %w", i, err)
		}
		all.add(a)
	}
	return all, nil
}

// settled is the API servers' Apps once they hold still (the same content
// twice, 500 ms apart): a change the stopped changer gave up on may still
// be committed after it returned.
func (e *streamsEnv) settled(within time.Duration) *appsAt {
	t := e.t
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	prev, err := e.listAll(ctx)
	if err != nil {
		t.Fatalf("list Apps: %v", err)
	}
	for {
		select {
		case <-ctx.Done():
			t.Fatalf("the API servers' Apps did not hold still within %s", within)
		case <-time.After(500 * time.Millisecond):
		}
		next, err := e.listAll(ctx)
		if err != nil {
			t.Fatalf("list Apps: %v", err)
		}
		if next.sig == prev.sig {
			return next
		}
		prev = next
	}
}

// converge waits until every client's view equals the API servers' Apps
// in its scope; on the deadline it reports the clients that differ.
func (e *streamsEnv) converge(cs []scopedClient, now *appsAt, within time.Duration) (time.Duration, bool) {
	t := e.t
	t.Helper()
	truths := map[string]*truth{}
	for _, c := range cs {
		if truths[c.org] == nil {
			truths[c.org] = now.scoped(e.apps, c.org, e.others)
		}
	}
	start := time.Now()
	plain := make([]*esClient, len(cs))
	for i, c := range cs {
		plain[i] = c.esClient
	}
	ok := waitAll(t, plain, within, "equal to the API servers' LISTs in their scope", func(i int, c *esClient) bool {
		m, w, x := c.diff(truths[cs[i].org])
		return m+w+x == 0
	})
	if !ok {
		bad := 0
		for _, c := range cs {
			if m, w, x := c.diff(truths[c.org]); m+w+x > 0 {
				if bad < 3 {
					t.Errorf("a view (org %q) differs from the API servers' LISTs: %d Apps missing, %d with another tag or extra, %d rows of no kind", c.org, m, w, x)
				}
				bad++
			}
		}
		t.Errorf("%d of %d views differ from the API servers' LISTs", bad, len(cs))
	}
	return time.Since(start), ok
}

// gapSampler checks views against the clusters at their positions (the
// gap count above) every interval until stopped.
type gapSampler struct {
	checked, bad, unlistable, skipped atomic.Int64
	mu                                sync.Mutex
	notes                             []string
	stop                              func()
}

func (e *streamsEnv) sampleGaps(cs []scopedClient, interval time.Duration) *gapSampler {
	g := &gapSampler{}
	ctx, cancel := context.WithCancel(e.t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(interval):
			}
			g.round(ctx, e, cs)
		}
	})
	g.stop = sync.OnceFunc(func() { cancel(); wg.Wait() })
	e.t.Cleanup(g.stop)
	return g
}

func (g *gapSampler) note(format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.notes) < 8 {
		g.notes = append(g.notes, fmt.Sprintf(format, args...))
	}
}

// anyDown reports whether a cluster's API server is stopped on purpose.
func (e *streamsEnv) anyDown() bool {
	for i := range e.down {
		if e.down[i].Load() {
			return true
		}
	}
	return false
}

// at is the clusters' Apps at position p: each cluster's LIST at exactly
// its part of p (resourceVersionMatch=Exact), none of a cluster whose
// part is 0 (the position holds nothing of it). cur is each cluster's
// revision now: a part past it is no revision of the cluster's (a LIST at
// it would wait for the watch cache).
func (e *streamsEnv) at(ctx context.Context, p, cur esPos) (*appsAt, error) {
	all := emptyApps(e.apps)
	for i, c := range e.clusters {
		if p[i] == 0 {
			continue
		}
		if p[i] > cur[i] {
			return nil, fmt.Errorf("cluster %d: part %d is past the API server's revision %d", i, p[i], cur[i])
		}
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		a, err := listApps(lctx, c, e.apps, i, metav1.ListOptions{ResourceVersion: strconv.FormatUint(p[i], 10), ResourceVersionMatch: metav1.ResourceVersionMatchExact})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("cluster %d at %d: %w", i, p[i], err)
		}
		all.add(a)
	}
	return all, nil
}

// round samples every clean client, and checks those at the (up to) three
// positions most clients hold, one exact LIST per cluster each. While a
// cluster's API server is stopped on purpose, the round is skipped.
func (g *gapSampler) round(ctx context.Context, e *streamsEnv, cs []scopedClient) {
	type sample struct {
		org  string
		view []uint64
	}
	if e.anyDown() {
		g.skipped.Add(1)
		return
	}
	at := map[esPos][]sample{}
	for _, c := range cs {
		c.mu.Lock()
		if c.track != nil && c.track.clean() && !c.lastID.isZero() {
			at[c.lastID] = append(at[c.lastID], sample{org: c.org, view: slices.Clone(c.view)})
		}
		c.mu.Unlock()
	}
	positions := make([]esPos, 0, len(at))
	for p := range at {
		positions = append(positions, p)
	}
	sort.Slice(positions, func(i, j int) bool { return len(at[positions[i]]) > len(at[positions[j]]) })
	var cur esPos
	for i, c := range e.clusters {
		head, err := c.Dynamic().Resource(projection.KindApp.GVR()).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return
		}
		cur[i], _ = strconv.ParseUint(head.GetResourceVersion(), 10, 64)
	}
	for _, p := range positions[:min(3, len(positions))] {
		list, err := e.at(ctx, p, cur)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if e.anyDown() {
				g.skipped.Add(1)
				return
			}
			g.unlistable.Add(1)
			g.note("position %s held by %d clients is no revision the API servers can list: %v", p.format(e.apps.clusters), len(at[p]), err)
			continue
		}
		for _, s := range at[p] {
			g.checked.Add(1)
			want := list.scoped(e.apps, s.org, nil)
			missing, wrong, extra := 0, 0, 0
			example := ""
			for ix, w := range want.tags {
				got := s.view[ix]
				if got == w {
					continue
				}
				switch {
				case w == 0:
					extra++
				case got == 0:
					missing++
				default:
					wrong++
				}
				if example == "" {
					example = e.apps.keys[ix]
				}
			}
			if missing+wrong+extra > 0 {
				g.bad.Add(1)
				g.note("a view (org %q) at position %s differs from the API servers' Apps there: %d missing, %d at another tag, %d extra (e.g. %s)", s.org, p.format(e.apps.clusters), missing, wrong, extra, example)
			}
		}
	}
}

// --- a Service in front of the replicas ---

// newRRProxy puts a Service (round robin over the ready replicas) in
// front of ds.
func newRRProxy(t testing.TB, ds ...*deployd) *clustertest.Service {
	t.Helper()
	var bs []clustertest.Backend
	for _, d := range ds {
		bs = append(bs, clustertest.Backend{Addr: d.addr, Health: d.Base + "/v1/deploy/health"})
	}
	return clustertest.StartService(t, bs...)
}

// terminate sends SIGTERM and waits up to within for the exit, as the
// kubelet does with a pod's grace period; past it, SIGKILL. It answers how
// long the exit took and whether it needed the kill.
func terminate(d *deployd, within time.Duration) (time.Duration, bool) {
	start := time.Now()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
		return time.Since(start), false
	case <-time.After(within):
		d.kill()
		return time.Since(start), true
	}
}

// startClients starts n stream clients through base: a tenth SuperAdmins,
// the rest members of acme, globex and initech in turn.
func (e *streamsEnv) startClients(base string, n int) (cs []scopedClient, stop func()) {
	orgs := []string{"acme", "globex", "initech"}
	return e.startScopedClients(base, n, func(i int) string {
		if i%10 == 0 {
			return ""
		}
		return orgs[i%len(orgs)]
	})
}

// startScopedClients starts n stream clients through base, the i-th a
// member of orgOf(i) ("": a SuperAdmin).
func (e *streamsEnv) startScopedClients(base string, n int, orgOf func(i int) string) (cs []scopedClient, stop func()) {
	ctx, cancel := context.WithCancel(e.t.Context())
	for i := range n {
		org := orgOf(i)
		c := newTrackedClient(base+streamsPath, e.tokens[org], e.hc, e.apps)
		c.start(ctx)
		cs = append(cs, scopedClient{esClient: c, org: org})
	}
	stop = sync.OnceFunc(func() {
		cancel()
		for _, c := range cs {
			<-c.done
		}
	})
	e.t.Cleanup(stop)
	return cs, stop
}

// runChanger changes the (first cluster's) fleet at rate until the
// returned stop is called.
func (e *streamsEnv) runChanger(rate int) (stop func()) { return e.runChangerOf(0, rate) }

// runChangerOf changes cluster i's fleet at rate until the returned stop
// is called.
func (e *streamsEnv) runChangerOf(i, rate int) (stop func()) {
	ctx, cancel := context.WithCancel(e.t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { e.chs[i].run(ctx, rate, max(8, rate/10)) })
	return sync.OnceFunc(func() { cancel(); wg.Wait() })
}

func esClients(cs []scopedClient) []*esClient {
	out := make([]*esClient, len(cs))
	for i, c := range cs {
		out[i] = c.esClient
	}
	return out
}

// TestStreamsAcrossReplicas: three replicas behind a Service, 1,000
// browser-like clients (SuperAdmins and members of three orgs) resuming
// with Last-Event-ID on every reconnect, the fleet changing at 50 Apps a
// second; (a) a rolling upgrade (each replica in turn: SIGTERM, exit,
// start, ready), (b) a kill -9 of one replica and its restart; each phase
// ends with the changes stopped and every view equal to the API server's
// LIST in its scope. Promise: no reset, no id back, no duplicate, no stale
// event, no gap (the counts are defined at the top of this file).
// DEPLOYD_STREAMS_CLIENTS sizes the clients (default 1,000).
func TestStreamsAcrossReplicas(t *testing.T) {
	const rate, apps = 50, 200
	n := clustertest.EnvInt(t, "DEPLOYD_STREAMS_CLIENTS", 1000)
	raiseOpenFiles(t)
	e := newStreamsEnv(t, apps)
	ds := []*deployd{e.replica(), e.replica(), e.replica()}
	px := newRRProxy(t, ds...)
	px.WaitReady(t, 10*time.Second)
	start := time.Now()
	cs, stopClients := e.startClients(px.Base, n)
	defer stopClients()
	if !waitAll(t, esClients(cs), 3*time.Minute, "synced", func(_ int, c *esClient) bool { return c.synced() }) {
		return
	}
	t.Logf("%d clients (fleet of %d Apps) synced through the proxy in %s", n, len(e.apps.keys), time.Since(start).Round(time.Millisecond))
	gaps := e.sampleGaps(cs, 2*time.Second)

	phase := func(name string, act func()) {
		before := countStreams(cs)
		stopChanger := e.runChanger(rate)
		loadFor(t.Context(), 3*time.Second)
		at := time.Now()
		act()
		waitAll(t, esClients(cs), 2*time.Minute, "streaming again", func(_ int, c *esClient) bool { return c.synced() })
		loadFor(t.Context(), 2*time.Second)
		stopChanger()
		now := e.settled(time.Minute)
		took, ok := e.converge(cs, now, time.Minute)
		after := countStreams(cs)
		t.Logf("%s: %s after it began; converged %s after the changes stopped (%v); since the phase began: %d connections, %d resets, %d ids back, %d duplicates, %d stale; %d changes sent so far",
			name, time.Since(at).Round(time.Millisecond), took.Round(time.Millisecond), ok, after.conns-before.conns, after.resets-before.resets,
			after.idBack-before.idBack, after.dups-before.dups, after.stale-before.stale, e.ch.Sent.Load())
	}

	phase("rolling upgrade", func() {
		for i, d := range ds {
			took, killed := terminate(d, 30*time.Second)
			if killed {
				t.Errorf("replica %d did not exit within 30 s of SIGTERM", i+1)
			}
			restart := time.Now()
			d.start()
			t.Logf("replica %d: exited %s after SIGTERM, ready %s after its start", i+1, took.Round(time.Millisecond), time.Since(restart).Round(time.Millisecond))
		}
	})
	phase("kill -9", func() {
		ds[1].kill()
		restart := time.Now()
		ds[1].start()
		t.Logf("replica 2 killed, ready %s after its start", time.Since(restart).Round(time.Millisecond))
	})
	gaps.stop()

	s := countStreams(cs)
	t.Logf("totals: %s", s)
	t.Logf("gap samples: %d views checked at their position, %d differ, %d positions not listable; %d bytes relayed to the clients; proxy: %d dials refused, %d connections without a backend",
		gaps.checked.Load(), gaps.bad.Load(), gaps.unlistable.Load(), px.ToClients(), px.Refused(), px.Unserved())
	for _, note := range gaps.notes {
		t.Log("gap sample: " + note)
	}
	if s.resets != 0 {
		t.Errorf("%d resets across the clients, want 0", s.resets)
	}
	if s.idBack != 0 || s.regress != 0 {
		t.Errorf("ids went back: %d below the client's position, %d within a stream; want 0", s.idBack, s.regress)
	}
	if s.dups != 0 || s.stale != 0 {
		t.Errorf("%d duplicates and %d stale events, want 0", s.dups, s.stale)
	}
	if gaps.bad.Load() != 0 || gaps.unlistable.Load() != 0 {
		t.Errorf("gaps: %d views differ from the cluster at their position, %d positions are no listable revision; want 0", gaps.bad.Load(), gaps.unlistable.Load())
	}
	if gaps.checked.Load() == 0 {
		t.Error("no view was sampled at its position")
	}
	if s.sentNo0 != 0 {
		t.Errorf("%d reconnections sent no Last-Event-ID", s.sentNo0)
	}
	for i, d := range ds {
		if d.panicked() {
			t.Errorf("replica %d's log shows a panic:\n%s", i+1, tail(d.log.String(), 30))
		}
	}
}

// connectOnce runs one connection of c until cancel is called; wait
// returns when it has ended.
func connectOnce(ctx context.Context, c *esClient) (cancel func()) {
	cctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); c.connect(cctx) }()
	return func() { stop(); <-done }
}

// waitView waits until the client streams and its view equals tr.
func waitView(t *testing.T, c *esClient, tr *truth, within time.Duration) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	return waitFor(ctx, func() bool {
		m, w, x := c.diff(tr)
		return c.synced() && m+w+x == 0
	})
}

func (e *streamsEnv) patchApp(app types.NamespacedName, patch string) {
	e.t.Helper()
	if _, err := e.c.Dynamic().Resource(projection.KindApp.GVR()).Namespace(app.Namespace).
		Patch(e.t.Context(), app.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("patch %s: %v", app, err)
	}
}

// TestStreamResumeOnColdReplica: a client streams from replica A, keeps
// its last id M and disconnects; Apps change (one deleted, one moved out
// of acme by its org label); a replica C started after that (its own
// history begins after M) serves the client's reconnect with
// Last-Event-ID M: no reset, the view equals the API server's LIST in its
// scope, and the deleted App (and, for acme, the moved one) came as
// DELETED. Then the client disconnects again, the fleet changes, etcd is
// compacted and the API server restarted (its watch cache would otherwise
// still serve the old revision), and a fresh replica D answers the old id
// with exactly one "event: reset" and the full burst.
func TestStreamResumeOnColdReplica(t *testing.T) {
	e := newStreamsEnv(t, 60)
	a := e.replica()
	var acmeApps []types.NamespacedName
	for _, app := range e.ch.apps {
		if app.Namespace == "tenant-acme" {
			acmeApps = append(acmeApps, app)
		}
	}
	if len(acmeApps) < 3 {
		t.Fatalf("the fleet has %d Apps in tenant-acme, want 3 or more", len(acmeApps))
	}
	deleted, moved := acmeApps[0], acmeApps[1]

	cs := []scopedClient{
		{esClient: newTrackedClient(a.Base+streamsPath, e.tokens[""], e.hc, e.apps), org: ""},
		{esClient: newTrackedClient(a.Base+streamsPath, e.tokens["acme"], e.hc, e.apps), org: "acme"},
	}
	var cancels []func()
	for _, c := range cs {
		cancels = append(cancels, connectOnce(t.Context(), c.esClient))
	}
	// A few changes while they stream, so their ids are past the burst's.
	for i := range 10 {
		e.ch.change(t.Context(), e.ch.apps[i*len(e.ch.apps)/10])
	}
	e.patchApp(acmeApps[2], fmt.Sprintf(`{"spec":{"image":{"tag":%q}}}`, stamp(time.Now())))
	now := e.settled(30 * time.Second)
	for _, c := range cs {
		if !waitView(t, c.esClient, now.scoped(e.apps, c.org, e.others), 30*time.Second) {
			t.Fatalf("the client (org %q) did not reach the API server's LIST from replica A", c.org)
		}
	}
	for _, cancel := range cancels {
		cancel()
	}
	ms := make([]uint64, len(cs))
	for i, c := range cs {
		ms[i] = c.lastID[0]
	}
	t.Logf("positions after replica A: %v", ms)

	// While the clients are away: tags change, one acme App is deleted and
	// one moves to globex (out of every tenant's scope but the SuperAdmin's).
	for i := range 10 {
		e.ch.change(t.Context(), e.ch.apps[(i*len(e.ch.apps)/10+3)%len(e.ch.apps)])
	}
	e.patchApp(acmeApps[2], fmt.Sprintf(`{"spec":{"image":{"tag":%q}}}`, stamp(time.Now())))
	if err := e.c.Dynamic().Resource(projection.KindApp.GVR()).Namespace(deleted.Namespace).Delete(t.Context(), deleted.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.patchApp(moved, `{"metadata":{"labels":{"hanzo.ai/org":"globex"}}}`)
	now = e.settled(30 * time.Second)

	cold := e.replica("LOG_LEVEL=debug")
	for i, c := range cs {
		c.url = cold.Base + streamsPath
		resets := c.resets
		cancel := connectOnce(t.Context(), c.esClient)
		ok := waitView(t, c.esClient, now.scoped(e.apps, c.org, e.others), 30*time.Second)
		cancel()
		cn := c.conns[len(c.conns)-1]
		m, w, x := c.diff(now.scoped(e.apps, c.org, e.others))
		t.Logf("org %q: resumed from %d on the cold replica: status %d, reset %v, %d events, position now %d; view vs LIST: %d missing, %d other, %d extra rows",
			c.org, ms[i], cn.Status, cn.Reset, cn.Events, c.lastID[0], m, w, x)
		if c.resets != resets || cn.Reset {
			t.Errorf("org %q: the cold replica answered Last-Event-ID %d with a reset; it must catch the client up from the API server's history; its log ends:\n%s", c.org, ms[i], tail(cold.log.String(), 20))
		}
		if !ok {
			t.Errorf("org %q: the view did not reach the API server's LIST from the cold replica", c.org)
		}
		if got := c.track.lastType[e.apps.idx[deleted.String()]]; got != 'D' {
			t.Errorf("org %q: the deleted App %s came as %s from the cold replica, want DELETED", c.org, deleted, eventType(got))
		}
		want := byte('M')
		if c.org == "acme" {
			want = 'D'
		}
		if got := c.track.lastType[e.apps.idx[moved.String()]]; got != want {
			t.Errorf("org %q: the App %s moved out of acme came as %s from the cold replica, want %s", c.org, moved, eventType(got), eventType(want))
		}
		if c.lastID[0] < ms[i] {
			t.Errorf("org %q: the position went back from %d to %d", c.org, ms[i], c.lastID[0])
		}
	}
	if s := countStreams(cs); s.idBack+s.dups+s.stale != 0 {
		t.Errorf("%s", s)
	}

	// Past the history: the old position is compacted away.
	for i := range 10 {
		e.ch.change(t.Context(), e.ch.apps[(i*len(e.ch.apps)/10+5)%len(e.ch.apps)])
	}
	now = e.settled(30 * time.Second)
	a.stop()
	cold.stop()
	for i, c := range cs {
		ms[i] = c.lastID[0]
	}
	rev := e.c.CompactEtcd(t)
	e.c.RestartAPIServer(t)
	t.Logf("etcd compacted at revision %d (the clients hold %v), API server restarted", rev, ms)
	fresh := e.replica()
	for i, c := range cs {
		c.url = fresh.Base + streamsPath
		resets := c.resets
		cancel := connectOnce(t.Context(), c.esClient)
		ok := waitView(t, c.esClient, now.scoped(e.apps, c.org, e.others), 30*time.Second)
		cancel()
		cn := c.conns[len(c.conns)-1]
		t.Logf("org %q: sent %d past the history: status %d, reset first %v, %d resets, %d events", c.org, ms[i], cn.Status, cn.Reset, c.resets-resets, cn.Events)
		if c.resets-resets != 1 || !cn.Reset {
			t.Errorf("org %q: Last-Event-ID %d past etcd's history: %d resets (first event a reset: %v), want exactly one, first", c.org, ms[i], c.resets-resets, cn.Reset)
		}
		if !ok {
			t.Errorf("org %q: the burst after the reset did not equal the API server's LIST", c.org)
		}
	}
	for _, d := range []*deployd{a, cold, fresh} {
		if d.panicked() {
			t.Errorf("a replica's log shows a panic:\n%s", tail(d.log.String(), 30))
		}
	}
}

// rvGet is one GET of a list or a detail: its status, body, ETag and
// metadata.resourceVersion (0 when none).
type rvAnswer struct {
	status int
	body   []byte
	etag   string
	rv     uint64
	rvText string
}

func rvGet(ctx context.Context, hc *http.Client, url, token, ifNoneMatch string) (rvAnswer, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if ifNoneMatch != "" {
		req.Header.Set("If-None-Match", ifNoneMatch)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return rvAnswer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return rvAnswer{}, err
	}
	a := rvAnswer{status: resp.StatusCode, body: b, etag: resp.Header.Get("ETag")}
	if a.status == http.StatusOK {
		var doc struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			return a, fmt.Errorf("%s: %v", url, err)
		}
		a.rvText = doc.Metadata.ResourceVersion
		if a.rv, err = strconv.ParseUint(a.rvText, 10, 64); err != nil {
			return a, fmt.Errorf("%s: metadata.resourceVersion %q is no uint64", url, a.rvText)
		}
	}
	return a, nil
}

// TestRevisionsNeverDecrease: a client that asks a different replica on
// every request (each replica's own address, no proxy), while Apps change
// at 50/s, naming the last revision it saw: the list with
// ?resourceVersion=<last> (answered at that revision or newer) or with
// If-None-Match: <the ETag of that answer> (304, or a newer list), and
// one App's detail with If-None-Match: <its last ETag>. The metadata.resourceVersion it sees never decreases
// (compared as uint64), whichever replica answers. The replicas start a
// few seconds apart, the fleet changing in between. Once the changes
// stop, the three replicas at one position answer byte-identical list and
// detail bodies with identical ETags.
func TestRevisionsNeverDecrease(t *testing.T) {
	const rate = 50
	e := newStreamsEnv(t, 60)
	token := e.tokens[""]
	var ds []*deployd
	stopChanger := e.runChanger(rate)
	for range 3 {
		ds = append(ds, e.replica())
		loadFor(t.Context(), 2*time.Second)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4}}
	app := e.ch.apps[0]
	listPath := "/api/v1/applications"
	detailPath := fmt.Sprintf("/api/v1/applications/%s?appNamespace=%s", app.Name, app.Namespace)

	var lastList, lastApp uint64
	var listETag, appETag string // the ETags of the newest answers, sent back as a browser does
	requests, notModified, listBack, appBack, failed := 0, 0, 0, 0, 0
	report := func(format string, args ...any) {
		if failed < 10 {
			t.Errorf(format, args...)
		}
		failed++
	}
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		d := ds[i%len(ds)]
		var (
			ans rvAnswer
			err error
			how string
		)
		if i%2 == 0 {
			u := d.Base + listPath
			if lastList != 0 {
				u += "?resourceVersion=" + strconv.FormatUint(lastList, 10)
			}
			how = "?resourceVersion"
			ans, err = rvGet(t.Context(), hc, u, token, "")
		} else {
			how = "If-None-Match"
			ans, err = rvGet(t.Context(), hc, d.Base+listPath, token, listETag)
		}
		requests++
		switch {
		case err != nil:
			report("list (%s) from replica %d: %v", how, i%len(ds)+1, err)
		case ans.status == http.StatusNotModified:
			notModified++
		case ans.status != http.StatusOK:
			report("list (%s=%d) from replica %d: %d %s", how, lastList, i%len(ds)+1, ans.status, short(ans.body, 200))
		default:
			if ans.rv < lastList {
				listBack++
				report("list (%s) from replica %d: metadata.resourceVersion %d after %d", how, i%len(ds)+1, ans.rv, lastList)
			}
			if ans.etag == "" {
				report("list from replica %d: no ETag", i%len(ds)+1)
			}
			if ans.rv >= lastList {
				lastList, listETag = ans.rv, ans.etag
			}
		}

		ans, err = rvGet(t.Context(), hc, d.Base+detailPath, token, appETag)
		requests++
		switch {
		case err != nil:
			report("detail from replica %d: %v", i%len(ds)+1, err)
		case ans.status == http.StatusNotModified:
			notModified++
		case ans.status != http.StatusOK:
			report("detail from replica %d: %d %s", i%len(ds)+1, ans.status, short(ans.body, 200))
		default:
			if ans.rv < lastApp {
				appBack++
				report("detail of %s from replica %d: metadata.resourceVersion %d after %d", app, i%len(ds)+1, ans.rv, lastApp)
			}
			if ans.rv >= lastApp {
				lastApp, appETag = ans.rv, ans.etag
			}
		}
	}
	stopChanger()
	t.Logf("%d requests alternating 3 replicas (%d answered 304): the list went back %d times, the detail %d times; %d failures; last list revision %d, last App revision %d; %d changes sent",
		requests, notModified, listBack, appBack, failed, lastList, lastApp, e.ch.Sent.Load())

	// One position, one answer: once the changes stop every replica reaches
	// the same position; there the bodies and ETags are the same bytes.
	e.settled(30 * time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var lists, details []rvAnswer
	same := waitFor(ctx, func() bool {
		lists, details = lists[:0], details[:0]
		first, err := rvGet(ctx, hc, ds[0].Base+listPath, token, "")
		if err != nil || first.status != http.StatusOK {
			return false
		}
		lists = append(lists, first)
		for _, d := range ds[1:] {
			ans, err := rvGet(ctx, hc, d.Base+listPath+"?resourceVersion="+first.rvText, token, "")
			if err != nil || ans.status != http.StatusOK || ans.rv != first.rv {
				return false
			}
			lists = append(lists, ans)
		}
		for _, d := range ds {
			ans, err := rvGet(ctx, hc, d.Base+detailPath, token, "")
			if err != nil || ans.status != http.StatusOK {
				return false
			}
			details = append(details, ans)
		}
		// The detail read after the lists: the position must not have
		// moved in between for the comparison to be at one position.
		again, err := rvGet(ctx, hc, ds[0].Base+listPath, token, "")
		return err == nil && again.rv == first.rv
	})
	if !same {
		var rvs []string
		for _, d := range ds {
			ans, err := rvGet(t.Context(), hc, d.Base+listPath, token, "")
			rvs = append(rvs, fmt.Sprintf("%d (status %d, %v)", ans.rv, ans.status, err))
			if ans.status == http.StatusOK {
				ans2, _ := rvGet(t.Context(), hc, d.Base+listPath+"?resourceVersion="+ans.rvText, token, "")
				rvs[len(rvs)-1] += fmt.Sprintf(", at its own revision: %d %s", ans2.status, short(ans2.body, 120))
			}
		}
		t.Fatalf("the replicas never answered the list at one position within 30 s after the changes stopped: %s", strings.Join(rvs, "; "))
	}
	for i := 1; i < len(ds); i++ {
		if !bytes.Equal(lists[i].body, lists[0].body) || lists[i].etag != lists[0].etag {
			t.Errorf("replicas 1 and %d at revision %d: list bodies equal %v (%d and %d bytes), ETags %s and %s",
				i+1, lists[0].rv, bytes.Equal(lists[i].body, lists[0].body), len(lists[0].body), len(lists[i].body), lists[0].etag, lists[i].etag)
		}
		if !bytes.Equal(details[i].body, details[0].body) || details[i].etag != details[0].etag {
			t.Errorf("replicas 1 and %d: detail bodies of %s equal %v, ETags %s and %s", i+1, app, bytes.Equal(details[i].body, details[0].body), details[0].etag, details[i].etag)
		}
	}
	t.Logf("at revision %d the three replicas answered lists of %d bytes (ETag %s) and details (ETag %s)", lists[0].rv, len(lists[0].body), lists[0].etag, details[0].etag)
}

// short is b cut to n bytes.
func short(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// eventType names a type esTrack records.
func eventType(b byte) string {
	switch b {
	case 'A':
		return "ADDED"
	case 'M':
		return "MODIFIED"
	case 'D':
		return "DELETED"
	}
	return "no event"
}

// TestESTrack pins the counts defined at the top of this file on a
// scripted stream: a fold batch's data frames before its id-only frame, a
// batch cut before its id and sent again after the position (resent, not
// a duplicate), frames of one batch each carrying its id, a version the
// position already covered (duplicate), an older version (stale), an id
// below the position, and a reset.
func TestESTrack(t *testing.T) {
	app := func(typ, name, rv, tag string) string {
		return fmt.Sprintf(`data: {"result":{"type":%q,"application":{"metadata":{"name":%q,"namespace":"n","resourceVersion":%q},"status":{"sync":{"status":"Synced","revision":%q}}}}}`+"\n", typ, name, rv, tag)
	}
	script := []struct{ want, frames string }{
		{"", "retry: 1\n\n" + app("ADDED", "a", "5", "t1") + "\n" + app("ADDED", "b", "6", "t1") + "\nid: 10\n\n" +
			app("MODIFIED", "a", "11", "t2") + "\nid: 12\n\n: heartbeat\nid: 12\n\n" + app("MODIFIED", "b", "13", "t2") + "\n"},
		{"12", app("MODIFIED", "b", "13", "t2") + "id: 14\n\n" + app("MODIFIED", "a", "11", "t2") + "id: 14\n\n"},
		{"14", app("MODIFIED", "a", "11", "t2") + "id: 14\n\n" + app("MODIFIED", "a", "5", "t1") + "id: 14\n\n" + ": heartbeat\nid: 9\n\n" +
			"event: reset\ndata: {}\n\n" + app("ADDED", "a", "15", "t3") + "\n" + app("ADDED", "b", "13", "t2") + "\nid: 20\n\n"},
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
	c := newTrackedClient(srv.URL+streamsPath, "token", http.DefaultClient, newAppIndex([]string{"n/a", "n/b"}))
	ctx, cancel := context.WithCancel(t.Context())
	c.start(ctx)
	wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer wcancel()
	waitFor(wctx, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.lastID == esPos{20} && conn.Load() > 3 })
	cancel()
	<-c.done
	s := countStreams([]scopedClient{{esClient: c}})
	if s.resets != 1 || s.dups != 1 || s.stale != 1 || s.resent != 2 || s.idBack != 1 || s.sentNo0 != 0 || c.lastID != (esPos{20}) {
		t.Errorf("counts: %s; last id %v", s, c.lastID)
	}
	if tr := (&truth{tags: []uint64{tagHash([]byte("t3")), tagHash([]byte("t2"))}}); !c.track.clean() {
		t.Error("the view after the burst's id is not clean")
	} else if m, w, x := c.diff(tr); m+w+x != 0 {
		t.Errorf("view differs: %d %d %d", m, w, x)
	}
}
