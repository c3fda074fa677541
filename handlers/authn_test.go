package handlers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hanzoai/deploy/auth"
	"github.com/labstack/echo/v4"
)

func TestBearer(t *testing.T) {
	env := newSigninEnv(t, func(c *auth.Config) { c.ExtraAudiences = []string{"deploy-cli"} })
	c := newBrowser(t)
	tests := []struct {
		name   string
		header string
		code   int
		want   string // scope key, or a fragment of the error message
	}{
		{"member", "Bearer " + env.idToken(t, userAlice, time.Hour), 200, "org:acme"},
		{"super admin", "Bearer " + env.idToken(t, userRoot, time.Hour), 200, "*"},
		{"scheme in lower case", "bearer " + env.idToken(t, userBob, time.Hour), 200, "org:beta"},
		{"extra audience", "Bearer " + env.idToken(t, userAlice, time.Hour, map[string]any{"aud": "deploy-cli"}), 200, "org:acme"},
		{"other audience", "Bearer " + env.idToken(t, userAlice, time.Hour, map[string]any{"aud": "another-client"}), 401, "the bearer token was refused"},
		{"other issuer", "Bearer " + env.idToken(t, userAlice, time.Hour, map[string]any{"iss": "https://evil.example.com"}), 401, "the bearer token was refused"},
		{"expired", "Bearer " + env.idToken(t, userAlice, -time.Second), 401, "the bearer token has expired"},
		{"not a token", "Bearer abc.def.ghi", 401, "the bearer token was refused"},
		{"empty", "Bearer ", 401, "send Authorization: Bearer"},
		{"basic", "Basic dXNlcjpwYXNz", 401, "unsupported Authorization header"},
		{"no org", "Bearer " + env.idToken(t, userNobody, time.Hour), 403, "belongs to no organization"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := sendRequest(t, c, http.MethodGet, env.URL+"/v1/deploy/applications", map[string]string{
				"Authorization": tc.header, "Sec-Fetch-Mode": "navigate", // a bad bearer is never bounced
			})
			if r.code != tc.code {
				t.Fatalf("got %d %s, want %d", r.code, r.body, tc.code)
			}
			if tc.code == 200 {
				if !strings.Contains(r.body, `"scope":"`+tc.want+`"`) {
					t.Fatalf("got %s, want scope %s", r.body, tc.want)
				}
				return
			}
			if msg := errorBodyMessage(t, r); !strings.Contains(msg, tc.want) {
				t.Fatalf("got message %q, want one containing %q", msg, tc.want)
			}
			if strings.Contains(r.body, "oidc") {
				t.Fatalf("the answer leaks a cause: %s", r.body)
			}
		})
	}
}

func TestBearerExpiresWhileCached(t *testing.T) {
	env := newSigninEnv(t, nil)
	c := newBrowser(t)
	h := map[string]string{"Authorization": "Bearer " + env.idToken(t, userAlice, time.Minute)}
	if r := sendRequest(t, c, http.MethodGet, env.URL+"/v1/deploy/applications", h); r.code != 200 {
		t.Fatalf("fresh token: %d %s", r.code, r.body)
	}
	env.clock.Advance(time.Minute)
	if r := sendRequest(t, c, http.MethodGet, env.URL+"/v1/deploy/applications", h); r.code != 401 || !strings.Contains(r.body, "expired") {
		t.Fatalf("token at its exp: %d %s, want 401 expired", r.code, r.body)
	}
}

func TestBearerWinsOverCookie(t *testing.T) {
	env := newSigninEnv(t, nil)
	c := env.signIn(t, userAlice)
	r := sendRequest(t, c, http.MethodGet, env.URL+"/v1/deploy/applications", map[string]string{"Authorization": "Bearer " + env.idToken(t, userBob, time.Hour)})
	if !strings.Contains(r.body, `"org:beta"`) {
		t.Fatalf("got %s, want the bearer's scope org:beta", r.body)
	}
	r = sendRequest(t, c, http.MethodGet, env.URL+"/v1/deploy/applications", map[string]string{"Authorization": "Bearer bad"})
	if r.code != http.StatusUnauthorized {
		t.Fatalf("a bad bearer next to a good cookie: %d %s, want 401", r.code, r.body)
	}
}

func TestExpiredSessionIsAnonymous(t *testing.T) {
	env := newSigninEnv(t, nil)
	env.m.AccessTTL = 2 * time.Minute
	c := env.signIn(t, userAlice)
	env.clock.Advance(3 * time.Minute)
	r := sendRequest(t, c, http.MethodGet, env.URL+"/v1/deploy/applications", map[string]string{"Accept": "application/json"})
	if r.code != http.StatusUnauthorized || !strings.Contains(errorBodyMessage(t, r), "the session has expired") {
		t.Fatalf("expired session: %d %s", r.code, r.body)
	}
	if !strings.Contains(strings.Join(r.header.Values("Set-Cookie"), "\n"), "deploy_session.0=;") {
		t.Fatalf("the stale session cookie was not deleted: %v", r.header.Values("Set-Cookie"))
	}
}

func TestBrowserBounce(t *testing.T) {
	env := newSigninEnv(t, nil)
	anon := newBrowser(t)
	member := env.signIn(t, userAlice)
	noOrg := newBrowser(t)
	getPage(t, noOrg, env.startLogin(t, noOrg, userNobody, "/"))
	const path = "/v1/deploy/applications?name=web&projects=a%20b"
	bounce := "/v1/deploy/login?returnTo=" + url.QueryEscape(path)

	tests := []struct {
		name   string
		client *http.Client
		method string
		header map[string]string
		code   int
	}{
		{"navigation by Sec-Fetch-Mode", anon, "GET", map[string]string{"Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, 302},
		{"navigation by Sec-Fetch-Dest", anon, "GET", map[string]string{"Sec-Fetch-Dest": "document"}, 302},
		{"navigation by Accept", anon, "GET", map[string]string{"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}, 302},
		{"403 navigation", noOrg, "GET", map[string]string{"Sec-Fetch-Mode": "navigate"}, 302},
		{"fetch in cors mode", anon, "GET", map[string]string{"Sec-Fetch-Mode": "cors", "Accept": "text/html"}, 401},
		{"fetch in same-origin mode", anon, "GET", map[string]string{"Sec-Fetch-Mode": "same-origin", "Sec-Fetch-Dest": "empty"}, 401},
		{"XHR", anon, "GET", map[string]string{"X-Requested-With": "XMLHttpRequest", "Accept": "text/html"}, 401},
		{"EventSource", anon, "GET", map[string]string{"Accept": "text/event-stream"}, 401},
		{"HTML and JSON accepted", anon, "GET", map[string]string{"Accept": "text/html, application/json"}, 401},
		{"no hints", anon, "GET", nil, 401},
		{"403 fetch", noOrg, "GET", map[string]string{"Sec-Fetch-Mode": "cors"}, 403},
		{"POST navigation", anon, "POST", map[string]string{"Sec-Fetch-Mode": "navigate", "Origin": env.URL}, 401},
		{"signed in", member, "GET", map[string]string{"Sec-Fetch-Mode": "navigate"}, 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := env.URL + path
			if tc.method == "POST" {
				u = env.URL + "/v1/deploy/applications/web/sync"
			}
			r := sendRequest(t, tc.client, tc.method, u, tc.header)
			if r.code != tc.code {
				t.Fatalf("got %d %s, want %d", r.code, r.body, tc.code)
			}
			if tc.code == 302 && r.location != bounce {
				t.Fatalf("bounced to %q, want %q", r.location, bounce)
			}
			if tc.code == 401 || tc.code == 403 {
				errorBodyMessage(t, r)
			}
		})
	}
}

func TestIsNavigation(t *testing.T) {
	for _, tc := range []struct {
		h    map[string]string
		want bool
	}{
		{map[string]string{"Sec-Fetch-Dest": "document"}, true},
		{map[string]string{"Sec-Fetch-Mode": "Navigate"}, true},
		{map[string]string{"Accept": "text/html"}, true},
		{map[string]string{"Accept": "*/*"}, false},
		{map[string]string{"Accept": "application/json, text/html"}, false},
		{map[string]string{"Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "document"}, false},
		{map[string]string{"Sec-Fetch-Mode": "websocket", "Accept": "text/html"}, false},
		{map[string]string{"X-Requested-With": "fetch", "Sec-Fetch-Mode": "navigate"}, false},
		{map[string]string{"Authorization": "Bearer x", "Sec-Fetch-Mode": "navigate"}, false},
	} {
		r := httptest.NewRequest(http.MethodGet, "/x", nil)
		for k, v := range tc.h {
			r.Header.Set(k, v)
		}
		if got := isNavigation(r); got != tc.want {
			t.Errorf("isNavigation(%v) = %v, want %v", tc.h, got, tc.want)
		}
	}
}

func TestSameOrigin(t *testing.T) {
	env := newSigninEnv(t, nil)
	cookie := env.signIn(t, userRoot)
	bearer := newBrowser(t)
	token := "Bearer " + env.idToken(t, userRoot, time.Hour)
	sync := env.URL + "/v1/deploy/applications/web/sync"
	evil := "https://evil.example.com"

	tests := []struct {
		name   string
		client *http.Client
		header map[string]string
		code   int
	}{
		{"cookie, own origin", cookie, map[string]string{"Origin": env.URL}, 200},
		{"cookie, own origin in other case", cookie, map[string]string{"Origin": strings.ToUpper(env.URL)}, 200},
		{"cookie, other origin", cookie, map[string]string{"Origin": evil}, 403},
		{"cookie, other port", cookie, map[string]string{"Origin": "http://127.0.0.1:1"}, 403},
		{"cookie, other scheme", cookie, map[string]string{"Origin": strings.Replace(env.URL, "http:", "https:", 1)}, 403},
		{"cookie, Origin null", cookie, map[string]string{"Origin": "null"}, 403},
		{"cookie, own Referer", cookie, map[string]string{"Referer": env.URL + "/applications/web"}, 200},
		{"cookie, other Referer", cookie, map[string]string{"Referer": evil + "/x"}, 403},
		{"cookie, Origin wins over Referer", cookie, map[string]string{"Origin": evil, "Referer": env.URL + "/"}, 403},
		{"cookie, neither", cookie, nil, 403},
		{"bearer, other origin", bearer, map[string]string{"Authorization": token, "Origin": evil}, 200},
		{"bearer, neither", bearer, map[string]string{"Authorization": token}, 200},
		{"anonymous, other origin", newBrowser(t), map[string]string{"Origin": evil}, 401},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := sendRequest(t, tc.client, http.MethodPost, sync, tc.header)
			if r.code != tc.code {
				t.Fatalf("got %d %s, want %d", r.code, r.body, tc.code)
			}
			if tc.code == 403 && errorBodyMessage(t, r) != "cross-origin request refused" {
				t.Fatalf("got %s, want cross-origin request refused", r.body)
			}
		})
	}
}

func TestSameOriginWithoutAuthenticate(t *testing.T) {
	// Fail closed when SameOrigin runs without Authenticate before it: a
	// request carrying a session cookie and no bearer counts as cookie-borne.
	e := echo.New()
	e.HTTPErrorHandler = errorHandler(nil)
	e.POST("/w", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) }, SameOrigin("https://deploy.example.com"))
	for _, tc := range []struct {
		header map[string]string
		code   int
	}{
		{map[string]string{"Cookie": "__Host-deploy_session.0=x", "Origin": "https://evil.example.com"}, 403},
		{map[string]string{"Cookie": "deploy_session.0=x"}, 403},
		{map[string]string{"Cookie": "__Host-deploy_session.0=x", "Origin": "https://deploy.example.com:443"}, 204},
		{map[string]string{"Cookie": "__Host-deploy_session.0=x", "Authorization": "Bearer t", "Origin": "https://evil.example.com"}, 204},
		{map[string]string{"Origin": "https://evil.example.com"}, 204},
	} {
		req := httptest.NewRequest(http.MethodPost, "/w", nil)
		for k, v := range tc.header {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code != tc.code {
			t.Errorf("%v: got %d %s, want %d", tc.header, rec.Code, rec.Body, tc.code)
		}
	}
}

func TestPrincipalNotFromHeaders(t *testing.T) {
	// Headers a proxy might set for identity are ignored.
	env := newSigninEnv(t, nil)
	r := sendRequest(t, newBrowser(t), http.MethodGet, env.URL+"/v1/deploy/applications", map[string]string{
		"X-Forwarded-User": "root", "X-Remote-User": "root", "X-Auth-Request-Groups": "org:admin", "Remote-User": "root",
	})
	if r.code != http.StatusUnauthorized {
		t.Fatalf("identity headers: %d %s, want 401", r.code, r.body)
	}
	if p := auth.PrincipalFrom(context.Background()); p != nil {
		t.Fatal("principal in a bare context")
	}
}
