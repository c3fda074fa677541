package cluster_test

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/hanzoai/deploy/cluster"
	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/demo/demotest"
	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/projection/projectiontest"
)

const fleetFixture = "../projection/testdata/fleet.yaml"

// startReadSide runs deployd's read path (watcher, feed, store) against
// the cluster until the test ends.
func startReadSide(t *testing.T, cfg *rest.Config) *demotest.ReadSide {
	t.Helper()
	feed := cluster.NewFeed()
	opts := demotest.Options()
	opts.Log = slog.New(slog.NewTextHandler(testLogOut, nil))
	w, err := cluster.NewWatcher(cfg, "", feed, opts)
	if err != nil {
		t.Fatal(err)
	}
	return demotest.Watch(t, w, feed)
}

func fixtureSummary(t *testing.T) []string {
	t.Helper()
	s := projection.NewStore(projection.DefaultConfig())
	var batch []projection.Change
	for _, u := range clustertest.Manifests(t, fleetFixture) {
		o, err := projection.Decode(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, projection.Change{Op: projection.Upsert, Object: o})
	}
	if _, err := s.Apply(batch...); err != nil {
		t.Fatal(err)
	}
	return projectiontest.Summary(s.Snapshot())
}

// Check 1: a fleet rendered as the operator does → the projection equals
// the expected applications and trees. Check 7: the caches hold no
// managedFields and no last-applied configuration — they hold the
// projection's summaries, which have no place for either.
func TestWatchFleet(t *testing.T) {
	c := clustertest.Start(t)
	rs := startReadSide(t, c.Config)
	objs := clustertest.Manifests(t, fleetFixture)
	// One object carries a last-applied configuration, as kubectl apply
	// leaves it.
	for _, o := range objs {
		if o.GetKind() == "Service" && o.GetName() == "iam" {
			o.SetAnnotations(map[string]string{projection.AnnotationLastApplied: `{"apiVersion":"v1","kind":"Service"}`, "team": "identity"})
		}
	}
	c.ApplyFleet(t, objs)
	rs.WaitConverged(t, c.Dynamic(), 30*time.Second)

	want, got := fixtureSummary(t), projectiontest.Summary(rs.Store.Snapshot())
	if !slices.Equal(want, got) {
		t.Fatalf("watched projection differs from the fixture's:\nwant:\n%s\n\ngot:\n%s", strings.Join(want, "\n"), strings.Join(got, "\n"))
	}

	// The caches hold the projection's own summaries — the very objects
	// its trees hold, not copies and not the objects the API server sent.
	cached := map[projection.ObjectKey]*projection.Object{}
	for _, ki := range projection.Registry() {
		for _, o := range rs.Watcher.Cached(ki.Kind) {
			cached[o.Key()] = o
		}
	}
	if len(cached) < len(objs) {
		t.Fatalf("caches hold %d objects, want at least the %d applied", len(cached), len(objs))
	}
	nodes := 0
	for a := range rs.Store.Snapshot().Apps() {
		for _, n := range a.Tree {
			nodes++
			if cached[n.Obj.Key()] != n.Obj {
				t.Errorf("%s: the tree's object is not the one the informer cache holds", n.Ref())
			}
		}
	}
	if nodes == 0 {
		t.Fatal("no tree nodes: the check above proves nothing")
	}
	live, err := c.Dynamic().Resource(projection.KindService.GVR()).Namespace("hanzo").Get(t.Context(), "iam", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(live.GetManagedFields()) == 0 || live.GetAnnotations()[projection.AnnotationLastApplied] == "" {
		t.Fatal("the live Service lacks managedFields or the annotation: the check above proves nothing")
	}
}

// Checks 2 and 3, with the real controller-manager and scheduler: an image
// change rolls out through Progressing/OutOfSync to Healthy/Synced; deleting
// the App lets the garbage collector remove its children and the app
// disappears.
func TestWatchRollout(t *testing.T) {
	c := clustertest.Start(t, clustertest.WithControllers())
	rs := startReadSide(t, c.Config)
	app := clustertest.Object(t, `
apiVersion: hanzo.ai/v1
kind: App
metadata: {name: web, namespace: hanzo}
spec:
  image: {repository: ghcr.io/hanzoai/web, tag: v1.0.0}
  replicas: 2
status: {phase: Running, readyReplicas: 2, availableReplicas: 2, observedGeneration: 1}
`)
	c.ApplyFleet(t, []*unstructured.Unstructured{app})
	stored, err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace("hanzo").Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deployment := func(tag string) *unstructured.Unstructured {
		d := clustertest.Object(t, fmt.Sprintf(`
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: hanzo
  ownerReferences: [{apiVersion: hanzo.ai/v1, kind: App, name: web, uid: %s, controller: true, blockOwnerDeletion: true}]
spec:
  replicas: 2
  selector: {matchLabels: {app.kubernetes.io/instance: web}}
  template:
    metadata: {labels: {app.kubernetes.io/instance: web}}
    spec:
      containers: [{name: web, image: "ghcr.io/hanzoai/web:%s"}]
`, stored.GetUID(), tag))
		return d
	}
	c.Apply(t, deployment("v1.0.0"))
	appState := func() (projection.HealthCode, projection.SyncCode) {
		a := rs.Store.Snapshot().Get("hanzo", "web")
		if a == nil {
			return "", ""
		}
		return a.Health.Status, a.Sync
	}
	c.WaitFor(t, 60*time.Second, func() (bool, error) {
		h, s := appState()
		return h == projection.HealthHealthy && s == projection.SyncSynced, nil
	})
	rs.TakeDeltas()

	// The operator's part, played by the test: declare v1.1.0, then roll
	// the Deployment to it and report the generation observed.
	app.Object["spec"].(map[string]any)["image"].(map[string]any)["tag"] = "v1.1.0"
	c.Apply(t, app)
	c.WaitFor(t, 20*time.Second, func() (bool, error) { _, s := appState(); return s == projection.SyncOutOfSync, nil })
	c.Apply(t, deployment("v1.1.0"))
	app.Object["status"] = map[string]any{"phase": "Running", "readyReplicas": int64(2), "availableReplicas": int64(2), "observedGeneration": int64(2)}
	c.Apply(t, app)
	c.WaitFor(t, 90*time.Second, func() (bool, error) {
		a := rs.Store.Snapshot().Get("hanzo", "web")
		return a != nil && a.Health.Status == projection.HealthHealthy && a.Sync == projection.SyncSynced && a.Running == "v1.1.0" && len(a.History) == 2, nil
	})

	var seq []string
	for _, d := range rs.TakeDeltas() {
		if d.New != nil && d.Key.Name == "web" && d.AppChanged {
			state := string(d.New.Health.Status) + "/" + string(d.New.Sync)
			if len(seq) == 0 || seq[len(seq)-1] != state {
				seq = append(seq, state)
			}
		}
	}
	t.Logf("health/sync sequence: %v", seq)
	iOut := slices.IndexFunc(seq, func(s string) bool { return strings.HasSuffix(s, "/OutOfSync") })
	iProg := slices.IndexFunc(seq, func(s string) bool { return strings.HasPrefix(s, "Progressing/") })
	if iOut < 0 || iProg < 0 || seq[len(seq)-1] != "Healthy/Synced" {
		t.Fatalf("sequence %v: want OutOfSync and Progressing on the way, ending Healthy/Synced", seq)
	}
	a := rs.Store.Snapshot().Get("hanzo", "web")
	if a.History[0].Revision != "v1.0.0" || a.History[1].Revision != "v1.1.0" || a.History[1].ID != 2 {
		t.Fatalf("history %+v: want revision 1 v1.0.0 then revision 2 v1.1.0", a.History)
	}

	// Check 3: delete the App; the garbage collector removes its children.
	if err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace("hanzo").Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(t, 60*time.Second, func() (bool, error) {
		if rs.Store.Snapshot().Get("hanzo", "web") != nil {
			return false, nil
		}
		pods, err := c.Clientset().CoreV1().Pods("hanzo").List(t.Context(), metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, err
	})
	rs.WaitConverged(t, c.Dynamic(), 30*time.Second)
	if n := rs.Store.Snapshot().Len(); n != 0 {
		t.Fatalf("%d rows remain after the App and its children were deleted", n)
	}
}

// Check 4: the API server restarts while deployd watches; afterwards the
// projection equals a fresh LIST, with no app duplicated or lost.
func TestWatchAPIServerRestart(t *testing.T) {
	c := clustertest.Start(t)
	rs := startReadSide(t, c.Config)
	c.ApplyFleet(t, clustertest.Manifests(t, fleetFixture))
	rs.WaitConverged(t, c.Dynamic(), 30*time.Second)
	before := rs.Store.Snapshot().Len()

	c.RestartAPIServer(t)
	// Changes after the restart: one app deleted, one created.
	if err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace("tenant-acme").Delete(t.Context(), "worker", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.ApplyFleet(t, []*unstructured.Unstructured{clustertest.Object(t, `
apiVersion: hanzo.ai/v1
kind: App
metadata: {name: billing, namespace: hanzo}
spec: {image: {repository: ghcr.io/hanzoai/billing, tag: v0.1.0}}
`)})
	rs.WaitConverged(t, c.Dynamic(), 60*time.Second)
	snap := rs.Store.Snapshot()
	if snap.Len() != before || snap.Get("hanzo", "billing") == nil || snap.Get("tenant-acme", "worker") != nil {
		t.Fatalf("after the restart: %d rows (want %d), billing present %v, worker present %v",
			snap.Len(), before, snap.Get("hanzo", "billing") != nil, snap.Get("tenant-acme", "worker") != nil)
	}
}

// Check 5: the watch is cut off, changes happen and etcd is compacted past
// the watch's revision (the API server restarted, so its watch cache cannot
// bridge the gap); when the connection is back the watch has expired, the
// watcher relists and converges, without a restart of deployd.
func TestWatchExpiredRelists(t *testing.T) {
	c := clustertest.Start(t)
	proxy := newProxy(t, c.URL())
	cfg := rest.CopyConfig(c.Config)
	cfg.Host = proxy.url
	lists := &listCounter{}
	cfg.WrapTransport = lists.wrap
	rs := startReadSide(t, cfg)
	c.ApplyFleet(t, clustertest.Manifests(t, fleetFixture))
	rs.WaitConverged(t, c.Dynamic(), 30*time.Second)
	appRelists := func() uint64 {
		for _, kc := range rs.Watcher.Counters() {
			if kc.Kind == projection.KindApp {
				return kc.Relists
			}
		}
		t.Fatal("no counters for the App kind")
		return 0
	}
	if n := appRelists(); n != 0 {
		t.Fatalf("%d App relists before the cut, want 0", n)
	}

	proxy.cut()
	if err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace("hanzo").Delete(t.Context(), "gateway", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.ApplyFleet(t, []*unstructured.Unstructured{clustertest.Object(t, `
apiVersion: hanzo.ai/v1
kind: App
metadata: {name: ledger, namespace: tenant-globex, labels: {hanzo.ai/org: globex}}
spec: {image: {repository: ghcr.io/globex/ledger, tag: v2.0.0}}
`)})
	for range 20 { // enough writes that the watch's revision is well behind
		c.ApplyFleet(t, []*unstructured.Unstructured{clustertest.Object(t, `
apiVersion: v1
kind: ConfigMap
metadata: {name: churn, namespace: hanzo}
data: {at: "`+time.Now().Format(time.RFC3339Nano)+`"}
`)})
	}
	// The API server's watch cache hides a compaction until it restarts:
	// compact, then restart it, so the watch's revision is gone for good.
	c.CompactEtcd(t)
	c.RestartAPIServer(t)
	if snap := rs.Store.Snapshot(); snap.Get("hanzo", "gateway") == nil {
		t.Fatal("the cut watch saw the deletion: the test proves nothing")
	}
	appLists := lists.count("/apis/hanzo.ai/v1/apps")
	proxy.restore()
	rs.WaitConverged(t, c.Dynamic(), 90*time.Second)
	if lists.count("/apis/hanzo.ai/v1/apps") == appLists {
		t.Fatal("the Apps were not listed again: the watch resumed, the relist path was not exercised")
	}
	if n := appRelists(); n == 0 {
		t.Error("the Apps were listed again, but the watcher counted no relist")
	}
	snap := rs.Store.Snapshot()
	if snap.Get("hanzo", "gateway") != nil || snap.Get("tenant-globex", "ledger") == nil {
		t.Fatalf("after relist: gateway present %v (want false), ledger present %v (want true)",
			snap.Get("hanzo", "gateway") != nil, snap.Get("tenant-globex", "ledger") != nil)
	}
	// The objects the App informer holds, as counted by its handler, are
	// the server's Apps: the relist's deletion of gateway was counted too.
	apps, err := c.Dynamic().Resource(projection.KindApp.GVR()).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, kc := range rs.Watcher.Counters() {
		if kc.Kind == projection.KindApp && kc.Objects != len(apps.Items) {
			t.Errorf("the App informer is counted holding %d objects, the server has %d Apps", kc.Objects, len(apps.Items))
		}
	}
}

// Check 6: the Middleware CRD installed after start is picked up without a
// restart, and sites appear.
func TestWatchOptionalKindAppears(t *testing.T) {
	c := clustertest.Start(t, clustertest.WithoutCRDs("middlewares.hanzo.ai"))
	rs := startReadSide(t, c.Config)
	c.ApplyFleet(t, []*unstructured.Unstructured{clustertest.Object(t, `
apiVersion: hanzo.ai/v1alpha1
kind: IngressRoute
metadata: {name: docs, namespace: tenant-acme}
spec:
  routes: [{match: "Host(`+"`docs.acme.dev`"+`)", kind: Rule, middlewares: [{name: docs}], services: [{name: static, port: 80}]}]
`)})
	rs.WaitConverged(t, c.Dynamic(), 30*time.Second)
	if rs.Store.Snapshot().Len() != 0 {
		t.Fatal("a site appeared before its Middleware CRD exists")
	}
	c.InstallCRD(t, "middlewares.hanzo.ai")
	c.ApplyFleet(t, []*unstructured.Unstructured{clustertest.Object(t, `
apiVersion: hanzo.ai/v1alpha1
kind: Middleware
metadata: {name: docs, namespace: tenant-acme, labels: {hanzo.ai/org: acme}}
spec: {staticFiles: {root: /sites/acme/docs}}
`)})
	c.WaitFor(t, 30*time.Second, func() (bool, error) {
		a := rs.Store.Snapshot().Get("tenant-acme", "docs")
		return a != nil && a.Health.Status == projection.HealthHealthy && slices.Equal(a.Endpoints, []string{"https://docs.acme.dev"}), nil
	})
}

// proxy is a TCP relay between the watcher and the API server that a test
// can cut (every connection closed, new ones refused) and restore.
type proxy struct {
	url    string
	target string
	ln     net.Listener

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
}

func newProxy(t *testing.T, apiURL string) *proxy {
	t.Helper()
	u, err := url.Parse(apiURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{url: "https://" + ln.Addr().String(), target: u.Host, ln: ln, conns: map[net.Conn]struct{}{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(conn)
		}
	}()
	t.Cleanup(func() { ln.Close(); p.cut(); <-done })
	return p
}

func (p *proxy) serve(in net.Conn) {
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		in.Close()
		return
	}
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		p.mu.Unlock()
		in.Close()
		return
	}
	p.conns[in], p.conns[out] = struct{}{}, struct{}{}
	p.mu.Unlock()
	go func() { io.Copy(out, in); out.Close() }()
	io.Copy(in, out)
	in.Close()
	p.mu.Lock()
	delete(p.conns, in)
	delete(p.conns, out)
	p.mu.Unlock()
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
}

func (p *proxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

var testLogOut io.Writer = io.Discard

// listCounter counts the LIST requests a client makes, by path: GETs of a
// collection that are not watches, and watches that stream the initial list
// (sendInitialEvents, how client-go lists now).
type listCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (l *listCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		q := r.URL.Query()
		if r.Method == http.MethodGet && (q.Get("watch") != "true" || q.Get("sendInitialEvents") == "true") {
			l.mu.Lock()
			if l.n == nil {
				l.n = map[string]int{}
			}
			l.n[r.URL.Path]++
			l.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

func (l *listCounter) count(path string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[path]
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
