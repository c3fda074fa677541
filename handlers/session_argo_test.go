package handlers

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestArgoSignInPaths: Argo CD's UI signs in through /auth/login with an
// absolute return_url of this site; it leads into deployd's flow (the
// provider still returns to /v1/deploy/callback) and back to that page's
// path. Any other origin returns to /. /auth/callback is the same callback;
// /auth/logout and DELETE /api/v1/session end the session.
func TestArgoSignInPaths(t *testing.T) {
	env := newSigninEnv(t, nil)
	for in, want := range map[string]string{
		env.URL + "/applications/tenant-acme/web?view=tree": "/applications/tenant-acme/web?view=tree",
		env.URL:                            "/",
		"/applications":                    "/applications",
		"https://evil.example/":            "/",
		env.URL + "//evil.example/x":       "/",
		"http://" + "user@" + env.URL[7:]:  "/",
		"javascript:alert(1)":              "/",
		env.URL + "/ok\r\nSet-Cookie: x=y": "/",
	} {
		c := newBrowser(t)
		r := getPage(t, c, env.URL+"/auth/login?return_url="+url.QueryEscape(in))
		if r.code != http.StatusFound || !strings.HasPrefix(r.location, env.m.AuthorizationEndpoint()) {
			t.Fatalf("/auth/login: %d to %q, want 302 to the provider", r.code, r.location)
		}
		if got := queryValue(t, r.location, "redirect_uri"); got != env.URL+"/v1/deploy/callback" {
			t.Fatalf("redirect_uri %q", got)
		}
		env.m.QueueUser(userAlice)
		r = getPage(t, c, r.location)
		callback := strings.Replace(r.location, "/v1/deploy/callback?", "/auth/callback?", 1)
		if r = getPage(t, c, callback); r.code != http.StatusFound || env.URL+r.location != strings.Replace(callback, "/auth/callback?", "/v1/deploy/callback?", 1) {
			t.Fatalf("/auth/callback: %d to %q", r.code, r.location)
		}
		if r = getPage(t, c, env.URL+r.location); r.code != http.StatusFound || r.location != want {
			t.Errorf("return_url %q: %d to %q, want %q: %s", in, r.code, r.location, want, r.body)
		}
	}

	c := env.signIn(t, userAlice)
	if r := getPage(t, c, env.URL+"/api/v1/session/userinfo"); !strings.Contains(r.body, `"loggedIn":true`) {
		t.Fatalf("userinfo: %s", r.body)
	}
	r := getPage(t, c, env.URL+"/auth/logout")
	if r.code != http.StatusFound || r.location != "/" {
		t.Fatalf("/auth/logout: %d to %q", r.code, r.location)
	}
	if r := getPage(t, c, env.URL+"/api/v1/session/userinfo"); !strings.Contains(r.body, `"loggedIn":false`) {
		t.Fatalf("userinfo after /auth/logout: %s", r.body)
	}
	c = env.signIn(t, userAlice)
	if r := sendRequest(t, c, http.MethodDelete, env.URL+"/api/v1/session", map[string]string{"Origin": env.URL}); r.code != http.StatusOK {
		t.Fatalf("DELETE /api/v1/session: %d %s", r.code, r.body)
	}
	if r := getPage(t, c, env.URL+"/api/v1/session/userinfo"); !strings.Contains(r.body, `"loggedIn":false`) {
		t.Fatalf("userinfo after DELETE /api/v1/session: %s", r.body)
	}
}
