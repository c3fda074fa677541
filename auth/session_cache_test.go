package auth

import (
	"crypto/sha256"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// TestCookieValueReadsAsNetHTTP: cookieValue finds what Request.Cookie
// finds, for the same headers.
func TestCookieValueReadsAsNetHTTP(t *testing.T) {
	const name = "deploy_session.0"
	for _, lines := range [][]string{
		nil,
		{""},
		{"deploy_session.0=abc"},
		{"  deploy_session.0 = abc ;x=1"},
		{"x=1; deploy_session.0=abc; deploy_session.0=def"},
		{"x=1", "deploy_session.0=second-line"},
		{`deploy_session.0="quoted"`},
		{`deploy_session.0="`},
		{`deploy_session.0=""`},
		{"deploy_session.0="},
		{"deploy_session.0"},
		{`deploy_session.0=bad\value; deploy_session.0=good`},
		{"deploy_session.0=bad\x7fvalue"},
		{"deploy_session.0=with space"},
		{"deploy_session.00=abc; xdeploy_session.0=abc"},
		{";;; deploy_session.0=abc ;;"},
		{strings.Repeat("a=1; ", maxCookies-1) + "deploy_session.0=abc"},
		{strings.Repeat("a=1; ", maxCookies) + "deploy_session.0=abc"},
		{strings.Repeat("a=1; ", maxCookies-1), "deploy_session.0=abc"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		for _, l := range lines {
			r.Header.Add("Cookie", l)
		}
		var want string
		c, err := r.Cookie(name)
		if err == nil {
			want = c.Value
		}
		got, ok := cookieValue(r, name)
		if ok != (err == nil) || got != want {
			short := strings.Join(lines, " | ")
			if len(short) > 80 {
				short = short[len(short)-80:]
			}
			t.Errorf("%q: got %q (%v), want %q (%v)", short, got, ok, want, err == nil)
		}
	}
}

// sessionRequest is a request carrying the session cookies of raw until
// until, and the sealed value they carry.
func sessionRequest(t *testing.T, a *Authenticator, raw string, until time.Time) (*http.Request, string) {
	t.Helper()
	cookies, err := a.sessionCookies(raw, until)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	var sealed strings.Builder
	for _, c := range cookies {
		if c.MaxAge > 0 {
			r.AddCookie(c)
			sealed.WriteString(c.Value)
		}
	}
	return r, sealed.String()
}

// TestSessionPrincipalCache: an opened session is answered from a cache
// keyed by the hash of its sealed value, shared, until the session ends,
// the token expires or 10 minutes pass, whichever is first; then the cookie
// is opened and its token verified again, with the error of the case.
func TestSessionPrincipalCache(t *testing.T) {
	ti := newTestIssuer(t)
	clock := newFakeClock()
	a := newTestAuthenticator(t, ti.URL, clock, nil)
	now := clock.Now()
	raw := ti.sign(t, jose.RS256, ti.claims("deployd", now, map[string]any{"exp": now.Add(30 * time.Minute).Unix(), "groups": []string{"g"}}))

	t.Run("session end", func(t *testing.T) {
		until := clock.Now().Add(5 * time.Minute)
		r, sealed := sessionRequest(t, a, raw, until)
		p, err := a.SessionPrincipal(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		if !p.Expiry.Equal(until) {
			t.Fatalf("principal expires %v, want the session's end %v", p.Expiry, until)
		}
		entry, ok := a.sessions.Peek(sha256.Sum256([]byte(sealed)))
		if !ok || !entry.until.Equal(until) {
			t.Fatalf("cache entry %v (cached %v), want one until %v keyed by the sealed value's hash", entry.until, ok, until)
		}
		hits := a.CacheStats().Hits
		p2, err := a.SessionPrincipal(t.Context(), r)
		if err != nil || p2 != p {
			t.Fatalf("second request: %v, same principal %v; want the cached one", err, p2 == p)
		}
		if got := a.CacheStats().Hits - hits; got != 1 {
			t.Fatalf("a cached session counted %d hits, want 1", got)
		}
		clock.Advance(5 * time.Minute)
		if _, err := a.SessionPrincipal(t.Context(), r); !errors.Is(err, ErrSessionInvalid) {
			t.Fatalf("got %v at the session's end, want ErrSessionInvalid", err)
		}
		if _, ok := a.sessions.Peek(sha256.Sum256([]byte(sealed))); ok {
			t.Fatal("an ended session is still cached")
		}
	})

	t.Run("entry life", func(t *testing.T) {
		r, _ := sessionRequest(t, a, raw, clock.Now().Add(time.Hour))
		if _, err := a.SessionPrincipal(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		misses := a.CacheStats().Misses
		clock.Advance(maxCacheEntryLife)
		p, err := a.SessionPrincipal(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.CacheStats().Misses - misses; got != 1 {
			t.Fatalf("after %v the token was verified %d times, want 1", maxCacheEntryLife, got)
		}
		if want := time.Unix(now.Add(30*time.Minute).Unix(), 0); !p.Expiry.Equal(want) {
			t.Fatalf("principal expires %v, want the token's exp %v", p.Expiry, want)
		}
	})

	t.Run("token expiry", func(t *testing.T) {
		r, _ := sessionRequest(t, a, raw, clock.Now().Add(time.Hour))
		if _, err := a.SessionPrincipal(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		clock.Advance(30 * time.Minute)
		if _, err := a.SessionPrincipal(t.Context(), r); !errors.Is(err, ErrTokenExpired) {
			t.Fatalf("got %v past the token's exp, want ErrTokenExpired", err)
		}
	})

	t.Run("another key", func(t *testing.T) {
		other := newCookieAuthenticator(t, "http://127.0.0.1:8080", clock)
		other.session = mustSealer(t, []byte(strings.Repeat("k", 32)), "session")
		fresh := ti.sign(t, jose.RS256, ti.claims("deployd", clock.Now(), nil))
		r, _ := sessionRequest(t, other, fresh, clock.Now().Add(time.Minute))
		if _, err := a.SessionPrincipal(t.Context(), r); !errors.Is(err, ErrSessionInvalid) {
			t.Fatalf("got %v for a session sealed with another key, want ErrSessionInvalid", err)
		}
	})
}

// TestVerifySharedIsTheCachedPrincipal: the request path's Verify returns
// the cache's Principal itself, Verify a copy of it.
func TestVerifySharedIsTheCachedPrincipal(t *testing.T) {
	ti := newTestIssuer(t)
	clock := newFakeClock()
	a := newTestAuthenticator(t, ti.URL, clock, nil)
	raw := ti.sign(t, jose.RS256, ti.claims("deployd", clock.Now(), nil))
	p1, err := a.VerifyShared(t.Context(), raw)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := a.VerifyShared(t.Context(), raw)
	if err != nil || p2 != p1 {
		t.Fatalf("VerifyShared: %v, same principal %v; want the cached one", err, p2 == p1)
	}
	if p3, err := a.Verify(t.Context(), raw); err != nil || p3 == p1 || p3.Subject != p1.Subject {
		t.Fatalf("Verify: %v, a copy %v; want a copy of the cached principal", err, p3 != p1)
	}
}

// TestCredentialKeyIsSHA256: the cache key is the SHA-256 of the
// credential, whatever buffer the pool hands out.
func TestCredentialKeyIsSHA256(t *testing.T) {
	long := strings.Repeat("x", maxKeyBuf+1)
	for _, parts := range [][]string{{""}, {"a.b.c"}, {long}, {"a.b.c"}, {"ab", "", "c"}} {
		if got, want := credentialKey(parts...), sha256.Sum256([]byte(strings.Join(parts, ""))); got != want {
			t.Fatalf("credentialKey(%d parts) is not the SHA-256 of their concatenation", len(parts))
		}
	}
	if n := testing.AllocsPerRun(100, func() { credentialKey("header.payload.signature") }); n != 0 {
		t.Fatalf("credentialKey allocates %v times a call, want 0", n)
	}
}
