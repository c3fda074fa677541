package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hanzoai/deploy/demo/idp"
)

// fakeServer is a deployd server's sign-in side, as the CLI sees it:
// /api/v1/settings names an identity provider, userinfo accepts any
// bearer, and /api/v1/applications lists nothing for any bearer. It
// records the requests it saw.
type fakeServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func startFakeServer(t *testing.T, settings serverSignIn) *fakeServer {
	t.Helper()
	f := &fakeServer{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.seen = append(f.seen, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		bearer := strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ")
		switch {
		case r.URL.Path == "/api/v1/settings":
			_ = json.NewEncoder(w).Encode(map[string]any{"oidcConfig": settings})
		case r.URL.Path == "/api/v1/session/userinfo":
			_ = json.NewEncoder(w).Encode(map[string]any{"loggedIn": bearer, "username": "ada", "superAdmin": true})
		case r.URL.Path == "/api/v1/applications" && bearer:
			_, _ = io.WriteString(w, `{"items":[]}`)
		case r.URL.Path == "/api/v1/applications":
			http.Error(w, `{"message":"no token"}`, http.StatusUnauthorized)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

// startDemoIdP runs the demo identity provider for a test, and the
// settings of a server that signs in with it.
func startDemoIdP(t *testing.T) (*idp.IdP, serverSignIn) {
	t.Helper()
	p, err := idp.Start(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, serverSignIn{Issuer: p.Issuer(), ClientID: p.ClientID(), CLIClientID: idp.CLIClientID}
}

// loginAs runs deployd login against server and signs in as the demo
// identity provider's first user, as the browser would.
func loginAs(t *testing.T, p *idp.IdP, server string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	authURL, done, out := startLogin(t, ctx, server)
	resp, err := http.Get(authURL + "&" + idp.UserParam + "=" + url.QueryEscape(p.Users()[0].Subject))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the loopback page: %d %s", resp.StatusCode, page)
	}
	if err := <-done; err != nil {
		t.Fatalf("login: %v\n%s", err, out.String())
	}
}

// TestLoginReplacesExpiredSignIn: an expired sign-in that cannot be
// refreshed (no refresh token) does not stop deployd login, which
// replaces it without reading it; other servers' entries are kept.
func TestLoginReplacesExpiredSignIn(t *testing.T) {
	p, settings := startDemoIdP(t)
	srv := startFakeServer(t, settings)
	dir := isolatedConfig(t)
	other := &serverCredentials{Issuer: "https://id.example.com", ClientID: "cli", IDToken: "other-token", Expiry: time.Now().Add(time.Hour)}
	old := &serverCredentials{Issuer: p.Issuer(), ClientID: idp.CLIClientID, Audiences: []string{idp.CLIClientID},
		IDToken: "expired-token", Expiry: time.Now().Add(-time.Hour)}
	creds := &credentials{Current: srv.URL, Servers: map[string]*serverCredentials{srv.URL: old, "https://other.example.com": other}}
	if err := creds.save(); err != nil {
		t.Fatal(err)
	}

	loginAs(t, p, srv.URL)

	got, _ := readCredentials(t, dir)
	now := got.Servers[srv.URL]
	if now == nil || now.IDToken == "" || now.IDToken == old.IDToken || !now.Expiry.After(time.Now()) {
		t.Fatalf("after login the entry is %+v, want a new unexpired token", now)
	}
	if o := got.Servers["https://other.example.com"]; o == nil || o.IDToken != other.IDToken {
		t.Fatalf("login dropped another server's entry: %+v", o)
	}
	for _, r := range srv.requests() {
		if r == "GET /api/v1/applications" {
			t.Fatalf("login made a request with the old sign-in: %v", srv.requests())
		}
	}
}

// TestRefreshAtTheServersIssuer: an expired sign-in is refreshed when the
// server still names the identity provider it came from.
func TestRefreshAtTheServersIssuer(t *testing.T) {
	p, settings := startDemoIdP(t)
	srv := startFakeServer(t, settings)
	dir := isolatedConfig(t)
	loginAs(t, p, srv.URL)
	creds, _ := readCredentials(t, dir)
	first := creds.Servers[srv.URL]
	if first.RefreshToken == "" {
		t.Fatal("the demo identity provider gave no refresh token: the refresh below would prove nothing")
	}
	first.Expiry = time.Now().Add(-time.Minute)
	if err := creds.save(); err != nil {
		t.Fatal(err)
	}
	if msg, code := cliRun(t, "app", "list"); code != 0 {
		t.Fatalf("app list after the token expired: exit %d: %s", code, msg)
	}
	again, _ := readCredentials(t, dir)
	if got := again.Servers[srv.URL]; !got.Expiry.After(time.Now()) {
		t.Fatalf("the sign-in was not refreshed: expiry %v", got.Expiry)
	}
}

// TestRefreshRefusesAnotherIssuer: a refresh token is sent only to the
// identity provider the server names now. When the server's settings name
// another (or none), the command asks for deployd login and the old
// issuer hears nothing: no discovery, no token request.
func TestRefreshRefusesAnotherIssuer(t *testing.T) {
	var mu sync.Mutex
	var heard []string
	oldIssuer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		heard = append(heard, r.Method+" "+r.URL.Path)
		mu.Unlock()
		base := "http://" + r.Host
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"issuer": base, "authorization_endpoint": base + "/authorize",
				"token_endpoint": base + "/token", "jwks_uri": base + "/jwks", "id_token_signing_alg_values_supported": []string{"RS256"}})
		case "/token":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":"invalid_grant"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer oldIssuer.Close()

	for _, c := range []struct {
		name, issuer, want string
	}{
		{"another issuer", "https://id.new.example.com", "the server signs in with https://id.new.example.com now"},
		{"no issuer", "", "names no identity provider now"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			heard = nil
			mu.Unlock()
			srv := startFakeServer(t, serverSignIn{Issuer: c.issuer, ClientID: "deployd"})
			isolatedConfig(t)
			creds := &credentials{Current: srv.URL, Servers: map[string]*serverCredentials{srv.URL: {
				Issuer: oldIssuer.URL, ClientID: "cli", Audiences: []string{"cli"},
				IDToken: "expired", RefreshToken: "a-refresh-token", Expiry: time.Now().Add(-time.Minute)}}}
			if err := creds.save(); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"app", "list"}, {"engine", "status"}} {
				msg, code := cliRun(t, args...)
				if code == 0 || !strings.Contains(msg, c.want) || !strings.Contains(msg, "run deployd login --server "+srv.URL) {
					t.Errorf("%v: exit %d: %s\nwant a failure saying %q and to run deployd login", args, code, msg, c.want)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(heard) > 0 {
				t.Errorf("the old issuer heard %v, want nothing", heard)
			}
		})
	}
}

// TestRefuseCleartext: the servers a token may go to over plain http.
func TestRefuseCleartext(t *testing.T) {
	for _, c := range []struct {
		server   string
		insecure bool
		refused  bool
	}{
		{"http://127.0.0.1:8080", false, false},
		{"http://127.4.5.6", false, false},
		{"http://localhost:8080", false, false},
		{"http://LOCALHOST", false, false},
		{"http://[::1]:8080", false, false},
		{"https://deploy.example.com", false, false},
		{"https://10.0.0.1", false, false},
		{"http://example.test", false, true},
		{"http://deploy.example.com:8080", false, true},
		{"http://10.0.0.1:8080", false, true},
		{"http://0.0.0.0:8080", false, true},
		{"http://localhost.example.com", false, true},
		{"http://[2001:db8::1]:8080", false, true},
		{"http://example.test", true, false},
	} {
		err := refuseCleartext(c.server, c.insecure)
		if (err != nil) != c.refused {
			t.Errorf("refuseCleartext(%q, insecure %v) = %v, want refused %v", c.server, c.insecure, err, c.refused)
		}
	}
}

// TestInsecureHTTPRefused: every command that sends or receives a token
// refuses a plain http server that is not loopback before any request,
// unless --insecure-http is given. The server here is reached as
// http://0.0.0.0:port (not a loopback address, yet this machine's own),
// so a request sent would reach its listener.
func TestInsecureHTTPRefused(t *testing.T) {
	const want = "use https://, or pass --insecure-http to send the token in cleartext"
	var mu sync.Mutex
	var reached []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reached = append(reached, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/applications":
			_, _ = io.WriteString(w, `{"items":[]}`)
		case "/api/v1/settings":
			_, _ = io.WriteString(w, `{"oidcConfig":{}}`)
		default:
			_, _ = io.WriteString(w, `{"engine":{"enabled":false}}`)
		}
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	remote := "http://0.0.0.0:" + port
	take := func() []string {
		mu.Lock()
		defer mu.Unlock()
		r := reached
		reached = nil
		return r
	}

	isolatedConfig(t)
	// With --insecure-http the request goes: the listener is reachable.
	if msg, code := cliRun(t, "app", "list", "--server", remote, "--token", "t", "--insecure-http"); code != 0 || len(take()) == 0 {
		t.Skipf("%s does not reach this machine's listener here (exit %d: %s)", remote, code, msg)
	}

	for _, args := range [][]string{
		{"app", "list", "--server", remote, "--token", "t"},
		{"app", "get", "billing", "--server", remote, "--token", "t"},
		{"engine", "status", "--server", remote, "--token", "t"},
		{"watch", "--summary", "--server", remote, "--token", "t"},
		{"login", "--server", remote, "--no-browser", "--timeout", "5s"},
		{"app", "list", "--server", "http://example.test", "--token", "t"},
		{"login", "--server", "http://example.test"},
	} {
		msg, code := cliRun(t, args...)
		if code == 0 || !strings.Contains(msg, want) {
			t.Errorf("%v: exit %d: %s\nwant a refusal saying %q", args, code, msg, want)
		}
		if r := take(); len(r) > 0 {
			t.Errorf("%v: the server heard %v, want nothing", args, r)
		}
	}

	// A kept sign-in for that server, used without --server or --token.
	creds := &credentials{Current: remote, Servers: map[string]*serverCredentials{remote: {
		Issuer: "https://id.example.com", ClientID: "cli", IDToken: "kept", Expiry: time.Now().Add(time.Hour)}}}
	if err := creds.save(); err != nil {
		t.Fatal(err)
	}
	if msg, code := cliRun(t, "app", "list"); code == 0 || !strings.Contains(msg, want) {
		t.Errorf("app list with a kept sign-in for %s: exit %d: %s", remote, code, msg)
	}
	if r := take(); len(r) > 0 {
		t.Errorf("app list with a kept sign-in: the server heard %v, want nothing", r)
	}
	if msg, code := cliRun(t, "app", "list", "--insecure-http"); code != 0 {
		t.Errorf("app list --insecure-http with a kept sign-in: exit %d: %s", code, msg)
	}
	if r := take(); len(r) == 0 {
		t.Error("app list --insecure-http sent nothing")
	}
}
