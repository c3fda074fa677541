package handlers

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/auth/authtest"
)

func TestSignInAsMember(t *testing.T) {
	env := newSigninEnv(t, nil)
	c := newBrowser(t)
	cb := env.startLogin(t, c, userAlice, "/v1/deploy/applications?view=tree")

	// The flow cookie is sealed, HttpOnly, Lax, scoped to /v1/deploy and not
	// Secure on a loopback http public URL.
	base, _ := url.Parse(env.URL + "/v1/deploy/callback")
	var flow *http.Cookie
	for _, ck := range c.Jar.Cookies(base) {
		if ck.Name == "deploy_flow" {
			flow = ck
		}
	}
	if flow == nil {
		t.Fatal("no flow cookie after /login")
	}

	r := getPage(t, c, cb)
	if r.code != http.StatusFound || r.location != "/v1/deploy/applications?view=tree" {
		t.Fatalf("callback: %d to %q: %s", r.code, r.location, r.body)
	}
	var session *http.Cookie
	for _, sc := range r.header.Values("Set-Cookie") {
		ck, err := http.ParseSetCookie(sc)
		if err != nil {
			t.Fatal(err)
		}
		switch ck.Name {
		case "deploy_flow":
			if ck.MaxAge != -1 || ck.Path != "/v1/deploy" {
				t.Fatalf("flow cookie not cleared by the callback: %q", sc)
			}
		case "deploy_session.0":
			session = ck
			// The session ends at the token's exp: mockoidc stamps it
			// on the real clock (10 minutes on), the server's clock is
			// fixed at the test's start, so it may be a few seconds more.
			if !ck.HttpOnly || ck.Secure || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" || ck.MaxAge <= 0 || ck.MaxAge > 600+int(time.Since(env.clock.Now())/time.Second)+1 {
				t.Fatalf("session cookie %q", sc)
			}
		}
	}
	// Not the ID token in clear: a JWT starts with the encoding of
	// {"alg": (a sealed value is random and may hold "eyJ" by chance).
	if session == nil || strings.Contains(session.Value, "eyJhbGci") {
		t.Fatalf("no sealed session cookie set: %v", r.header.Values("Set-Cookie"))
	}

	r = getPage(t, c, env.URL+"/v1/deploy/session/userinfo")
	want := `{"loggedIn":true,"username":"alice","iss":"` + env.m.Issuer() + `","groups":["dev"],"org":"acme","superAdmin":false,"orgAdmin":false}`
	if r.code != http.StatusOK || strings.TrimSpace(r.body) != want {
		t.Fatalf("userinfo: %d %s, want %s", r.code, r.body, want)
	}
	if r = getPage(t, c, env.URL+"/v1/deploy/applications"); r.code != http.StatusOK || !strings.Contains(r.body, `"org:acme"`) {
		t.Fatalf("protected route: %d %s", r.code, r.body)
	}

	// Nothing secret reached the log.
	logs := env.logs.String()
	for _, secret := range []string{session.Value, flow.Value, "eyJ", env.m.ClientSecret, queryValue(t, cb, "code"), queryValue(t, cb, "state")} {
		if strings.Contains(logs, secret) {
			t.Fatalf("the log contains a secret %.12q…:\n%s", secret, logs)
		}
	}
}

func TestSignInAsSuperAdminAndOrgAdmin(t *testing.T) {
	env := newSigninEnv(t, nil)
	for _, tc := range []struct {
		user  authtest.User
		scope string
		info  string
	}{
		{userRoot, "*", `"org":"admin","superAdmin":true,"orgAdmin":false`},
		{userBob, "org:beta", `"org":"beta","superAdmin":false,"orgAdmin":true`},
	} {
		c := env.signIn(t, tc.user)
		if r := getPage(t, c, env.URL+"/v1/deploy/applications"); !strings.Contains(r.body, `"`+tc.scope+`"`) {
			t.Fatalf("%s: scope %s, want %s", tc.user.Subject, r.body, tc.scope)
		}
		if r := getPage(t, c, env.URL+"/v1/deploy/session/userinfo"); !strings.Contains(r.body, tc.info) {
			t.Fatalf("%s: userinfo %s, want %s", tc.user.Subject, r.body, tc.info)
		}
	}
}

func TestCallbackRefusals(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*auth.Config)
		prepare func(t *testing.T, env *signinEnv, c *http.Client, cb string) string // returns the URL to call
		code    int
		msg     string
	}{
		{
			name: "no flow cookie",
			prepare: func(t *testing.T, env *signinEnv, c *http.Client, cb string) string {
				c.Jar, _ = cookiejar.New(nil)
				return cb
			},
			code: 400, msg: "no sign-in in progress",
		},
		{
			name: "tampered flow cookie",
			prepare: func(t *testing.T, env *signinEnv, c *http.Client, cb string) string {
				u, _ := url.Parse(env.URL + "/v1/deploy/callback")
				for _, ck := range c.Jar.Cookies(u) {
					if ck.Name == "deploy_flow" {
						b := []byte(ck.Value)
						b[len(b)/2] ^= 1
						c.Jar, _ = cookiejar.New(nil)
						c.Jar.SetCookies(u, []*http.Cookie{{Name: "deploy_flow", Value: string(b), Path: "/v1/deploy"}})
					}
				}
				return cb
			},
			code: 400, msg: "no sign-in in progress",
		},
		{
			name: "forged flow cookie",
			prepare: func(t *testing.T, env *signinEnv, c *http.Client, cb string) string {
				u, _ := url.Parse(env.URL + "/v1/deploy/callback")
				c.Jar, _ = cookiejar.New(nil)
				forged := base64.RawURLEncoding.EncodeToString([]byte(`{"s":"` + queryValue(t, cb, "state") + `","n":"n","v":"v","r":"/","t":0}`))
				c.Jar.SetCookies(u, []*http.Cookie{{Name: "deploy_flow", Value: forged, Path: "/v1/deploy"}})
				return cb
			},
			code: 400, msg: "no sign-in in progress",
		},
		{
			name: "state mismatch",
			prepare: func(t *testing.T, env *signinEnv, c *http.Client, cb string) string {
				return strings.Replace(cb, "state="+url.QueryEscape(queryValue(t, cb, "state")), "state=forged-state-value", 1)
			},
			code: 400, msg: "sign-in state mismatch",
		},
		{
			name: "provider returned an error",
			prepare: func(t *testing.T, env *signinEnv, c *http.Client, cb string) string {
				return env.URL + "/v1/deploy/callback?state=" + url.QueryEscape(queryValue(t, cb, "state")) +
					"&error=access_denied&error_description=" + url.QueryEscape("<script>raw provider text</script>")
			},
			code: 403, msg: "the identity provider refused the sign-in",
		},
		{
			name: "missing code",
			prepare: func(t *testing.T, env *signinEnv, c *http.Client, cb string) string {
				return env.URL + "/v1/deploy/callback?state=" + url.QueryEscape(queryValue(t, cb, "state"))
			},
			code: 400, msg: "the identity provider sent no authorization code",
		},
		{
			name: "exchange refused",
			prepare: func(t *testing.T, env *signinEnv, c *http.Client, cb string) string {
				return env.URL + "/v1/deploy/callback?state=" + url.QueryEscape(queryValue(t, cb, "state")) + "&code=not-a-code"
			},
			code: 400, msg: "the identity provider refused the authorization code",
		},
		{
			name:   "token refused (algorithm not allowed)",
			mutate: func(c *auth.Config) { c.Algorithms = []string{"ES256"} },
			code:   401, msg: "the identity provider's token was refused",
		},
		{
			name: "token already expired",
			prepare: func(t *testing.T, env *signinEnv, c *http.Client, cb string) string {
				env.clock.Advance(env.m.AccessTTL + time.Second) // within the flow's 10 minutes
				return cb
			},
			code: 401, msg: "already expired",
		},
		{
			name: "flow too old",
			prepare: func(t *testing.T, env *signinEnv, c *http.Client, cb string) string {
				env.clock.Advance(auth.FlowLifetime + time.Second)
				return cb
			},
			code: 400, msg: "took longer than 10 minutes",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := newSigninEnv(t, func(c *auth.Config) {
				if tc.mutate != nil {
					tc.mutate(c)
				}
			})
			env.m.AccessTTL = 2 * time.Minute
			c := newBrowser(t)
			cb := env.startLogin(t, c, userAlice, "/")
			u := cb
			if tc.prepare != nil {
				u = tc.prepare(t, env, c, cb)
			}
			r := getPage(t, c, u)
			if r.code != tc.code {
				t.Fatalf("got %d %s, want %d", r.code, r.body, tc.code)
			}
			if msg := errorBodyMessage(t, r); !strings.Contains(msg, tc.msg) {
				t.Fatalf("got message %q, want one containing %q", msg, tc.msg)
			}
			if strings.Contains(r.body, "raw provider text") || strings.Contains(r.body, "oidc:") || strings.Contains(r.body, "oauth2:") {
				t.Fatalf("the answer leaks a cause: %s", r.body)
			}
			for _, sc := range r.header.Values("Set-Cookie") {
				if strings.HasPrefix(sc, "deploy_session") {
					t.Fatalf("a refused sign-in set a session cookie: %q", sc)
				}
			}
			if !strings.Contains(strings.Join(r.header.Values("Set-Cookie"), "\n"), "deploy_flow=;") {
				t.Fatalf("a refused callback did not clear the flow cookie: %v", r.header.Values("Set-Cookie"))
			}
			if r := getPage(t, c, env.URL+"/v1/deploy/session/userinfo"); !strings.Contains(r.body, `"loggedIn":false`) {
				t.Fatalf("userinfo after a refused sign-in: %s", r.body)
			}
		})
	}
}

func TestCallbackReplay(t *testing.T) {
	env := newSigninEnv(t, nil)
	c := newBrowser(t)
	cb := env.startLogin(t, c, userAlice, "/")
	u, _ := url.Parse(env.URL + "/v1/deploy/callback")
	var flow *http.Cookie
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "deploy_flow" {
			flow = ck
		}
	}
	if r := getPage(t, c, cb); r.code != http.StatusFound {
		t.Fatalf("first callback: %d %s", r.code, r.body)
	}
	// The callback cleared the cookie; a client re-sending it is refused.
	replayer := newBrowser(t)
	replayer.Jar.SetCookies(u, []*http.Cookie{{Name: flow.Name, Value: flow.Value, Path: "/v1/deploy"}})
	r := getPage(t, replayer, cb)
	if r.code != http.StatusBadRequest || !strings.Contains(errorBodyMessage(t, r), "already completed") {
		t.Fatalf("replayed callback: %d %s, want 400 already completed", r.code, r.body)
	}
	if r := getPage(t, replayer, env.URL+"/v1/deploy/session/userinfo"); !strings.Contains(r.body, `"loggedIn":false`) {
		t.Fatalf("the replay signed in: %s", r.body)
	}
}

func TestCallbackWithoutOrg(t *testing.T) {
	env := newSigninEnv(t, nil)
	c := newBrowser(t)
	r := getPage(t, c, env.startLogin(t, c, userNobody, "/v1/deploy/applications"))
	if r.code != http.StatusForbidden || !strings.Contains(errorBodyMessage(t, r), "signed in as nobody, but the account belongs to no organization") {
		t.Fatalf("callback without org: %d %s", r.code, r.body)
	}
	if r := getPage(t, c, env.URL+"/v1/deploy/session/userinfo"); !strings.Contains(r.body, `"loggedIn":true,"username":"nobody"`) {
		t.Fatalf("userinfo: %s", r.body)
	}
	if r := getPage(t, c, env.URL+"/v1/deploy/applications"); r.code != http.StatusForbidden {
		t.Fatalf("protected route: %d %s, want 403", r.code, r.body)
	}
}

func TestReturnPathThroughSignIn(t *testing.T) {
	env := newSigninEnv(t, nil)
	for in, want := range map[string]string{
		"/v1/deploy/applications?x=1#n": "/v1/deploy/applications?x=1#n",
		"":                              "/",
		"//evil.com":                    "/",
		`/\evil.com`:                    "/",
		"https://evil.com/":             "/",
		"javascript:alert(1)":           "/",
		"/ok\r\nSet-Cookie: x=y":        "/",
		"/%09/evil.com":                 "/%09/evil.com",
	} {
		c := newBrowser(t)
		r := getPage(t, c, env.startLogin(t, c, userAlice, in))
		if r.code != http.StatusFound || r.location != want {
			t.Errorf("returnTo %q: %d to %q, want %q", in, r.code, r.location, want)
		}
	}
}

func TestLogout(t *testing.T) {
	env := newSigninEnv(t, nil)
	c := env.signIn(t, userAlice)
	r := sendRequest(t, c, http.MethodPost, env.URL+"/v1/deploy/logout", map[string]string{"Origin": env.URL})
	if r.code != http.StatusOK || strings.TrimSpace(r.body) != `{"loggedIn":false,"loginUrl":"/v1/deploy/login"}` {
		t.Fatalf("logout: %d %s", r.code, r.body)
	}
	cleared := 0
	for _, sc := range r.header.Values("Set-Cookie") {
		if strings.HasPrefix(sc, "deploy_session.") && strings.Contains(sc, "Max-Age=0") {
			cleared++
		}
	}
	if cleared != 4 {
		t.Fatalf("logout cleared %d session cookies, want 4: %v", cleared, r.header.Values("Set-Cookie"))
	}
	if r := getPage(t, c, env.URL+"/v1/deploy/session/userinfo"); strings.TrimSpace(r.body) != `{"loggedIn":false,"loginUrl":"/v1/deploy/login"}` {
		t.Fatalf("userinfo after logout: %s", r.body)
	}
}

func TestUserinfoNeverUnauthorized(t *testing.T) {
	env := newSigninEnv(t, nil)
	c := newBrowser(t)
	want := `{"loggedIn":false,"loginUrl":"/v1/deploy/login"}`
	for _, h := range []map[string]string{
		nil,
		{"Authorization": "Bearer not-a-token"},
		{"Authorization": "Basic dXNlcjpwYXNz"},
		{"Cookie": "deploy_session.0=garbage"},
	} {
		r := sendRequest(t, c, http.MethodGet, env.URL+"/v1/deploy/session/userinfo", h)
		if r.code != http.StatusOK || strings.TrimSpace(r.body) != want {
			t.Errorf("userinfo with %v: %d %s, want 200 %s", h, r.code, r.body, want)
		}
	}
}

func TestSignInDisabled(t *testing.T) {
	env := newSigninEnv(t, func(c *auth.Config) { c.PublicURL = "" })
	c := newBrowser(t)
	r := getPage(t, c, env.URL+"/v1/deploy/login")
	if r.code != http.StatusServiceUnavailable || errorBodyMessage(t, r) != "sign-in disabled: DEPLOY_PUBLIC_URL is not set" {
		t.Fatalf("login while disabled: %d %s", r.code, r.body)
	}
	r = getPage(t, c, env.URL+"/v1/deploy/callback?state=a&code=b")
	if r.code != http.StatusServiceUnavailable {
		t.Fatalf("callback while disabled: %d %s", r.code, r.body)
	}
	token := env.idToken(t, userAlice, time.Hour)
	r = sendRequest(t, c, http.MethodGet, env.URL+"/v1/deploy/applications", map[string]string{"Authorization": "Bearer " + token})
	if r.code != http.StatusUnauthorized || errorBodyMessage(t, r) != "sign-in disabled: DEPLOY_PUBLIC_URL is not set" {
		t.Fatalf("bearer while disabled: %d %s", r.code, r.body)
	}
	r = sendRequest(t, c, http.MethodGet, env.URL+"/v1/deploy/session/userinfo", map[string]string{"Authorization": "Bearer " + token})
	if r.code != http.StatusOK || !strings.Contains(r.body, `"loggedIn":false`) {
		t.Fatalf("userinfo while disabled: %d %s", r.code, r.body)
	}
}

func TestUserinfoShape(t *testing.T) {
	env := newSigninEnv(t, nil)
	c := newBrowser(t)
	r := sendRequest(t, c, http.MethodGet, env.URL+"/v1/deploy/session/userinfo",
		map[string]string{"Authorization": "Bearer " + env.idToken(t, userRoot, time.Hour)})
	var got map[string]any
	if err := json.Unmarshal([]byte(r.body), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"loggedIn": true, "username": "root", "iss": env.m.Issuer(), "groups": []any{},
		"org": "admin", "superAdmin": true, "orgAdmin": false,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("userinfo (-want +got):\n%s", diff)
	}
}
