package handlers

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/gitops"
)

// peerKey is the cookie key the replicas of these tests share.
var peerKey = bytes.Repeat([]byte{9}, 32)

func newPeering(t testing.TB, key []byte, self string) *auth.Peering {
	t.Helper()
	p, err := auth.NewPeering(key, self, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// wireTap is a TCP relay in front of a replica that keeps every byte sent
// to it: what a forward carries on the wire.
type wireTap struct {
	URL string
	mu  sync.Mutex
	buf bytes.Buffer
	n   int // connections
}

func newWireTap(t *testing.T, to string) *wireTap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &wireTap{URL: "http://" + ln.Addr().String()}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			w.mu.Lock()
			w.n++
			w.mu.Unlock()
			go func() {
				defer in.Close()
				out, err := net.Dial("tcp", strings.TrimPrefix(to, "http://"))
				if err != nil {
					return
				}
				defer out.Close()
				go func() { _, _ = io.Copy(in, out); in.Close() }()
				_, _ = io.Copy(out, io.TeeReader(in, w))
			}()
		}
	}()
	return w
}

func (w *wireTap) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(b)
}

func (w *wireTap) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func (w *wireTap) conns() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// peerPair is two replicas: a follower whose engine names the leader (at
// the address of a tap in front of it), and the leader, whose engine runs
// here; both share the peer key and list the tap as their peer.
type peerPair struct {
	follower, leader *serverEnv
	ff, lf           *fakeEngine
	tap              *wireTap
}

func newPeerPair(t *testing.T) *peerPair {
	t.Helper()
	fol, ff := newEngineEnv(t)
	lead, lf := newEngineEnv(t)
	tap := newWireTap(t, lead.URL)
	peers, err := auth.ParsePeers(tap.URL + "," + fol.URL)
	if err != nil {
		t.Fatal(err)
	}
	fol.srv.d.Peering, fol.srv.d.Peers = newPeering(t, peerKey, "follower-1"), peers
	lead.srv.d.Peering, lead.srv.d.Peers = newPeering(t, peerKey, "leader-1"), peers
	ff.leader, ff.notSelf = gitops.EngineLeader{Identity: "leader-1", URL: tap.URL}, true
	return &peerPair{follower: fol, leader: lead, ff: ff, lf: lf, tap: tap}
}

// TestForwardToLeader: on a replica that does not lead, reconcile, the
// webhook, suspend and resume are the leader's to carry out: the request
// reaches it with the caller as this replica verified it, as a signed
// assertion, and with no credential of the caller on the wire; the leader
// carries it out, audits it as the caller's, and its answer is the answer.
// The SuperAdmin check comes first, on both.
func TestForwardToLeader(t *testing.T) {
	pp := newPeerPair(t)
	root := pp.follower.token(t, userRoot, time.Hour)
	cookie := []string{"Cookie", "deploy_session.0=session-cookie-value; other=1"}

	for _, path := range []string{reconcilePath + "?dryRun=true", suspendPath, resumePath} {
		r := pp.follower.post(t, path, root, "{}", cookie...)
		direct := pp.leader.post(t, path, pp.leader.token(t, userRoot, time.Hour), "{}")
		if r.code != http.StatusOK || r.code != direct.code || r.body != direct.body {
			t.Fatalf("POST %s on a follower: %d %q, want the leader's answer %d %q", path, r.code, r.body, direct.code, direct.body)
		}
	}
	body := `{"ref":"refs/heads/main"}`
	if r := pp.follower.post(t, webhookPath, "", body, "X-Hub-Signature-256", githubSignature(body), "X-GitHub-Event", "push"); r.code != http.StatusAccepted || !strings.Contains(r.body, `"queued":true`) {
		t.Fatalf("the webhook on a follower: %d %s", r.code, r.body)
	}
	if rec, trig := pp.lf.calls(); len(rec) != 2 || len(trig) != 1 {
		t.Errorf("the leader's engine ran %v and was triggered %v; want two dry runs (forwarded and direct) and one webhook", rec, trig)
	}
	if rec, trig := pp.ff.calls(); len(rec) != 0 || len(trig) != 0 {
		t.Errorf("the follower's engine was asked: %v %v", rec, trig)
	}
	wire := pp.tap.String()
	for _, secret := range []string{root, "Bearer", "Authorization", "Cookie", "deploy_session", "session-cookie-value"} {
		if strings.Contains(wire, secret) {
			t.Errorf("the forwards carried %q on the wire:\n%s", secret, wire)
		}
	}
	if n := strings.Count(wire, auth.ForwardHeader+": v1."); n != 4 {
		t.Errorf("%d forwards carried an assertion, want 4:\n%s", n, wire)
	}
	logs := pp.leader.logs.String()
	var forwarded int
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "msg=audit") && strings.Contains(line, "forwardedBy=follower-1") {
			forwarded++
			if strings.Contains(line, "route="+reconcilePath+" ") && !strings.Contains(line, "user=root") {
				t.Errorf("the leader's audit line of a forwarded reconcile does not name the caller: %s", line)
			}
		}
	}
	if forwarded != 4 {
		t.Errorf("the leader audited %d forwarded requests, want 4:\n%s", forwarded, logs)
	}

	// Authorization before anything: a member is refused here, not forwarded.
	before := pp.tap.conns()
	if r := pp.follower.post(t, reconcilePath, pp.follower.token(t, userAlice, time.Hour), ""); r.code != http.StatusForbidden {
		t.Errorf("a member's reconcile on a follower: %d", r.code)
	}
	if r := pp.follower.post(t, suspendPath, "", ""); r.code != http.StatusUnauthorized {
		t.Errorf("an anonymous suspend on a follower: %d", r.code)
	}
	// An unsigned or wrongly signed delivery is refused where it arrives.
	if r := pp.follower.post(t, webhookPath, "", body, "X-GitHub-Event", "push"); r.code != http.StatusUnauthorized {
		t.Errorf("an unsigned webhook on a follower: %d %s", r.code, r.body)
	}
	if r := pp.follower.post(t, webhookPath, "", body, "X-Hub-Signature-256", githubSignature(body+" "), "X-GitHub-Event", "push"); r.code != http.StatusUnauthorized {
		t.Errorf("a wrongly signed webhook on a follower: %d %s", r.code, r.body)
	}
	if pp.tap.conns() != before || strings.Count(pp.tap.String(), auth.ForwardHeader+": v1.") != 4 {
		t.Errorf("refused requests reached the leader")
	}
}

// TestForwardOnlyToPeers: the URL the engine's state names for its leader
// is not trusted: one outside DEPLOY_PEERS is refused (503, the reason,
// a log line), and nothing reaches it. Without the shared key nothing is
// forwarded either.
func TestForwardOnlyToPeers(t *testing.T) {
	pp := newPeerPair(t)
	root := pp.follower.token(t, userRoot, time.Hour)
	outside := newLeaderStub(t, http.StatusOK, "{}")
	pp.ff.leader.URL = outside.srv.URL
	r := pp.follower.post(t, reconcilePath, root, "")
	if r.code != http.StatusServiceUnavailable || !strings.Contains(errorMessage(t, r), "not one of this deployd's peers") || r.header.Get("Retry-After") == "" {
		t.Errorf("a leader published outside the peers: %d %s", r.code, r.body)
	}
	body := `{"ref":"refs/heads/main"}`
	if r := pp.follower.post(t, webhookPath, "", body, "X-Hub-Signature-256", githubSignature(body)); r.code != http.StatusServiceUnavailable {
		t.Errorf("a webhook with the leader published outside the peers: %d %s", r.code, r.body)
	}
	if n := outside.count(); n != 0 {
		t.Errorf("the outside listener got %d requests", n)
	}
	if !strings.Contains(pp.follower.logs.String(), "its published URL is not a peer") {
		t.Errorf("the refusal was not logged:\n%s", pp.follower.logs.String())
	}
	// A peer's address in another form (a path, a user) is not the peer.
	for _, u := range []string{pp.tap.URL + "/x", strings.Replace(pp.tap.URL, "http://", "http://u:p@", 1), strings.Replace(pp.tap.URL, "http://", "https://", 1)} {
		pp.ff.leader.URL = u
		if r := pp.follower.post(t, reconcilePath, root, ""); r.code != http.StatusServiceUnavailable {
			t.Errorf("leader published at %s: %d %s", u, r.code, r.body)
		}
	}
	pp.ff.leader.URL = pp.tap.URL
	pp.follower.srv.d.Peering = newPeering(t, nil, "follower-1")
	if r := pp.follower.post(t, reconcilePath, root, ""); r.code != http.StatusServiceUnavailable || !strings.Contains(errorMessage(t, r), "DEPLOY_COOKIE_KEY") {
		t.Errorf("a follower without the shared key: %d %s", r.code, r.body)
	}
	if pp.tap.conns() != 0 {
		t.Errorf("%d connections reached the leader", pp.tap.conns())
	}
}

// TestForgedForwardRefused: the leader accepts a forward only with a
// valid assertion of a peer, for this replica and this very request,
// recent, and once; then the SuperAdmin gate applies to the caller it
// names. A refused forward runs nothing.
func TestForgedForwardRefused(t *testing.T) {
	pp := newPeerPair(t)
	lead := pp.leader
	peer := newPeering(t, peerKey, "follower-1")
	rootP := &auth.Principal{Subject: "u-root", Username: "root", Org: "admin", SuperAdmin: true, Expiry: time.Now().Add(time.Hour)}
	sign := func(p *auth.Peering, to, method, target, body string, caller *auth.Principal) string {
		h, _, err := p.Sign(to, method, target, []byte(body), caller)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	path := reconcilePath + "?dryRun=true"
	stale := peer.SignForward(auth.Forward{From: "follower-1", To: "leader-1", Method: "POST", Target: path, BodySHA256: auth.BodyDigest(nil),
		IssuedAt: time.Now().Add(-2 * time.Minute).UnixMilli(), Nonce: "n-stale", Principal: auth.ForwardOf(rootP)})
	for _, tc := range []struct {
		name, header, body, why string
	}{
		{"no assertion", "", "", "not of this deployd's form"},
		{"another key", sign(newPeering(t, bytes.Repeat([]byte{1}, 32), "follower-1"), "leader-1", "POST", path, "", rootP), "", "signature does not verify"},
		{"garbled", "v1.e30.AAAA", "", "signature does not verify"},
		{"stale", stale, "", "more than 30s"},
		{"another replica", sign(peer, "leader-2", "POST", path, "", rootP), "", "meant for replica"},
		{"another request", sign(peer, "leader-1", "POST", reconcilePath, "", rootP), "", "not for this request"},
		{"another body", sign(peer, "leader-1", "POST", path, "{}", rootP), `{"a":1}`, "body is not the one"},
	} {
		h := []string{forwardedHeader, "follower-1"}
		if tc.header != "" {
			h = append(h, auth.ForwardHeader, tc.header)
		}
		r := lead.post(t, path, "", tc.body, h...)
		if r.code != http.StatusUnauthorized || !strings.Contains(errorMessage(t, r), tc.why) {
			t.Errorf("%s: %d %s, want 401 saying %q", tc.name, r.code, r.body, tc.why)
		}
	}
	if rec, _ := pp.lf.calls(); len(rec) != 0 {
		t.Fatalf("forged forwards ran the engine: %v", rec)
	}
	if !strings.Contains(lead.logs.String(), "forwarded request refused") {
		t.Errorf("the refusals were not logged")
	}
	good := sign(peer, "leader-1", "POST", path, "", rootP)
	if r := lead.post(t, path, "", "", auth.ForwardHeader, good); r.code != http.StatusOK {
		t.Fatalf("a genuine forward: %d %s", r.code, r.body)
	}
	if r := lead.post(t, path, "", "", auth.ForwardHeader, good); r.code != http.StatusUnauthorized || !strings.Contains(errorMessage(t, r), "already used") {
		t.Errorf("a replayed forward: %d %s", r.code, r.body)
	}
	member := &auth.Principal{Subject: "u-alice", Username: "alice", Org: "acme", Expiry: time.Now().Add(time.Hour)}
	if r := lead.post(t, path, "", "", auth.ForwardHeader, sign(peer, "leader-1", "POST", path, "", member)); r.code != http.StatusForbidden {
		t.Errorf("a forward of a member's request: %d %s", r.code, r.body)
	}
	if rec, _ := pp.lf.calls(); len(rec) != 1 {
		t.Errorf("the leader ran %d times, want once (the genuine forward)", len(rec))
	}
	// An Authorization header on a forward counts for nothing.
	if r := lead.post(t, path, lead.token(t, userRoot, time.Hour), "", forwardedHeader, "follower-1"); r.code != http.StatusUnauthorized {
		t.Errorf("a forward with a bearer token and no assertion: %d %s", r.code, r.body)
	}
}

// TestForwardedAnswer: the leader's answer passes with its status and body
// and only its Content-Type and Retry-After; an answer without the
// leader's proof is dropped.
func TestForwardedAnswer(t *testing.T) {
	env, f := newEngineEnv(t)
	root := env.token(t, userRoot, time.Hour)
	leaderPeering := newPeering(t, peerKey, "leader-1")
	var mu sync.Mutex
	prove := true
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fw, err := leaderPeering.Verify(r.Header.Get(auth.ForwardHeader), r.Method, r.RequestURI, b)
		if err != nil {
			http.Error(w, err.Error(), http.StatusTeapot)
			return
		}
		answer := []byte(`{"declared":1}`)
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.Header().Set("Set-Cookie", "deploy_session.0=from-the-leader; Path=/")
		w.Header().Set("X-Leader", "yes")
		w.Header().Set("Retry-After", "7")
		mu.Lock()
		if prove {
			w.Header().Set(auth.ForwardAnswerHeader, leaderPeering.ProveAnswer(fw.Nonce, http.StatusConflict, answer))
		}
		mu.Unlock()
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write(answer)
	}))
	t.Cleanup(stub.Close)
	peers, _ := auth.ParsePeers(stub.URL)
	env.srv.d.Peering, env.srv.d.Peers = newPeering(t, peerKey, "follower-1"), peers
	f.leader, f.notSelf = gitops.EngineLeader{Identity: "leader-1", URL: stub.URL}, true

	r := env.post(t, reconcilePath, root, "")
	if r.code != http.StatusConflict || r.body != `{"declared":1}` || r.header.Get("Content-Type") != "application/json; charset=UTF-8" || r.header.Get("Retry-After") != "7" {
		t.Fatalf("the leader's answer: %d %q %v", r.code, r.body, r.header)
	}
	if r.header.Get("Set-Cookie") != "" || r.header.Get("X-Leader") != "" || r.header.Get(auth.ForwardAnswerHeader) != "" {
		t.Errorf("the leader's headers passed: %v", r.header)
	}
	mu.Lock()
	prove = false
	mu.Unlock()
	r = env.post(t, reconcilePath, root, "")
	if r.code != http.StatusBadGateway || !strings.Contains(errorMessage(t, r), "without proof") || strings.Contains(r.body, "declared") {
		t.Errorf("an answer without proof: %d %s", r.code, r.body)
	}
}

// TestForwardRefused: with no leader, a leader that cannot be reached, or a
// request already forwarded once (leadership moved), a follower answers a
// 5xx that says to retry, and never loops.
func TestForwardRefused(t *testing.T) {
	pp := newPeerPair(t)
	env, f := pp.follower, pp.ff
	root := env.token(t, userRoot, time.Hour)
	f.leaderErr = errors.New("no replica holds the engine's Lease yet; try again in a few seconds")
	r := env.post(t, reconcilePath, root, "")
	if r.code != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || !strings.Contains(errorMessage(t, r), "Lease") {
		t.Errorf("no leader: %d %s", r.code, r.body)
	}
	f.leaderErr = nil
	h, _, _ := newPeering(t, peerKey, "leader-1").Sign("follower-1", "POST", reconcilePath, nil, &auth.Principal{Subject: "u-root", SuperAdmin: true, Expiry: time.Now().Add(time.Hour)})
	r = env.post(t, reconcilePath, "", "", auth.ForwardHeader, h, forwardedHeader, "leader-1")
	if r.code != http.StatusServiceUnavailable || !strings.Contains(errorMessage(t, r), "leader changed") {
		t.Errorf("a forwarded request on a follower: %d %s", r.code, r.body)
	}
	if pp.tap.conns() != 0 {
		t.Errorf("a forwarded request was forwarded again")
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	gone := "http://" + ln.Addr().String()
	ln.Close()
	peers, _ := auth.ParsePeers(gone)
	env.srv.d.Peers, f.leader.URL = peers, gone
	r = env.post(t, reconcilePath, root, "")
	if r.code != http.StatusBadGateway || !strings.Contains(errorMessage(t, r), "could not be reached") {
		t.Errorf("a leader that cannot be reached: %d %s", r.code, r.body)
	}
}

// TestWebhookDelivery: a delivery id seen within the hour is answered 200
// and runs nothing more, through a follower as on the leader; a delivery
// without an id runs as before.
func TestWebhookDelivery(t *testing.T) {
	pp := newPeerPair(t)
	push := `{"ref":"refs/heads/main","after":"` + testRevision + `"}`
	send := func(env *serverEnv, id string) reply {
		h := []string{"X-Hub-Signature-256", githubSignature(push), "X-GitHub-Event", "push"}
		if id != "" {
			h = append(h, "X-GitHub-Delivery", id)
		}
		return env.post(t, webhookPath, "", push, h...)
	}
	if r := send(pp.follower, "d-1"); r.code != http.StatusAccepted || !strings.Contains(r.body, `"queued":true`) {
		t.Fatalf("first delivery: %d %s", r.code, r.body)
	}
	for _, env := range []*serverEnv{pp.follower, pp.leader} {
		r := send(env, "d-1")
		if r.code != http.StatusOK || !strings.Contains(r.body, `"duplicate":true`) || !strings.Contains(r.body, `"queued":false`) {
			t.Errorf("a redelivery: %d %s", r.code, r.body)
		}
	}
	if r := send(pp.leader, "d-2"); r.code != http.StatusAccepted {
		t.Errorf("another delivery: %d %s", r.code, r.body)
	}
	if r := send(pp.leader, ""); r.code != http.StatusAccepted {
		t.Errorf("a delivery without an id: %d %s", r.code, r.body)
	}
	if _, trig := pp.lf.calls(); len(trig) != 3 {
		t.Errorf("the leader was triggered %d times, want 3 (d-1, d-2, one without an id)", len(trig))
	}
}

// leaderStub is a listener that answers every request with a fixed status
// and body and counts what reached it.
type leaderStub struct {
	mu  sync.Mutex
	n   int
	srv *httptest.Server
}

func newLeaderStub(t *testing.T, code int, answer string) *leaderStub {
	l := &leaderStub{}
	l.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.n++
		l.mu.Unlock()
		w.WriteHeader(code)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(l.srv.Close)
	return l
}

func (l *leaderStub) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}
