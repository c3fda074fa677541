package idp_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"go.uber.org/goleak"
	"golang.org/x/net/html"
	"golang.org/x/oauth2"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/demo/idp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func start(t *testing.T) *idp.IdP {
	t.Helper()
	p, err := idp.Start(t.Context(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// browser is an HTTP client with a cookie jar that shows redirects instead
// of following them.
func browser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Jar: jar, Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func random() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// signInPage is what the chooser page offers: where its form goes, the
// fields it passes through, and a button per user.
type signInPage struct {
	action  string
	hidden  url.Values
	param   string
	choices []string
	text    string
}

func parsePage(t *testing.T, body string) signInPage {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	pg := signInPage{hidden: url.Values{}, text: body}
	attr := func(n *html.Node, k string) string {
		for _, a := range n.Attr {
			if a.Key == k {
				return a.Val
			}
		}
		return ""
	}
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "form":
				pg.action = attr(n, "action")
			case "input":
				if attr(n, "type") == "hidden" {
					pg.hidden.Add(attr(n, "name"), attr(n, "value"))
				}
			case "button":
				pg.param = attr(n, "name")
				pg.choices = append(pg.choices, attr(n, "value"))
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return pg
}

// choose opens an authorization URL as a browser would, checks the sign-in
// page, picks subject on it, and returns where the provider redirects.
func choose(t *testing.T, c *http.Client, authURL, subject string) *url.URL {
	t.Helper()
	resp, err := c.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("authorize: %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	pg := parsePage(t, string(body))
	if !strings.Contains(pg.text, "DEMO IDENTITIES") || len(pg.choices) != len(idp.Users()) || pg.param != idp.UserParam {
		t.Fatalf("sign-in page: banner %v, choices %v, param %q", strings.Contains(pg.text, "DEMO IDENTITIES"), pg.choices, pg.param)
	}
	orig, _ := url.Parse(authURL)
	for k, v := range orig.Query() {
		if got := pg.hidden[k]; strings.Join(got, ",") != strings.Join(v, ",") {
			t.Fatalf("the page passes %s=%v on, want %v", k, got, v)
		}
	}
	next, err := orig.Parse(pg.action)
	if err != nil {
		t.Fatal(err)
	}
	q := pg.hidden
	q.Set(pg.param, subject)
	next.RawQuery = q.Encode()
	resp, err = c.Get(next.String())
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("choose %s: %d %s", subject, resp.StatusCode, body)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// The whole code flow with PKCE, as any OIDC client runs it: the ID token
// verifies with go-oidc and carries the chosen user's claims.
func TestSignInWithGoOIDC(t *testing.T) {
	p := start(t)
	c := browser(t)
	ctx := oidc.ClientContext(t.Context(), c)
	provider, err := oidc.NewProvider(ctx, p.Issuer())
	if err != nil {
		t.Fatal(err)
	}
	conf := oauth2.Config{ClientID: p.ClientID(), ClientSecret: p.ClientSecret(), Endpoint: provider.Endpoint(),
		RedirectURL: "http://127.0.0.1:8080/v1/deploy/callback", Scopes: []string{"openid", "profile", "email"}}
	verifier := provider.Verifier(&oidc.Config{ClientID: p.ClientID()})
	for _, u := range p.Users() {
		t.Run(u.Username, func(t *testing.T) {
			state, nonce, pkce := random(), random(), oauth2.GenerateVerifier()
			loc := choose(t, c, conf.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(pkce)), u.Subject)
			if !strings.HasPrefix(loc.String(), conf.RedirectURL+"?") || loc.Query().Get("state") != state || loc.Query().Get("code") == "" {
				t.Fatalf("redirected to %s: want the redirect URI with the state and a code", loc)
			}
			tok, err := conf.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(pkce))
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := tok.Extra("id_token").(string)
			idt, err := verifier.Verify(ctx, raw)
			if err != nil {
				t.Fatal(err)
			}
			var claims struct {
				Owner    string `json:"owner"`
				IsAdmin  bool   `json:"isAdmin"`
				Username string `json:"preferred_username"`
				Email    string `json:"email"`
			}
			if err := idt.Claims(&claims); err != nil {
				t.Fatal(err)
			}
			if idt.Nonce != nonce || idt.Subject != u.Subject || claims.Owner != u.Org || claims.IsAdmin != u.OrgAdmin ||
				claims.Username != u.Username || claims.Email != u.Email {
				t.Fatalf("token: nonce ok %v, sub %s, claims %+v; want %+v", idt.Nonce == nonce, idt.Subject, claims, u)
			}
			if left := time.Until(idt.Expiry); left < idp.TokenLifetime-time.Minute || left > idp.TokenLifetime+time.Minute {
				t.Fatalf("token valid for %v, want %v", left, idp.TokenLifetime)
			}
			// A code is good once.
			if _, err := conf.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(pkce)); err == nil {
				t.Fatal("the code was exchanged twice")
			}
		})
	}
}

// deployd's own sign-in (auth.Authenticator), pointed at the provider with
// AuthConfig, ends with the principal each demo user stands for.
func TestSignInThroughAuth(t *testing.T) {
	p := start(t)
	c := browser(t)
	cfg := p.AuthConfig("http://127.0.0.1:8080")
	cfg.HTTPClient = c
	a := auth.New(t.Context(), cfg, slog.New(slog.DiscardHandler))
	t.Cleanup(a.Close)
	if reason := a.Status().Reason; reason != "" {
		t.Fatalf("sign-in disabled: %s", reason)
	}
	want := map[string]struct{ org, scope string }{
		"ada": {"admin", "super"}, "ari": {"acme", "member"}, "gil": {"globex", "orgadmin"},
	}
	for _, u := range p.Users() {
		t.Run(u.Username, func(t *testing.T) {
			login, err := a.StartLogin("/apps")
			if err != nil {
				t.Fatal(err)
			}
			loc := choose(t, c, login.AuthURL, u.Subject)
			r := httptest.NewRequest(http.MethodGet, loc.String(), nil)
			r.AddCookie(login.Cookie)
			done, err := a.FinishLogin(t.Context(), r)
			if err != nil {
				t.Fatal(err)
			}
			pr, w := done.Principal, want[u.Username]
			scope := "member"
			switch {
			case pr.SuperAdmin:
				scope = "super"
			case pr.OrgAdmin:
				scope = "orgadmin"
			}
			if pr.Org != w.org || scope != w.scope || pr.Username != u.Username || done.ReturnTo != "/apps" {
				t.Fatalf("principal org %q (%s) username %q return %q; want org %q (%s) username %q return /apps",
					pr.Org, scope, pr.Username, done.ReturnTo, w.org, w.scope, u.Username)
			}
		})
	}
}

// A refused authorization leaves nothing behind: the next sign-in gets the
// user it chose. Requests the provider would refuse get its error, not the
// page; an unknown demo user is refused.
func TestRefusalsLeakNoUser(t *testing.T) {
	p := start(t)
	c := browser(t)
	users := p.Users()
	base := p.Issuer() + "/authorize?"
	q := url.Values{"client_id": {p.ClientID()}, "response_type": {"code"}, "redirect_uri": {"http://127.0.0.1:8080/cb"},
		"state": {"s1"}, "scope": {"openid offline_access"}, idp.UserParam: {users[0].Subject}}
	get := func(u string) (int, string) {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(base + q.Encode()); code != http.StatusBadRequest || !strings.Contains(body, "invalid_scope") {
		t.Fatalf("bad scope: %d %s, want 400 invalid_scope", code, body)
	}
	q.Set(idp.UserParam, "nobody")
	q.Set("scope", "openid")
	if code, _ := get(base + q.Encode()); code != http.StatusBadRequest {
		t.Fatalf("unknown demo user: %d, want 400", code)
	}
	q.Del(idp.UserParam)
	q.Set("client_id", "someone-else")
	if code, body := get(base + q.Encode()); code != http.StatusUnauthorized || !strings.Contains(body, "invalid_client") {
		t.Fatalf("foreign client: %d %s, want mockoidc's 401 invalid_client", code, body)
	}

	ctx := oidc.ClientContext(context.Background(), c)
	provider, err := oidc.NewProvider(ctx, p.Issuer())
	if err != nil {
		t.Fatal(err)
	}
	conf := oauth2.Config{ClientID: p.ClientID(), ClientSecret: p.ClientSecret(), Endpoint: provider.Endpoint(),
		RedirectURL: "http://127.0.0.1:8080/cb", Scopes: []string{"openid"}}
	loc := choose(t, c, conf.AuthCodeURL("s2"), users[1].Subject)
	tok, err := conf.Exchange(ctx, loc.Query().Get("code"))
	if err != nil {
		t.Fatal(err)
	}
	idt, err := provider.Verifier(&oidc.Config{ClientID: p.ClientID()}).Verify(ctx, tok.Extra("id_token").(string))
	if err != nil {
		t.Fatal(err)
	}
	if idt.Subject != users[1].Subject {
		t.Fatalf("signed in as %s, want %s (the refused request's user leaked)", idt.Subject, users[1].Subject)
	}
}
