package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/auth/authtest"
	"github.com/labstack/echo/v4"
	"github.com/oauth2-proxy/mockoidc"
)

var (
	userAlice  = authtest.User{Subject: "u-alice", Extra: map[string]any{"preferred_username": "alice", "owner": "acme", "groups": []string{"dev"}}}
	userBob    = authtest.User{Subject: "u-bob", Extra: map[string]any{"preferred_username": "bob", "owner": "beta", "isAdmin": true}}
	userRoot   = authtest.User{Subject: "u-root", Extra: map[string]any{"preferred_username": "root", "owner": "admin"}}
	userNobody = authtest.User{Subject: "u-nobody", Extra: map[string]any{"preferred_username": "nobody"}}
)

type signinClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *signinClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *signinClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// signinEnv is deployd's sign-in routes, the middleware and two protected
// routes, served on loopback against an in-process mockoidc provider.
type signinEnv struct {
	URL   string
	m     *mockoidc.MockOIDC
	a     *auth.Authenticator
	clock *signinClock
	logs  *authtest.LogBuffer
}

// scopeKeyRoute answers the caller's scope key.
func scopeKeyRoute(c echo.Context) error {
	sc, err := scopeOf(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"scope": sc.Key()})
}

// newSigninEcho wires the routes the way the server does.
func newSigninEcho(a *auth.Authenticator, publicURL string, log *slog.Logger) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(log)
	s := NewSession(a, log)
	e.Use(s.Authenticate(), SameOrigin(publicURL))
	s.Register(e)
	e.GET("/v1/deploy/applications", scopeKeyRoute, RequireScope())
	e.POST("/v1/deploy/applications/:name/sync", scopeKeyRoute, RequireScope())
	return e
}

func newSigninEnv(t *testing.T, mutate func(*auth.Config)) *signinEnv {
	t.Helper()
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	env := &signinEnv{
		URL:   "http://" + l.Addr().String(),
		m:     m,
		clock: &signinClock{t: time.Now().Truncate(time.Second)},
		logs:  &authtest.LogBuffer{},
	}
	log := slog.New(slog.NewTextHandler(env.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := auth.Config{
		Issuer: m.Issuer(), ClientID: m.ClientID, ClientSecret: m.ClientSecret,
		PublicURL: env.URL, CookieKey: bytes.Repeat([]byte{3}, 32), Now: env.clock.Now,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	env.a = auth.New(context.Background(), cfg, log)
	t.Cleanup(env.a.Close)
	srv := httptest.NewUnstartedServer(newSigninEcho(env.a, cfg.PublicURL, log))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return env
}

// newBrowser is an HTTP client with a cookie jar that does not follow
// redirects, so each step of a sign-in is visible.
func newBrowser(t testing.TB) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{
		Jar:           jar,
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

type signinResponse struct {
	code     int
	location string
	body     string
	header   http.Header
}

func sendRequest(t testing.TB, c *http.Client, method, u string, header map[string]string) signinResponse {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return signinResponse{code: resp.StatusCode, location: resp.Header.Get("Location"), body: string(b), header: resp.Header}
}

func getPage(t testing.TB, c *http.Client, u string) signinResponse {
	return sendRequest(t, c, http.MethodGet, u, nil)
}

// startLogin runs /login and the provider's authorize step for user and
// returns the callback URL the provider sent the browser to.
func (env *signinEnv) startLogin(t testing.TB, c *http.Client, user mockoidc.User, returnTo string) string {
	t.Helper()
	u := env.URL + "/v1/deploy/login"
	if returnTo != "" {
		u += "?returnTo=" + url.QueryEscape(returnTo)
	}
	r := getPage(t, c, u)
	if r.code != http.StatusFound || !strings.HasPrefix(r.location, env.m.AuthorizationEndpoint()) {
		t.Fatalf("login: %d to %q, want 302 to the provider", r.code, r.location)
	}
	env.m.QueueUser(user)
	r = getPage(t, c, r.location)
	if r.code != http.StatusFound || !strings.HasPrefix(r.location, env.URL+"/v1/deploy/callback?") {
		t.Fatalf("authorize: %d to %q, want 302 to the callback", r.code, r.location)
	}
	return r.location
}

// signIn completes a sign-in for user and returns the browser.
func (env *signinEnv) signIn(t testing.TB, user mockoidc.User) *http.Client {
	t.Helper()
	c := newBrowser(t)
	r := getPage(t, c, env.startLogin(t, c, user, "/v1/deploy/applications"))
	if r.code != http.StatusFound || r.location != "/v1/deploy/applications" {
		t.Fatalf("callback: %d to %q: %s", r.code, r.location, r.body)
	}
	return c
}

// errorBodyMessage decodes an error body and checks its shape.
func errorBodyMessage(t *testing.T, r signinResponse) string {
	t.Helper()
	var b struct {
		Error   string `json:"error"`
		Message string `json:"message"`
		Code    int    `json:"code"`
	}
	if err := json.Unmarshal([]byte(r.body), &b); err != nil || b.Error != b.Message || b.Code != r.code {
		t.Fatalf("error body %q does not have the error shape for %d", r.body, r.code)
	}
	return b.Message
}

// queryValue is the query parameter k of URL u, which must be present.
func queryValue(t *testing.T, u, k string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil || pu.Query().Get(k) == "" {
		t.Fatalf("%s has no %s", u, k)
	}
	return pu.Query().Get(k)
}

// idToken is an ID token for user signed by the provider's key, as its
// token endpoint would issue it, valid for ttl from the env's clock.
func (env *signinEnv) idToken(t testing.TB, user authtest.User, ttl time.Duration, extra ...map[string]any) string {
	t.Helper()
	tok, err := authtest.IDToken(env.m, user, env.clock.Now(), ttl, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
