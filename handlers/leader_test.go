package handlers

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// leaderStub is the engine's leader as a follower sees it: it records what
// was forwarded to it and answers a fixed status, header and body.
type leaderStub struct {
	mu   sync.Mutex
	reqs []*http.Request
	body []string
	srv  *httptest.Server
}

func newLeaderStub(t *testing.T, code int, answer string) *leaderStub {
	l := &leaderStub{}
	l.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		l.mu.Lock()
		l.reqs, l.body = append(l.reqs, r), append(l.body, string(b))
		l.mu.Unlock()
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.Header().Set("X-Leader", "yes")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(l.srv.Close)
	return l
}

// TestForwardToLeader: on a replica that does not lead, reconcile, the
// webhook, suspend and resume are the leader's to carry out: the request
// goes to it unchanged (method, path, query, body, credentials) and its
// answer is the answer, byte for byte; this replica's engine is never
// asked. The SuperAdmin check still comes first.
func TestForwardToLeader(t *testing.T) {
	env, f := newEngineEnv(t)
	const answer = `{"declared":0,"failed":0,"instance":"universe","prune":false,"pruned":0,"results":[],"revision":"abc","source":{"path":"p","ref":"main","repo":"r"},"synced":0}`
	l := newLeaderStub(t, http.StatusOK, answer)
	f.leaderURL, f.notSelf = l.srv.URL, true
	root := env.token(t, userRoot, time.Hour)

	for _, path := range []string{reconcilePath + "?dryRun=true", suspendPath, resumePath} {
		r := env.post(t, path, root, "{}")
		if r.code != http.StatusOK || r.body != answer || r.header.Get("X-Leader") != "yes" {
			t.Fatalf("POST %s on a follower: %d %q %v, want the leader's answer", path, r.code, r.body, r.header)
		}
	}
	body := `{"ref":"refs/heads/main"}`
	if r := env.post(t, webhookPath, "", body, "X-Hub-Signature-256", githubSignature(body), "X-GitHub-Event", "push"); r.code != http.StatusOK || r.body != answer {
		t.Fatalf("the webhook on a follower: %d %s", r.code, r.body)
	}
	l.mu.Lock()
	if len(l.reqs) != 4 {
		t.Fatalf("the leader got %d requests, want 4", len(l.reqs))
	}
	first, hook := l.reqs[0], l.reqs[3]
	if first.URL.Path != reconcilePath || first.URL.RawQuery != "dryRun=true" || first.Header.Get("Authorization") != "Bearer "+root || first.Header.Get(forwardedHeader) == "" {
		t.Errorf("the forwarded reconcile: %s %s, headers %v", first.Method, first.URL, first.Header)
	}
	if hook.Header.Get("X-Hub-Signature-256") != githubSignature(body) || l.body[3] != body {
		t.Errorf("the forwarded webhook lost its signature or body: %v %q", hook.Header, l.body[3])
	}
	l.mu.Unlock()
	if rec, trig := f.calls(); len(rec) != 0 || len(trig) != 0 {
		t.Errorf("the follower's engine was asked: %v %v", rec, trig)
	}
	// Authorization before anything: a member is refused here, not forwarded.
	if r := env.post(t, reconcilePath, env.token(t, userAlice, time.Hour), ""); r.code != http.StatusForbidden {
		t.Errorf("a member's reconcile on a follower: %d", r.code)
	}
	if r := env.post(t, suspendPath, "", ""); r.code != http.StatusUnauthorized {
		t.Errorf("an anonymous suspend on a follower: %d", r.code)
	}
	l.mu.Lock()
	if len(l.reqs) != 4 {
		t.Errorf("refused requests reached the leader: %d requests", len(l.reqs))
	}
	l.mu.Unlock()
}

// TestForwardRefused: with no leader, a leader that cannot be reached, or a
// request already forwarded once (leadership moved), a follower answers a
// 5xx that says to retry, and never loops.
func TestForwardRefused(t *testing.T) {
	env, f := newEngineEnv(t)
	root := env.token(t, userRoot, time.Hour)
	f.notSelf, f.leaderErr = true, errors.New("no replica holds the engine's Lease yet; try again in a few seconds")
	r := env.post(t, reconcilePath, root, "")
	if r.code != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || !strings.Contains(errorMessage(t, r), "Lease") {
		t.Errorf("no leader: %d %s", r.code, r.body)
	}
	l := newLeaderStub(t, http.StatusOK, "{}")
	f.leaderErr, f.leaderURL = nil, l.srv.URL
	r = env.post(t, reconcilePath, root, "", forwardedHeader, "1")
	if r.code != http.StatusServiceUnavailable || !strings.Contains(errorMessage(t, r), "leader changed") {
		t.Errorf("a forwarded request on a follower: %d %s", r.code, r.body)
	}
	if len(l.reqs) != 0 {
		t.Errorf("a forwarded request was forwarded again")
	}
	l.srv.Close()
	r = env.post(t, reconcilePath, root, "")
	if r.code != http.StatusBadGateway || !strings.Contains(errorMessage(t, r), "could not be reached") {
		t.Errorf("a leader that cannot be reached: %d %s", r.code, r.body)
	}
}

// TestSuspendResumeRoutes: SuperAdmin only, audited, answering the status.
func TestSuspendResumeRoutes(t *testing.T) {
	env, f := newEngineEnv(t)
	root := env.token(t, userRoot, time.Hour)
	if r := env.post(t, suspendPath, env.token(t, userAlice, time.Hour), ""); r.code != http.StatusForbidden {
		t.Fatalf("a member's suspend: %d", r.code)
	}
	r := env.post(t, suspendPath, root, "")
	if r.code != http.StatusOK || !strings.Contains(r.body, `"state":"suspended"`) || !strings.Contains(r.body, `"by":"`) {
		t.Fatalf("suspend: %d %s", r.code, r.body)
	}
	if f.suspended == nil || f.suspended.By == "" {
		t.Fatalf("the engine was not suspended by a named caller: %+v", f.suspended)
	}
	if !hasAuditLine(env.logs.String(), suspendPath) {
		t.Errorf("suspend was not audited:\n%s", env.logs.String())
	}
	if r := env.post(t, resumePath, root, `{"x":1}`); r.code != http.StatusOK || f.suspended != nil {
		t.Fatalf("resume: %d %s", r.code, r.body)
	}
	if r := env.post(t, resumePath+"?now=1", root, ""); r.code != http.StatusBadRequest {
		t.Errorf("resume with an unknown parameter: %d", r.code)
	}
}
