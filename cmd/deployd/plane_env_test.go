package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"
	"k8s.io/client-go/rest"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/auth/authtest"
	"github.com/hanzoai/deploy/cluster"
	"github.com/hanzoai/deploy/projection"
)

// planeEnv is the whole plane (watcher, feed, store, hub, HTTP) against a
// cluster, with an in-process identity provider minting tokens.
type planeEnv struct {
	URL string
	// MetricsURL is the metrics listener's /metrics.
	MetricsURL string
	m          *mockoidc.MockOIDC
	p          *plane
	logs       *authtest.LogBuffer
}

func startPlane(t *testing.T, cfg *rest.Config) *planeEnv {
	t.Helper()
	return startPlaneWith(t, cfg, nil)
}

// startPlaneWith is startPlane with the plane's configuration changed by
// with before the plane is built.
func startPlaneWith(t *testing.T, cfg *rest.Config, with func(*planeConfig)) *planeEnv {
	t.Helper()
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	env := &planeEnv{URL: "http://" + ln.Addr().String(), MetricsURL: "http://" + mln.Addr().String() + "/metrics", m: m, logs: &authtest.LogBuffer{}}
	log := slog.New(slog.NewTextHandler(env.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	pcfg := projection.DefaultConfig()
	feed := cluster.NewFeed()
	w, err := cluster.NewWatcher(cfg, "", feed, cluster.Options{Namespaces: pcfg.Namespaces, Discovery: 200 * time.Millisecond, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pc := planeConfig{
		Log: log, Projection: pcfg, Watcher: w, Feed: feed, ClusterName: "in-cluster", Metrics: mln,
		Auth: auth.Config{Issuer: m.Issuer(), ClientID: m.ClientID, ClientSecret: m.ClientSecret, PublicURL: env.URL,
			CookieKey: bytes.Repeat([]byte{9}, 32)},
	}
	if with != nil {
		with(&pc)
	}
	env.p = newPlane(ctx, pc)
	done := make(chan error, 1)
	go func() { done <- env.p.run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("plane: %v", err)
		}
	})
	return env
}

var (
	admin       = authtest.User{Subject: "u-root", Extra: map[string]any{"preferred_username": "root", "owner": "admin"}}
	acmeMember  = authtest.User{Subject: "u-alice", Extra: map[string]any{"preferred_username": "alice", "owner": "acme"}}
	globexAdmin = authtest.User{Subject: "u-gina", Extra: map[string]any{"preferred_username": "gina", "owner": "globex", "isAdmin": true}}
)

// token is an ID token for u, valid for ttl (negative: already expired).
func (env *planeEnv) token(t *testing.T, u authtest.User, ttl time.Duration) string {
	t.Helper()
	tok, err := authtest.IDToken(env.m, u, time.Now(), ttl)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// browser signs u in through the real redirect flow and returns a client
// holding the session cookie.
func (env *planeEnv) browser(t *testing.T, u authtest.User) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	env.m.QueueUser(u)
	resp, err := c.Get(env.URL + "/v1/deploy/login?returnTo=/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	base, _ := url.Parse(env.URL)
	for _, ck := range jar.Cookies(base) {
		if strings.HasPrefix(ck.Name, "deploy_session") {
			return c
		}
	}
	t.Fatalf("no session cookie after signing in as %s (last status %d)", u.Subject, resp.StatusCode)
	return nil
}

type answer struct {
	code   int
	body   string
	header http.Header
}

func (env *planeEnv) send(t *testing.T, c *http.Client, method, path, token, body string, header ...string) answer {
	t.Helper()
	if c == nil {
		c = &http.Client{Timeout: 20 * time.Second}
	}
	req, err := http.NewRequest(method, env.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b), resp.Header}
}

func (env *planeEnv) waitReady(t *testing.T, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if env.send(t, nil, http.MethodGet, "/v1/deploy/health", "", "").code == http.StatusOK {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the plane was not ready in %s: %s", timeout, env.send(t, nil, http.MethodGet, "/v1/deploy/health", "", "").body)
}
