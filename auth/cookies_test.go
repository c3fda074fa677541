package auth

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func mustSealer(t testing.TB, key []byte, purpose string) *sealer {
	t.Helper()
	s, err := newSealer(key, purpose)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSealRoundTripAndTamper(t *testing.T) {
	s := mustSealer(t, testKey, "flow")
	v := s.seal([]byte("hello"))
	got, err := s.open(v)
	if err != nil || string(got) != "hello" {
		t.Fatalf("open(seal(hello)) = %q, %v", got, err)
	}
	if v2 := s.seal([]byte("hello")); v2 == v {
		t.Fatal("two seals of one plaintext are equal: nonce reused")
	}
	if strings.Contains(v, "hello") {
		t.Fatal("sealed value shows the plaintext")
	}

	raw, _ := base64.RawURLEncoding.DecodeString(v)
	for i := range raw {
		for _, bit := range []byte{0x01, 0x80} {
			b := bytes.Clone(raw)
			b[i] ^= bit
			if _, err := s.open(base64.RawURLEncoding.EncodeToString(b)); !errors.Is(err, errUnsealed) {
				t.Fatalf("byte %d flipped: got %v, want errUnsealed", i, err)
			}
		}
	}
	for _, bad := range []string{"", "x", v[:len(v)-1], v + "A", v + "=", strings.ToUpper(v), "!!!" + v} {
		if _, err := s.open(bad); err == nil {
			t.Fatalf("open(%q) accepted", bad)
		}
	}

	other := mustSealer(t, bytes.Repeat([]byte{8}, 32), "flow")
	if _, err := other.open(v); err == nil {
		t.Fatal("a value sealed with another key opened")
	}
	session := mustSealer(t, testKey, "session")
	if _, err := session.open(v); err == nil {
		t.Fatal("a flow value opened as a session value")
	}
}

func newCookieAuthenticator(t testing.TB, publicURL string, clock *fakeClock) *Authenticator {
	t.Helper()
	pub, err := parsePublicURL(publicURL)
	if err != nil {
		t.Fatal(err)
	}
	return &Authenticator{
		now:     clock.Now,
		public:  pub,
		flow:    mustSealer(t, testKey, "flow"),
		session: mustSealer(t, testKey, "session"),
	}
}

func TestFlowCookie(t *testing.T) {
	clock := newFakeClock()
	for _, tc := range []struct {
		public, name string
		secure       bool
	}{
		{"https://deploy.example.com", "__Secure-deploy_flow", true},
		{"http://127.0.0.1:8080", "deploy_flow", false},
		{"http://localhost", "deploy_flow", false},
	} {
		a := newCookieAuthenticator(t, tc.public, clock)
		c := a.flowCookie(flowState{State: "s", Nonce: "n", Verifier: "v", Return: "/x", IssuedAt: clock.Now().Unix()})
		if c.Name != tc.name || c.Path != "/v1/deploy" || !c.HttpOnly || c.Secure != tc.secure ||
			c.SameSite != http.SameSiteLaxMode || c.MaxAge != 600 {
			t.Fatalf("%s: flow cookie %+v", tc.public, c)
		}
		if err := c.Valid(); err != nil {
			t.Fatalf("%s: invalid cookie: %v", tc.public, err)
		}
		f, err := a.openFlowValue(c.Value)
		if err != nil || f.State != "s" || f.Return != "/x" {
			t.Fatalf("%s: openFlowValue = %+v, %v", tc.public, f, err)
		}
		clr := a.ClearFlowCookie()
		if clr.Name != tc.name || clr.MaxAge != -1 || clr.Path != "/v1/deploy" {
			t.Fatalf("%s: clearing cookie %+v", tc.public, clr)
		}
	}
}

func TestFlowCookieExpires(t *testing.T) {
	clock := newFakeClock()
	a := newCookieAuthenticator(t, "https://deploy.example.com", clock)
	c := a.flowCookie(flowState{State: "s", Nonce: "n", Verifier: "v", IssuedAt: clock.Now().Unix()})
	clock.Advance(FlowLifetime - time.Second)
	if _, err := a.openFlowValue(c.Value); err != nil {
		t.Fatalf("flow refused before its lifetime: %v", err)
	}
	clock.Advance(2 * time.Second)
	if _, err := a.openFlowValue(c.Value); !errors.Is(err, ErrFlowExpired) {
		t.Fatalf("got %v after the lifetime, want ErrFlowExpired", err)
	}
}

func TestSessionCookiesChunking(t *testing.T) {
	clock := newFakeClock()
	until := clock.Now().Add(time.Hour)
	for _, tc := range []struct {
		name     string
		tokenLen int
		chunks   int
		err      error
	}{
		{"small", 900, 1, nil},
		{"two cookies", 4000, 2, nil},
		{"four cookies", 10000, 4, nil},
		{"too large", 12000, 0, ErrSessionTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newCookieAuthenticator(t, "https://deploy.example.com", clock)
			tok := strings.Repeat("t", tc.tokenLen)
			cookies, err := a.sessionCookies(tok, until)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("got %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(cookies) != maxSessionChunks {
				t.Fatalf("got %d cookies, want %d (set + deleted)", len(cookies), maxSessionChunks)
			}
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			set := 0
			for i, c := range cookies {
				if want := "__Host-deploy_session." + string(rune('0'+i)); c.Name != want {
					t.Fatalf("cookie %d named %q, want %q", i, c.Name, want)
				}
				if c.Path != "/" || !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteLaxMode {
					t.Fatalf("cookie %+v", c)
				}
				if c.MaxAge < 0 {
					continue
				}
				set++
				if len(c.String()) > 4096 {
					t.Fatalf("cookie %d is %d bytes with attributes, over 4096", i, len(c.String()))
				}
				if c.MaxAge != 3600 {
					t.Fatalf("cookie max-age %d, want 3600", c.MaxAge)
				}
				if strings.Contains(c.Value, "tttt") {
					t.Fatal("the token is readable in the cookie")
				}
				r.AddCookie(c)
			}
			if set != tc.chunks {
				t.Fatalf("got %d chunks, want %d", set, tc.chunks)
			}
			s, err := a.sessionToken(r)
			if err != nil || s.Token != tok {
				t.Fatalf("sessionToken: %v (token match %v)", err, s.Token == tok)
			}

			// Reordered or missing chunks do not open.
			if tc.chunks > 1 {
				r2 := httptest.NewRequest(http.MethodGet, "/", nil)
				r2.AddCookie(cookies[0])
				if _, err := a.sessionToken(r2); !errors.Is(err, ErrSessionInvalid) {
					t.Fatalf("missing chunk: got %v, want ErrSessionInvalid", err)
				}
			}
		})
	}
}

func TestSessionCookieLifetime(t *testing.T) {
	clock := newFakeClock()
	a := newCookieAuthenticator(t, "http://127.0.0.1:9", clock)
	cookies, err := a.sessionCookies("tok", clock.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.AddCookie(cookies[0])
	if cookies[0].Name != "deploy_session.0" || cookies[0].Secure {
		t.Fatalf("loopback http session cookie %+v, want deploy_session.0 without Secure", cookies[0])
	}
	if _, err := a.sessionToken(r); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if _, err := a.sessionToken(r); !errors.Is(err, ErrSessionInvalid) {
		t.Fatalf("got %v at the end of the session, want ErrSessionInvalid", err)
	}
	if _, err := a.sessionToken(httptest.NewRequest(http.MethodGet, "/", nil)); !errors.Is(err, ErrNoSession) {
		t.Fatalf("got %v without a cookie, want ErrNoSession", err)
	}
}

// fuzzFlowAuthenticator seals with fixed key material, so every value it
// ever sealed (including corpus entries from earlier runs) carries a state
// starting with "seed-".
func fuzzFlowAuthenticator(t testing.TB) *Authenticator {
	a := newCookieAuthenticator(t, "https://deploy.example.com", &fakeClock{t: time.Unix(1_800_000_000, 0)})
	return a
}

func FuzzOpenFlowCookie(f *testing.F) {
	a := fuzzFlowAuthenticator(f)
	for i, ret := range []string{"/", "/apps?x=1", ""} {
		f.Add(a.flowCookie(flowState{State: "seed-" + string(rune('a'+i)), Nonce: "n", Verifier: "v", Return: ret, IssuedAt: a.now().Unix()}).Value)
	}
	f.Add("")
	f.Add("AQ")
	f.Add(strings.Repeat("A", 60))
	other := mustSealer(f, bytes.Repeat([]byte{9}, 32), "flow")
	forged, _ := json.Marshal(flowState{State: "forged", Nonce: "n", Verifier: "v", IssuedAt: a.now().Unix()})
	f.Add(other.seal(forged))
	f.Add(a.session.seal(forged))

	f.Fuzz(func(t *testing.T, v string) {
		fs, err := a.openFlowValue(v)
		if err != nil {
			if !errors.Is(err, ErrNoFlow) && !errors.Is(err, ErrFlowExpired) {
				t.Fatalf("openFlowValue error %v is neither ErrNoFlow nor ErrFlowExpired", err)
			}
			return
		}
		if !strings.HasPrefix(fs.State, "seed-") {
			t.Fatalf("accepted a flow this key never sealed: %+v", fs)
		}
	})
}

func FuzzOpenSessionCookie(f *testing.F) {
	a := fuzzFlowAuthenticator(f)
	cookies, err := a.sessionCookies("seed-token", a.now().Add(time.Hour))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(cookies[0].Value)
	f.Add("")
	f.Add(a.flow.seal([]byte(`{"tok":"forged","u":9999999999}`)))
	f.Fuzz(func(t *testing.T, v string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Cookie", "__Host-deploy_session.0="+v)
		s, err := a.sessionToken(r)
		if err != nil {
			return
		}
		if s.Token != "seed-token" {
			t.Fatalf("accepted a session this key never sealed: %q", s.Token)
		}
	})
}
