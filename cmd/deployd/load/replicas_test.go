package load

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/engine"
	"github.com/hanzoai/deploy/engine/enginetest"
	"github.com/hanzoai/deploy/projection"
)

// The engine as a replicated service: several deployd processes with the
// engine on against one real API server (its audit log on) and one real
// git server. Only the holder of the engine's Lease writes; a kill -9 of it
// hands the engine to another within the Lease's duration; a rolling
// upgrade never takes a tag back nor deletes what a newer commit added;
// requests that reach a replica that does not lead are carried out by the
// one that does; a leader paused past its Lease writes nothing when it
// wakes; a fresh process makes a managed App's rollback a commit.

const (
	replicaApps     = 5
	replicaLease    = 3 * time.Second
	replicaInterval = 2 * time.Second
	webhookSecret   = "replica-webhook-secret"
	leaseNamespace  = "deployd"
)

var appsGVR = schema.GroupVersionResource{Group: "hanzo.ai", Version: "v1", Resource: "apps"}

// replicaApp is the App every commit k of the scenario may bump.
func replicaApp(i int, tag string) string {
	return fmt.Sprintf("apiVersion: hanzo.ai/v1\nkind: App\nmetadata:\n  name: rep-%d\n  namespace: hanzo\nspec:\n  image: {repository: ghcr.io/hanzoai/rep-%d, tag: %s}\n", i, i, tag)
}

// newReplicaSet starts an API server with its audit log, the namespaces,
// and a git server holding the fleet's first commit; no replica yet.
func newReplicaSet(tb testing.TB, lease time.Duration) *replicaSet {
	tb.Helper()
	c := clustertest.Start(tb, clustertest.WithAuditLog())
	for _, ns := range []string{"hanzo", leaseNamespace} {
		if _, err := c.Clientset().CoreV1().Namespaces().Create(tb.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
	repo := enginetest.NewServer(tb).NewRepo(tb, "fleet")
	files := map[string]string{}
	for i := range replicaApps {
		files[fmt.Sprintf("crs/rep-%d.yaml", i)] = replicaApp(i, "v1.0.0")
	}
	repo.Commit(tb, "the fleet", files)
	rs := &replicaSet{tb: tb, c: c, bin: buildDeployd(tb), id: startIdentity(tb), repo: repo, lease: lease}
	var peers []string
	for range replicaSlots {
		tap := newPeerTap(tb)
		rs.taps = append(rs.taps, tap)
		peers = append(peers, tap.URL)
	}
	rs.peers = strings.Join(peers, ",")
	return rs
}

// replicaSlots is how many replicas a replica set starts at most: each
// has its place among the peers from the start.
const replicaSlots = 16

// replicaCookieKey is the key the replicas share (DEPLOY_COOKIE_KEY): it
// seals their sessions and signs their forwards.
const replicaCookieKey = "3f1c5a7e9b2d4f6081a3c5e7092b4d6f8a1c3e5f7092b4d6e8a0c2e4f6081a3c"

type replicaSet struct {
	tb    testing.TB
	c     *clustertest.Cluster
	bin   string
	id    *identity
	repo  *enginetest.Repo
	lease time.Duration // replicaLease when zero
	n     int           // replicas started so far (names their cache folders)
	// taps are the replicas' places as their peers reach them, one per
	// replica started, in order: a relay of the test's that keeps what
	// each forward carried; peers lists them all (DEPLOY_PEERS).
	taps  []*peerTap
	peers string
}

func (rs *replicaSet) start(extra ...string) *deployd {
	rs.tb.Helper()
	rs.n++
	if rs.n > len(rs.taps) {
		rs.tb.Fatalf("a replica set starts at most %d replicas", len(rs.taps))
	}
	tap := rs.taps[rs.n-1]
	addr := freeAddr(rs.tb)
	tap.relayTo(addr)
	lease := rs.lease
	if lease == 0 {
		lease = replicaLease
	}
	env := append([]string{
		"DEPLOY_COOKIE_KEY=" + replicaCookieKey, "DEPLOY_PEERS=" + rs.peers, "DEPLOYD_ADVERTISE_URL=" + tap.URL,
		"LOG_LEVEL=info",
		"DEPLOY_ENGINE_ENABLED=true", "DEPLOY_ENGINE_REPO=" + rs.repo.URL, "DEPLOY_ENGINE_PATH=crs",
		"DEPLOY_ENGINE_INTERVAL=" + replicaInterval.String(), "DEPLOY_ENGINE_PRUNE=true",
		"DEPLOY_ENGINE_PRUNE_MAX=50", "DEPLOY_ENGINE_PRUNE_MAX_RATIO=1",
		"DEPLOY_ENGINE_LEASE_NAMESPACE=" + leaseNamespace, "DEPLOY_ENGINE_LEASE_DURATION=" + lease.String(),
		"DEPLOY_ENGINE_WEBHOOK_SECRET=" + webhookSecret,
		"DEPLOY_ENGINE_CACHE_DIR=" + filepath.Join(rs.tb.TempDir(), fmt.Sprintf("cache-%d", rs.n)),
	}, extra...)
	d := startDeploydAt(rs.tb, addr, rs.bin, rs.c.Kubeconfig, rs.id, env...)
	d.Peer = tap.URL
	return d
}

// wire is every byte the replicas' peers sent them.
func (rs *replicaSet) wire() string {
	var b strings.Builder
	for _, t := range rs.taps {
		b.WriteString(t.String())
	}
	return b.String()
}

// peerTap is a TCP relay in front of one replica, where its peers reach
// it: it keeps every byte sent through it.
type peerTap struct {
	URL string
	mu  sync.Mutex
	to  string
	buf bytes.Buffer
}

func newPeerTap(tb testing.TB) *peerTap {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	t := &peerTap{URL: "http://" + ln.Addr().String()}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go t.relay(in)
		}
	}()
	return t
}

func (t *peerTap) relayTo(addr string) {
	t.mu.Lock()
	t.to = addr
	t.mu.Unlock()
}

func (t *peerTap) relay(in net.Conn) {
	defer in.Close()
	t.mu.Lock()
	to := t.to
	t.mu.Unlock()
	out, err := net.DialTimeout("tcp", to, time.Second)
	if err != nil {
		return
	}
	defer out.Close()
	go func() { _, _ = io.Copy(in, out); in.Close() }()
	_, _ = io.Copy(out, io.TeeReader(in, t))
}

func (t *peerTap) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.Write(b)
}

func (t *peerTap) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}

// requests are the requests sent through the tap, parsed.
func (t *peerTap) requests(tb testing.TB) []sentRequest {
	tb.Helper()
	var out []sentRequest
	r := bufio.NewReader(strings.NewReader(t.String()))
	for {
		req, err := http.ReadRequest(r)
		if err != nil {
			return out
		}
		body, _ := io.ReadAll(req.Body)
		out = append(out, sentRequest{method: req.Method, target: req.RequestURI, header: req.Header, body: body})
	}
}

// sentRequest is one request as a tap saw it.
type sentRequest struct {
	method, target string
	header         http.Header
	body           []byte
}

// leaderRecord is the leader as the engine's state ConfigMap records it.
func (rs *replicaSet) leaderRecord() (url, identity string) {
	cm, err := rs.c.Clientset().CoreV1().ConfigMaps(leaseNamespace).Get(rs.tb.Context(), engine.LeaseName("universe"), metav1.GetOptions{})
	if err != nil {
		return "", ""
	}
	var st struct {
		Leader struct{ URL, Identity string }
	}
	_ = json.Unmarshal([]byte(cm.Data["status.json"]), &st)
	return st.Leader.URL, st.Leader.Identity
}

func (rs *replicaSet) leaderURL() string {
	u, _ := rs.leaderRecord()
	return u
}

func (rs *replicaSet) leaderIdentity() string {
	_, id := rs.leaderRecord()
	return id
}

// leader waits until one of ds leads (the state names it) and answers it.
func (rs *replicaSet) leader(ds []*deployd, within time.Duration) *deployd {
	rs.tb.Helper()
	var found *deployd
	rs.c.WaitFor(rs.tb, within, func() (bool, error) {
		u := rs.leaderURL()
		for _, d := range ds {
			if d.Peer == u || d.Base == u {
				found = d
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// term is one holding of the Lease as the test's watch saw it.
type leaseTerm struct {
	holder   string
	acquired time.Time
}

// watchLease records every holder of the engine's Lease with the time it
// acquired it.
func watchLease(t *testing.T, c *clustertest.Cluster) func() []leaseTerm {
	var mu sync.Mutex
	seen := map[string]leaseTerm{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-t.Context().Done():
				return
			case <-tick.C:
			}
			l, err := c.Clientset().CoordinationV1().Leases(leaseNamespace).Get(t.Context(), engine.LeaseName("universe"), metav1.GetOptions{})
			if err != nil || l.Spec.HolderIdentity == nil || l.Spec.AcquireTime == nil {
				continue
			}
			term := leaseTerm{holder: *l.Spec.HolderIdentity, acquired: l.Spec.AcquireTime.Time}
			mu.Lock()
			seen[term.holder+"@"+term.acquired.String()] = term
			mu.Unlock()
		}
	}()
	return func() []leaseTerm {
		mu.Lock()
		defer mu.Unlock()
		out := make([]leaseTerm, 0, len(seen))
		for _, v := range seen {
			out = append(out, v)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].acquired.Before(out[j].acquired) })
		return out
	}
}

// holderAt is who held the Lease at time at, by the terms seen.
func holderAt(terms []leaseTerm, at time.Time) string {
	h := ""
	for _, tm := range terms {
		if !tm.acquired.After(at) {
			h = tm.holder
		}
	}
	return h
}

var tagNumber = regexp.MustCompile(`^v1\.0\.(\d+)$`)

// sampleTags lists every App every 100 ms until stop is closed, and
// fails the test when a tag goes back or an App once seen disappears; it
// answers how many lists it read once it has stopped.
func sampleTags(t *testing.T, c *clustertest.Cluster, stop <-chan struct{}) (samples func() int) {
	n := 0
	last := map[string]int{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			list, err := c.Dynamic().Resource(appsGVR).Namespace("hanzo").List(t.Context(), metav1.ListOptions{})
			if err != nil {
				continue
			}
			n++
			now := map[string]bool{}
			for _, u := range list.Items {
				now[u.GetName()] = true
				tag, _, _ := unstructured.NestedString(u.Object, "spec", "image", "tag")
				m := tagNumber.FindStringSubmatch(tag)
				if m == nil {
					continue // a drift the test made by hand
				}
				k, _ := strconv.Atoi(m[1])
				if prev, ok := last[u.GetName()]; ok && k < prev {
					t.Errorf("App %s went back from v1.0.%d to v1.0.%d", u.GetName(), prev, k)
				}
				last[u.GetName()] = k
			}
			for name := range last {
				if !now[name] {
					t.Errorf("App %s, added by a commit, was deleted", name)
					delete(last, name)
				}
			}
		}
	}()
	return func() int { <-done; return n }
}

func TestEngineReplicas(t *testing.T) {
	rs := newReplicaSet(t, replicaLease)
	c, repo := rs.c, rs.repo
	admin := rs.id.token(t, superAdmin, time.Hour)

	terms := watchLease(t, c)
	ds := []*deployd{rs.start(), rs.start(), rs.start()}
	lead := rs.leader(ds, 30*time.Second)
	c.WaitFor(t, 30*time.Second, func() (bool, error) {
		n, _ := c.Dynamic().Resource(appsGVR).Namespace("hanzo").List(t.Context(), metav1.ListOptions{})
		return n != nil && len(n.Items) == replicaApps, nil
	})

	t.Run("every replica reports the same engine state", func(t *testing.T) {
		c.WaitFor(t, 10*time.Second, func() (bool, error) {
			var first string
			for i, d := range ds {
				st := gitopsEngine(t, d, admin)
				b, _ := json.Marshal(st)
				if i == 0 {
					first = string(b)
				} else if string(b) != first {
					return false, nil
				}
				if l, _ := st["leader"].(map[string]any); l == nil || l["identity"] == "" {
					return false, nil
				}
				// The next interval run is announced after the last one began.
				next, _ := st["nextRunAt"].(string)
				last, _ := st["lastRun"].(map[string]any)
				if last == nil || next <= fmt.Sprint(last["startedAt"]) {
					return false, nil
				}
			}
			return true, nil
		})
	})

	t.Run("every replica diffs against the same desired state", func(t *testing.T) {
		var bodies []string
		c.WaitFor(t, 15*time.Second, func() (bool, error) {
			bodies = bodies[:0]
			for _, d := range ds {
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, d.Base+"/api/v1/applications/rep-1/managed-resources?appNamespace=hanzo", nil)
				req.Header.Set("Authorization", "Bearer "+admin)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return false, err
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"targetState":"{`) {
					return false, nil // this replica has no view of git yet
				}
				bodies = append(bodies, string(b))
			}
			for _, b := range bodies[1:] {
				if b != bodies[0] {
					return false, nil
				}
			}
			return true, nil
		})
	})

	t.Run("a reconcile and a webhook sent to a replica that does not lead", func(t *testing.T) {
		var follower *deployd
		for _, d := range ds {
			if d != lead {
				follower = d
				break
			}
		}
		requested := strings.Count(lead.log.String(), `"trigger":"request"`)
		resp, body := post(t, follower.Base+"/v1/deploy/reconcile", admin, nil, "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("reconcile on a follower: %d %s", resp.StatusCode, body)
		}
		var rep map[string]json.RawMessage
		if err := json.Unmarshal(body, &rep); err != nil {
			t.Fatal(err)
		}
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range rep {
				if !yield(k) {
					return
				}
			}
		})
		if want := []string{"declared", "failed", "instance", "prune", "pruned", "results", "revision", "source", "synced"}; !slices.Equal(keys, want) {
			t.Errorf("the forwarded answer's keys %v, want the report's %v", keys, want)
		}
		if n := strings.Count(lead.log.String(), `"trigger":"request"`); n != requested+1 {
			t.Errorf("the leader ran %d runs for the forwarded request, want exactly one", n-requested)
		}
		for _, d := range ds {
			if d != lead && strings.Contains(d.log.String(), `"msg":"engine run"`) {
				t.Errorf("a follower (%s) ran the engine:\n%s", d.Base, tail(d.log.String(), 5))
			}
		}
		payload := []byte(`{"ref":"refs/heads/main","after":"` + repo.Head(t) + `"}`)
		mac := hmac.New(sha256.New, []byte(webhookSecret))
		mac.Write(payload)
		resp, body = post(t, follower.Base+"/v1/deploy/webhook/git", "", payload, "sha256="+hex.EncodeToString(mac.Sum(nil)))
		if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(body), `"queued":true`) {
			t.Fatalf("a signed webhook on a follower: %d %s", resp.StatusCode, body)
		}
		c.WaitFor(t, 10*time.Second, func() (bool, error) {
			return strings.Contains(lead.log.String(), `"trigger":"webhook"`), nil
		})
		time.Sleep(replicaInterval)
		if n := strings.Count(lead.log.String(), `"trigger":"webhook"`); n != 1 {
			t.Errorf("the leader ran %d runs for one webhook, want exactly one", n)
		}
		for _, d := range ds {
			if d != lead && strings.Contains(d.log.String(), `"trigger":"webhook"`) {
				t.Errorf("a follower (%s) ran the webhook's run", d.Base)
			}
		}
	})

	t.Run("forwards go to peers, carry no credential, and are carried out once", func(t *testing.T) {
		checkForwards(t, rs, ds, lead, admin)
	})

	t.Run("a leader published outside the peers is refused", func(t *testing.T) {
		checkOutsideLeader(t, rs, ds, lead, admin)
	})

	t.Run("a delivery sent to every replica runs once", func(t *testing.T) {
		proxy := newRRProxy(t, ds...)
		proxy.WaitReady(t, 10*time.Second)
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		payload := []byte(`{"ref":"refs/heads/main","after":"` + repo.Head(t) + `"}`)
		mac := hmac.New(sha256.New, []byte(webhookSecret))
		mac.Write(payload)
		ran := strings.Count(lead.log.String(), `"trigger":"webhook"`)
		codes := map[int]int{}
		for range 2 * len(ds) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, proxy.Base+"/v1/deploy/webhook/git", bytes.NewReader(payload))
			req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
			req.Header.Set("X-GitHub-Event", "push")
			req.Header.Set("X-GitHub-Delivery", "5e1d2c3b-delivery-once")
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			codes[resp.StatusCode]++
			if resp.StatusCode == http.StatusOK && !strings.Contains(string(b), `"duplicate":true`) {
				t.Errorf("a redelivery's answer: %s", b)
			}
		}
		if codes[http.StatusAccepted] != 1 || codes[http.StatusOK] != 2*len(ds)-1 {
			t.Errorf("answers to one delivery sent %d times: %v, want one 202 and the rest 200", 2*len(ds), codes)
		}
		if spread := proxy.Spread(); slices.Contains(spread, 0) {
			t.Errorf("the proxy did not reach every replica: %v", spread)
		}
		c.WaitFor(t, 10*time.Second, func() (bool, error) {
			return strings.Count(lead.log.String(), `"trigger":"webhook"`) > ran, nil
		})
		time.Sleep(replicaInterval)
		if n := strings.Count(lead.log.String(), `"trigger":"webhook"`) - ran; n != 1 {
			t.Errorf("the leader ran %d runs for one delivery sent %d times, want one", n, 2*len(ds))
		}
	})

	t.Run("a suspension made through any replica holds on every one", func(t *testing.T) {
		follower := ds[0]
		if follower == lead {
			follower = ds[1]
		}
		resp, body := post(t, follower.Base+"/v1/deploy/gitops/suspend", admin, nil, "")
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"state":"suspended"`) {
			t.Fatalf("suspend through a follower: %d %s", resp.StatusCode, body)
		}
		c.WaitFor(t, 10*time.Second, func() (bool, error) {
			for _, d := range ds {
				if st := gitopsEngine(t, d, admin); st["state"] != "suspended" {
					return false, nil
				}
			}
			return true, nil
		})
		for _, d := range ds {
			resp, body := post(t, d.Base+"/v1/deploy/reconcile", admin, nil, "")
			if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "suspended (by root") {
				t.Errorf("reconcile on %s while suspended: %d %s", d.Base, resp.StatusCode, body)
			}
		}
		if resp, body := post(t, ds[2].Base+"/v1/deploy/gitops/resume", admin, nil, ""); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"state":"ok"`) {
			t.Fatalf("resume: %d %s", resp.StatusCode, body)
		}
	})

	t.Run("commits, a kill -9 of the leader and a rolling upgrade", func(t *testing.T) {
		stop := make(chan struct{})
		samples := sampleTags(t, c, stop)
		start := time.Now()
		commits, added := 0, 0
		killed, paused, upgraded, drained := false, false, false, false
		// changes counts the desired states each App went through: its
		// create, every bump, and the drift made by hand.
		changes := map[string]int{}
		for i := range replicaApps {
			changes[fmt.Sprintf("rep-%d", i)] = 1
		}
		var healAfterKill time.Duration
		for time.Since(start) < 60*time.Second {
			commits++
			i := commits % replicaApps
			changes[fmt.Sprintf("rep-%d", i)]++
			f := map[string]string{fmt.Sprintf("crs/rep-%d.yaml", i): replicaApp(i, fmt.Sprintf("v1.0.%d", commits))}
			if commits%3 == 0 {
				added++
				changes[fmt.Sprintf("add-%d", added)]++
				f[fmt.Sprintf("crs/add-%d.yaml", added)] = strings.ReplaceAll(replicaApp(0, fmt.Sprintf("v1.0.%d", commits)), "rep-0", fmt.Sprintf("add-%d", added))
			}
			repo.Commit(t, fmt.Sprintf("commit %d", commits), f)
			switch {
			case !killed && time.Since(start) > 10*time.Second:
				killed = true
				old := lead
				old.kill()
				killedAt := time.Now()
				changes["rep-0"]++
				patch := []byte(`{"spec":{"image":{"tag":"drift-by-hand"}}}`)
				if _, err := c.Dynamic().Resource(appsGVR).Namespace("hanzo").Patch(t.Context(), "rep-0", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
				rest := slices.DeleteFunc(slices.Clone(ds), func(d *deployd) bool { return d == old })
				lead = rs.leader(rest, replicaLease+5*time.Second)
				c.WaitFor(t, replicaLease+replicaInterval+10*time.Second, func() (bool, error) {
					u, err := c.Dynamic().Resource(appsGVR).Namespace("hanzo").Get(t.Context(), "rep-0", metav1.GetOptions{})
					if err != nil {
						return false, nil
					}
					tag, _, _ := unstructured.NestedString(u.Object, "spec", "image", "tag")
					return tag != "drift-by-hand", nil
				})
				healAfterKill = time.Since(killedAt)
				ds = rest
			case killed && !paused && time.Since(start) > 18*time.Second:
				// A leader paused past its Lease (a stopped container): once
				// it runs again it writes nothing while another leads.
				paused = true
				old := lead
				if err := old.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				lead = rs.leader(slices.DeleteFunc(slices.Clone(ds), func(d *deployd) bool { return d == old }), replicaLease+5*time.Second)
				time.Sleep(time.Second)
				if err := old.cmd.Process.Signal(syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
			case paused && !upgraded && time.Since(start) > 25*time.Second:
				upgraded = true // the new pod of a rolling upgrade, beside the old ones
				ds = append(ds, rs.start())
			case upgraded && !drained && time.Since(start) > 55*time.Second:
				drained = true // the old leader's pod ends (SIGTERM)
				old := lead
				old.stop()
				ds = slices.DeleteFunc(ds, func(d *deployd) bool { return d == old })
				lead = rs.leader(ds, replicaLease+5*time.Second)
			}
			time.Sleep(2 * time.Second)
		}
		// Let the last commit land.
		head := repo.Head(t)
		c.WaitFor(t, 20*time.Second, func() (bool, error) {
			u, err := c.Dynamic().Resource(appsGVR).Namespace("hanzo").Get(t.Context(), fmt.Sprintf("rep-%d", commits%replicaApps), metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			return u.GetAnnotations()[projection.AnnotationEngineRevision] == head, nil
		})
		close(stop)
		t.Logf("%d commits (%d Apps added), %d samples of every tag; the kill -9's drift healed %v after it", commits, added, samples(), healAfterKill.Round(time.Millisecond))

		// Every App write and delete came from the Lease's holder of the
		// moment, and no desired state was written twice: an App is
		// written at most once per change (changes that land while no
		// replica leads coalesce, as they do with one replica).
		ts := terms()
		writes, deletes := map[string]int{}, 0
		for _, ev := range c.AuditEvents(t) {
			if ev.Group != "hanzo.ai" || ev.Resource != "apps" || ev.Code >= 300 {
				continue
			}
			id, ok := strings.CutPrefix(ev.UserAgent, "deployd-engine/")
			if !ok {
				continue
			}
			if h := holderAt(ts, ev.Received); h != id {
				t.Errorf("%s %s/%s at %s by %s while the Lease was %s's (terms %v)", ev.Verb, ev.Namespace, ev.Name, ev.Received.Format(time.RFC3339Nano), id, h, ts)
			}
			switch ev.Verb {
			case "patch", "create", "update":
				writes[ev.Name]++
			case "delete":
				deletes++
			}
		}
		total, want := 0, 0
		for name, n := range changes {
			total += writes[name]
			want += n
			if writes[name] > n || writes[name] == 0 {
				t.Errorf("App %s was written %d times for %d changes", name, writes[name], n)
			}
		}
		t.Logf("the engine wrote Apps %d times for %d changes", total, want)
		if deletes != 0 {
			t.Errorf("the engine deleted %d Apps; the repository dropped none", deletes)
		}
		if len(ts) < 3 {
			t.Errorf("Lease terms seen: %v, want the first leader, the one after the kill and the one after the upgrade", ts)
		}
	})

	t.Run("a fresh process makes a managed App's rollback a commit", func(t *testing.T) {
		for _, d := range ds {
			d.stop()
		}
		fresh := rs.start("DEPLOY_ENGINE_INTERVAL=0", "DEPLOY_ENGINE_PUSH=true")
		rs.leader([]*deployd{fresh}, replicaLease+10*time.Second)
		before := time.Now()
		head := repo.Head(t)
		resp, body := post(t, fresh.Base+"/v1/deploy/rep-1/rollback?namespace=hanzo", admin, []byte(`{"tag":"v1.0.1"}`), "")
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"commit":`) {
			t.Fatalf("rollback on a fresh process: %d %s", resp.StatusCode, body)
		}
		log := strings.Fields(gitOut(t, repo.Work, "log", "--format=%H %an", head+"..origin/main"))
		if len(log) != 2 || log[1] != "root" {
			t.Fatalf("commits after the rollback: %v, want one by root", log)
		}
		c.WaitFor(t, 20*time.Second, func() (bool, error) {
			u, err := c.Dynamic().Resource(appsGVR).Namespace("hanzo").Get(t.Context(), "rep-1", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			tag, _, _ := unstructured.NestedString(u.Object, "spec", "image", "tag")
			return tag == "v1.0.1", nil
		})
		for _, ev := range c.AuditEvents(t) {
			if ev.Resource == "apps" && ev.Name == "rep-1" && ev.Verb == "patch" && !ev.Received.Before(before) && !strings.HasPrefix(ev.UserAgent, "deployd-engine/") {
				t.Errorf("a direct patch of rep-1 by %q at %s: the rollback must be a commit", ev.UserAgent, ev.Received)
			}
		}
		fresh.stop()
		off := rs.start("DEPLOY_ENGINE_INTERVAL=0", "DEPLOY_ENGINE_PUSH=false")
		rs.leader([]*deployd{off}, replicaLease+10*time.Second)
		resp, body = post(t, off.Base+"/v1/deploy/rep-1/rollback?namespace=hanzo", admin, []byte(`{"tag":"v1.0.0"}`), "")
		if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "declared in git") {
			t.Fatalf("rollback with push off: %d %s, want 409", resp.StatusCode, body)
		}
	})
}

// checkForwards: the forwards made so far reached the leader with no
// credential of the caller on the wire, and the leader audited them as
// the caller's; a forward replayed from the wire, one signed with another
// key, a stale one and one with no assertion are refused by the leader and
// run nothing.
func checkForwards(t *testing.T, rs *replicaSet, ds []*deployd, lead *deployd, admin string) {
	wire := rs.wire()
	if !strings.Contains(wire, "X-Deployd-Forward: v1.") {
		t.Fatalf("no forward was seen on the wire")
	}
	for _, secret := range []string{admin, "Bearer ", "Authorization:", "Cookie:"} {
		if strings.Contains(wire, secret) {
			t.Errorf("a forward carried %q on the wire", strings.TrimSpace(secret[:min(len(secret), 12)]))
		}
	}
	audited := false
	for _, line := range strings.Split(lead.log.String(), "\n") {
		if strings.Contains(line, `"msg":"audit"`) && strings.Contains(line, `"route":"/v1/deploy/reconcile"`) && strings.Contains(line, `"forwardedBy":"`) {
			audited = true
			if !strings.Contains(line, `"user":"root"`) || !strings.Contains(line, `"status":200`) {
				t.Errorf("the leader's audit line of a forwarded reconcile: %s", line)
			}
		}
	}
	if !audited {
		t.Errorf("the leader wrote no audit line of a forwarded reconcile:\n%s", tail(lead.log.String(), 10))
	}

	// A dry run forwarded now, to replay from the wire within its window.
	const target = "/v1/deploy/reconcile?dryRun=true"
	var follower *deployd
	for _, d := range ds {
		if d != lead {
			follower = d
		}
	}
	if resp, body := post(t, follower.Base+target, admin, nil, ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("a dry run on a follower: %d %s", resp.StatusCode, body)
	}
	var sent *sentRequest
	for _, tap := range rs.taps {
		for _, r := range tap.requests(t) {
			if r.method == http.MethodPost && r.target == target {
				sent = &r
			}
		}
	}
	if sent == nil {
		t.Fatalf("the forwarded dry run is not on the wire")
	}
	key, err := auth.ParseCookieKey(replicaCookieKey)
	if err != nil {
		t.Fatal(err)
	}
	peer, _ := auth.NewPeering(key, "a-replica", nil)
	other, _ := auth.NewPeering(bytes.Repeat([]byte{1}, 32), "a-replica", nil)
	root := &auth.Principal{Subject: "u-root", Username: "root", Org: "admin", SuperAdmin: true, Expiry: time.Now().Add(time.Hour)}
	to := rs.leaderIdentity()
	bad, _, _ := other.Sign(to, http.MethodPost, target, nil, root)
	stale := peer.SignForward(auth.Forward{From: "a-replica", To: to, Method: http.MethodPost, Target: target, BodySHA256: auth.BodyDigest(nil),
		IssuedAt: time.Now().Add(-2 * time.Minute).UnixMilli(), Nonce: "stale-nonce", Principal: auth.ForwardOf(root)})
	dryRuns := func() (n int) {
		for _, line := range strings.Split(lead.log.String(), "\n") {
			if strings.Contains(line, `"msg":"engine run"`) && strings.Contains(line, `"trigger":"request"`) && strings.Contains(line, `"dryRun":true`) {
				n++
			}
		}
		return n
	}
	runs := dryRuns()
	for _, tc := range []struct {
		name   string
		header http.Header
		why    string
	}{
		{"replayed from the wire", sent.header, "already used"},
		{"signed with another key", http.Header{"X-Deployd-Forward": {bad}}, "signature does not verify"},
		{"stale", http.Header{"X-Deployd-Forward": {stale}}, "more than 30s"},
		{"no assertion", http.Header{"X-Deployd-Forwarded-By": {"a-replica"}}, "not of this deployd's form"},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, lead.Base+target, bytes.NewReader(sent.body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range tc.header {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), tc.why) {
			t.Errorf("a forward %s: %d %s, want 401 saying %q", tc.name, resp.StatusCode, b, tc.why)
		}
	}
	if n := dryRuns(); n != runs {
		t.Errorf("refused forwards ran the engine %d times", n-runs)
	}
}

// checkOutsideLeader: with the engine's state ConfigMap rewritten (by
// whoever may update it) to name an outside listener as the leader's URL,
// a follower refuses to forward (503, the reason) and nothing reaches the
// listener. The test keeps rewriting it, as an attacker would, while the
// leader's runs put its own URL back.
func checkOutsideLeader(t *testing.T, rs *replicaSet, ds []*deployd, lead *deployd, admin string) {
	var follower *deployd
	for _, d := range ds {
		if d != lead {
			follower = d
			break
		}
	}
	var reached atomic.Int64
	outside := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer outside.Close()
	cms := rs.c.Clientset().CoreV1().ConfigMaps(leaseNamespace)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			cm, err := cms.Get(t.Context(), engine.LeaseName("universe"), metav1.GetOptions{})
			if err != nil {
				continue
			}
			var st map[string]any
			if json.Unmarshal([]byte(cm.Data["status.json"]), &st) != nil {
				continue
			}
			l, _ := st["leader"].(map[string]any)
			if l == nil || l["url"] == outside.URL {
				continue
			}
			l["url"] = outside.URL
			b, _ := json.Marshal(st)
			cm.Data["status.json"] = string(b)
			_, _ = cms.Update(t.Context(), cm, metav1.UpdateOptions{})
		}
	}()
	refused := 0
	deadline := time.Now().Add(20 * time.Second)
	for refused < 3 && time.Now().Before(deadline) {
		resp, body := post(t, follower.Base+"/v1/deploy/reconcile?dryRun=true", admin, nil, "")
		if resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(body), "not one of this deployd's peers") {
			refused++
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	<-done
	if refused < 3 {
		t.Errorf("the follower refused %d forwards to a leader published outside the peers, want 3", refused)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("%d requests reached the outside listener", n)
	}
	if !strings.Contains(follower.log.String(), "its published URL is not a peer") {
		t.Errorf("the follower did not log the refusal:\n%s", tail(follower.log.String(), 5))
	}
	// The leader's next run publishes its own URL again.
	rs.c.WaitFor(t, 3*replicaInterval+5*time.Second, func() (bool, error) { return rs.leaderURL() == lead.Peer, nil })
}

// gitOut runs git in dir (after fetching origin) and answers its output.
func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	if out, err := exec.Command("git", "-C", dir, "fetch", "--quiet", "origin").CombinedOutput(); err != nil {
		t.Fatalf("git fetch: %v\n%s", err, out)
	}
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// gitopsEngine is GET /v1/deploy/gitops's engine object.
func gitopsEngine(t *testing.T, d *deployd, token string) map[string]any {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, d.Base+"/v1/deploy/gitops", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Engine map[string]any `json:"engine"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return body.Engine
}

// post sends a POST with a bearer token (when set), a body and, when sig is
// set, GitHub's signature header of a push event.
func post(t *testing.T, url, token string, body []byte, sig string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if sig != "" {
		req.Header.Set("X-Hub-Signature-256", sig)
		req.Header.Set("X-GitHub-Event", "push")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// BenchmarkEngineReplicas measures the engine as a replicated service
// (make bench-engine): the API server's App writes per change with one
// replica and with three (they must be equal: only the leader writes), and
// the fail-over time, kill -9 of the leader to the first App write of the
// new one, median of 5, with the Lease's default timing (15 s) unless
// DEPLOYD_BENCH_LEASE_SECONDS says otherwise.
func BenchmarkEngineReplicas(b *testing.B) {
	lease := 15 * time.Second
	if v := clustertest.EnvInt(b, "DEPLOYD_BENCH_LEASE_SECONDS", 15); v > 0 {
		lease = time.Duration(v) * time.Second
	}
	for range b.N {
		rs := newReplicaSet(b, lease)
		c, repo := rs.c, rs.repo
		k := 0
		bump := func() {
			k++
			repo.Commit(b, fmt.Sprintf("bump %d", k), map[string]string{fmt.Sprintf("crs/rep-%d.yaml", k%replicaApps): replicaApp(k%replicaApps, fmt.Sprintf("v1.0.%d", k))})
		}
		applied := func(within time.Duration) {
			head := repo.Head(b)
			c.WaitFor(b, within, func() (bool, error) {
				u, err := c.Dynamic().Resource(appsGVR).Namespace("hanzo").Get(b.Context(), fmt.Sprintf("rep-%d", k%replicaApps), metav1.GetOptions{})
				return err == nil && u.GetAnnotations()[projection.AnnotationEngineRevision] == head, nil
			})
		}
		engineWrites := func(from, to time.Time, except string) (n int, first time.Time) {
			for _, ev := range c.AuditEvents(b) {
				id, ok := strings.CutPrefix(ev.UserAgent, "deployd-engine/")
				if !ok || id == except || ev.Resource != "apps" || ev.Code >= 300 || ev.Received.Before(from) || ev.Received.After(to) {
					continue
				}
				if n == 0 || ev.Received.Before(first) {
					first = ev.Received
				}
				n++
			}
			return n, first
		}
		const changes = 10
		perChange := func(replicas int) float64 {
			var ds []*deployd
			for range replicas {
				ds = append(ds, rs.start())
			}
			rs.leader(ds, lease+10*time.Second)
			applied(30 * time.Second)
			from := time.Now()
			for range changes {
				bump()
				applied(30 * time.Second)
			}
			n, _ := engineWrites(from, time.Now(), "")
			for _, d := range ds {
				d.stop()
			}
			return float64(n) / changes
		}
		one := perChange(1)
		three := perChange(3)

		ds := []*deployd{rs.start(), rs.start(), rs.start()}
		var took []time.Duration
		for range 5 {
			lead := rs.leader(ds, 2*lease+10*time.Second)
			id := rs.leaderIdentity()
			lead.kill()
			killed := time.Now()
			bump()
			applied(2*lease + 30*time.Second)
			_, first := engineWrites(killed, time.Now(), id)
			took = append(took, first.Sub(killed))
			ds = slices.DeleteFunc(ds, func(d *deployd) bool { return d == lead })
			ds = append(ds, rs.start())
		}
		slices.Sort(took)
		b.ReportMetric(took[len(took)/2].Seconds(), "failover-s")
		b.ReportMetric(one, "writes/change(1)")
		b.ReportMetric(three, "writes/change(3)")
		b.Logf("lease %s: fail-over %v (median of 5: %v); App writes per change: %.2f with 1 replica, %.2f with 3", lease, took, took[len(took)/2], one, three)
		if one != three {
			b.Errorf("writes per change differ: %.2f with 1 replica, %.2f with 3", one, three)
		}
	}
}
