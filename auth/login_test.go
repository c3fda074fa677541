package auth

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/hanzoai/deploy/auth/authtest"
)

func startMockOIDC(t testing.TB) *mockoidc.MockOIDC {
	t.Helper()
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return m
}

func newMockAuthenticator(t testing.TB, m *mockoidc.MockOIDC, clock *fakeClock) *Authenticator {
	t.Helper()
	return newTestAuthenticator(t, m.Issuer(), clock, func(c *Config) {
		c.ClientID, c.ClientSecret = m.ClientID, m.ClientSecret
	})
}

var noRedirect = &http.Client{
	Timeout:       5 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// authorize sends the browser's request to the provider and returns the
// callback request it redirects to, carrying the flow cookie.
func authorize(t *testing.T, l *Login) *http.Request {
	t.Helper()
	resp, err := noRedirect.Get(l.AuthURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, "http://127.0.0.1:8080/v1/deploy/callback?") {
		t.Fatalf("authorize: %d to %q", resp.StatusCode, loc)
	}
	r := httptest.NewRequest(http.MethodGet, loc, nil)
	r.AddCookie(l.Cookie)
	return r
}

func TestLoginFlow(t *testing.T) {
	m := startMockOIDC(t)
	clock := newFakeClock()
	a := newMockAuthenticator(t, m, clock)
	m.QueueUser(authtest.User{Subject: "alice", Extra: map[string]any{"preferred_username": "alice", "owner": "acme", "isAdmin": true}})

	l, err := a.StartLogin("/applications/web?x=1")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(l.AuthURL)
	q := u.Query()
	if q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43 ||
		len(q.Get("state")) < 43 || len(q.Get("nonce")) < 43 ||
		q.Get("redirect_uri") != "http://127.0.0.1:8080/v1/deploy/callback" || q.Get("scope") != "openid profile email" {
		t.Fatalf("authorization URL %s", l.AuthURL)
	}
	if strings.Contains(l.Cookie.Value, q.Get("state")) {
		t.Fatal("the flow cookie shows the state")
	}

	done, err := a.FinishLogin(t.Context(), authorize(t, l))
	if err != nil {
		t.Fatal(err)
	}
	p := done.Principal
	if p.Subject != "alice" || p.Org != "acme" || !p.OrgAdmin || p.SuperAdmin || done.ReturnTo != "/applications/web?x=1" {
		t.Fatalf("completed %+v principal %+v", done, p)
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	for _, c := range done.Cookies {
		if c.MaxAge > 0 {
			r.AddCookie(c)
		}
	}
	sp, err := a.SessionPrincipal(t.Context(), r)
	if err != nil || sp.Subject != "alice" {
		t.Fatalf("SessionPrincipal = %+v, %v", sp, err)
	}
}

func TestLoginFlowRefusals(t *testing.T) {
	m := startMockOIDC(t)
	clock := newFakeClock()
	a := newMockAuthenticator(t, m, clock)

	t.Run("nonce mismatch", func(t *testing.T) {
		l, err := a.StartLogin("/")
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(l.AuthURL)
		q := u.Query()
		q.Set("nonce", "a-nonce-the-flow-did-not-make")
		u.RawQuery = q.Encode()
		l.AuthURL = u.String()
		if _, err := a.FinishLogin(t.Context(), authorize(t, l)); !errors.Is(err, ErrTokenRefused) {
			t.Fatalf("got %v, want ErrTokenRefused", err)
		}
	})
	t.Run("PKCE verifier of another flow", func(t *testing.T) {
		l1, _ := a.StartLogin("/")
		l2, _ := a.StartLogin("/")
		// The provider saw l1's challenge; the cookie of l2 holds another
		// verifier, and l2's state is swapped in so only PKCE can object.
		r := authorize(t, l1)
		f2, err := a.openFlowValue(l2.Cookie.Value)
		if err != nil {
			t.Fatal(err)
		}
		q := r.URL.Query()
		q.Set("state", f2.State)
		r = httptest.NewRequest(http.MethodGet, "/v1/deploy/callback?"+q.Encode(), nil)
		r.AddCookie(l2.Cookie)
		if _, err := a.FinishLogin(t.Context(), r); !errors.Is(err, ErrExchangeRefused) {
			t.Fatalf("got %v, want ErrExchangeRefused", err)
		}
	})
	t.Run("flow older than 10 minutes", func(t *testing.T) {
		l, _ := a.StartLogin("/")
		r := authorize(t, l)
		clock.Advance(FlowLifetime + time.Second)
		defer clock.Advance(-FlowLifetime - time.Second)
		if _, err := a.FinishLogin(t.Context(), r); !errors.Is(err, ErrFlowExpired) {
			t.Fatalf("got %v, want ErrFlowExpired", err)
		}
	})
}
