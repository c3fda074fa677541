package handlers

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/auth/authtest"
	"github.com/hanzoai/deploy/auth/hydratest"
)

// hydraDeployd serves deployd's sign-in routes on loopback against Hydra,
// registered there as client c (confidential unless public).
func hydraDeployd(t *testing.T, h *hydratest.Server, public bool) (string, hydratest.Client) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + l.Addr().String()
	c := h.CreateClient(t, hydratest.ClientOptions{RedirectURIs: []string{base + auth.CallbackPath}, Public: public})
	logs := &authtest.LogBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a := auth.New(t.Context(), auth.Config{
		Issuer: h.Issuer, ClientID: c.ID, ClientSecret: c.Secret, PublicURL: base,
		CookieKey: bytes.Repeat([]byte{5}, 32),
	}, log)
	t.Cleanup(a.Close)
	if st := a.Status(); !st.Enabled {
		t.Fatalf("sign-in disabled against Hydra: %s", st.Reason)
	}
	srv := httptest.NewUnstartedServer(newSigninEcho(a, base, log))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		if strings.Contains(logs.String(), "eyJ") {
			t.Errorf("a token reached the log:\n%s", logs.String())
		}
	})
	return base, c
}

// hydraSignIn follows a whole sign-in like a browser: deployd's login,
// Hydra, the login and consent app, Hydra again, deployd's callback, and the
// return path. It returns the browser and the final response.
func hydraSignIn(t *testing.T, base, returnTo string) (*http.Client, *http.Response, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	var hops []string
	c := &http.Client{Jar: jar, Timeout: 20 * time.Second, CheckRedirect: func(r *http.Request, via []*http.Request) error {
		hops = append(hops, r.URL.Scheme+"://"+r.URL.Host+r.URL.Path)
		if len(via) > 15 {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := c.Get(base + auth.LoginPath + "?returnTo=" + returnTo)
	if err != nil {
		t.Fatalf("sign-in: %v (hops %v)", err, hops)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if len(hops) < 6 {
		t.Fatalf("sign-in took %d redirects, want the whole provider round trip: %v", len(hops), hops)
	}
	return c, resp, string(b)
}

func TestHydraSignIn(t *testing.T) {
	h := hydratest.Start(t)
	for _, public := range []bool{false, true} {
		name := "confidential client"
		if public {
			name = "public client with PKCE only"
		}
		t.Run(name, func(t *testing.T) {
			base, _ := hydraDeployd(t, h, public)
			for _, tc := range []struct {
				id       hydratest.Identity
				scope    string
				userinfo string
			}{
				{
					id: hydratest.Identity{Subject: "alice", Claims: map[string]any{
						"preferred_username": "alice", "email": "alice@acme.test", "owner": "acme", "isAdmin": false, "groups": []string{"dev"},
					}},
					scope:    "org:acme",
					userinfo: `{"loggedIn":true,"username":"alice","iss":"` + h.Issuer + `","groups":["dev"],"org":"acme","superAdmin":false,"orgAdmin":false}`,
				},
				{
					id:       hydratest.Identity{Subject: "root", Claims: map[string]any{"preferred_username": "root", "owner": "admin"}},
					scope:    "*",
					userinfo: `{"loggedIn":true,"username":"root","iss":"` + h.Issuer + `","groups":[],"org":"admin","superAdmin":true,"orgAdmin":false}`,
				},
			} {
				h.SetIdentity(tc.id)
				c, resp, body := hydraSignIn(t, base, "%2Fv1%2Fdeploy%2Fapplications%3Fx%3D1")
				if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/v1/deploy/applications" ||
					resp.Request.URL.RawQuery != "x=1" || !strings.Contains(body, `"scope":"`+tc.scope+`"`) {
					t.Fatalf("%s: sign-in ended at %s with %d %s", tc.id.Subject, resp.Request.URL, resp.StatusCode, body)
				}
				r := getPage(t, c, base+"/v1/deploy/session/userinfo")
				if strings.TrimSpace(r.body) != tc.userinfo {
					t.Fatalf("%s: userinfo %s, want %s", tc.id.Subject, r.body, tc.userinfo)
				}
			}
		})
	}
}

func TestHydraBearer(t *testing.T) {
	h := hydratest.Start(t)
	base, deployd := hydraDeployd(t, h, false)
	other := h.CreateClient(t, hydratest.ClientOptions{})
	hydraAlice := hydratest.Identity{Subject: "alice", Claims: map[string]any{"owner": "acme"}}
	c := &http.Client{Timeout: 10 * time.Second}

	r := sendRequest(t, c, http.MethodGet, base+"/v1/deploy/applications", map[string]string{"Authorization": "Bearer " + h.IDToken(t, deployd, hydraAlice)})
	if r.code != http.StatusOK || !strings.Contains(r.body, `"scope":"org:acme"`) {
		t.Fatalf("bearer ID token of deployd's client: %d %s", r.code, r.body)
	}
	r = sendRequest(t, c, http.MethodGet, base+"/v1/deploy/applications", map[string]string{"Authorization": "Bearer " + h.IDToken(t, other, hydraAlice)})
	if r.code != http.StatusUnauthorized || !strings.Contains(errorBodyMessage(t, r), "the bearer token was refused") {
		t.Fatalf("bearer ID token of another client: %d %s, want 401", r.code, r.body)
	}
}
