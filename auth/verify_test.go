package auth

import (
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/google/go-cmp/cmp"
)

func TestVerify(t *testing.T) {
	ti := newTestIssuer(t)
	clock := newFakeClock()
	now := clock.Now()
	other := newTestIssuer(t) // same keys, other issuer URL

	tests := []struct {
		name    string
		algs    []string // allow-list; nil = default
		alg     jose.SignatureAlgorithm
		claims  map[string]any
		token   string // used instead of a signed one when set
		wantErr error
	}{
		{name: "RS256 default allow-list", alg: jose.RS256, claims: ti.claims("deployd", now, nil)},
		{name: "ES256 default allow-list", alg: jose.ES256, claims: ti.claims("deployd", now, nil)},
		{name: "PS256 not in default allow-list", alg: jose.PS256, claims: ti.claims("deployd", now, nil), wantErr: ErrTokenRefused},
		{name: "RS384 not in default allow-list", alg: jose.RS384, claims: ti.claims("deployd", now, nil), wantErr: ErrTokenRefused},
		{name: "PS256 allowed when configured", algs: []string{"PS256"}, alg: jose.PS256, claims: ti.claims("deployd", now, nil)},
		{name: "RS256 refused when only ES256 allowed", algs: []string{"ES256"}, alg: jose.RS256, claims: ti.claims("deployd", now, nil), wantErr: ErrTokenRefused},
		{name: "HS256 with the public key as secret", alg: jose.HS256, claims: ti.claims("deployd", now, nil), wantErr: ErrTokenRefused},
		{name: "wrong audience", alg: jose.RS256, claims: ti.claims("someone-else", now, nil), wantErr: ErrTokenRefused},
		{name: "extra audience", alg: jose.RS256, claims: ti.claims("deploy-cli", now, nil)},
		{name: "audience list containing the client", alg: jose.RS256, claims: ti.claims("", now, map[string]any{"aud": []string{"x", "deployd"}})},
		{name: "audience list without the client", alg: jose.RS256, claims: ti.claims("", now, map[string]any{"aud": []string{"x", "y"}}), wantErr: ErrTokenRefused},
		{name: "wrong issuer", alg: jose.RS256, claims: other.claims("deployd", now, nil), wantErr: ErrTokenRefused},
		{name: "expired", alg: jose.RS256, claims: ti.claims("deployd", now, map[string]any{"exp": now.Add(-time.Second).Unix()}), wantErr: ErrTokenExpired},
		{name: "expiring this instant", alg: jose.RS256, claims: ti.claims("deployd", now, map[string]any{"exp": now.Unix()}), wantErr: ErrTokenExpired},
		{name: "no exp", alg: jose.RS256, claims: ti.claims("deployd", now, map[string]any{"exp": nil}), wantErr: ErrTokenExpired},
		{name: "no subject", alg: jose.RS256, claims: ti.claims("deployd", now, map[string]any{"sub": nil}), wantErr: ErrTokenRefused},
		{name: "signature by a key the issuer does not publish", token: "forge", wantErr: ErrTokenRefused},
		{name: "not a JWT", token: "not.a.jwt", wantErr: ErrTokenRefused},
		{name: "empty", token: "", wantErr: ErrTokenRefused},
		{name: "unsigned", token: "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.", wantErr: ErrTokenRefused},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newTestAuthenticator(t, ti.URL, clock, func(c *Config) {
				c.Algorithms = tc.algs
				c.ExtraAudiences = []string{"deploy-cli"}
			})
			raw := tc.token
			if raw == "forge" {
				raw = ti.signWithKid(t, jose.ES256, "rsa", ti.claims("deployd", now, nil))
			}
			if tc.claims != nil {
				raw = ti.sign(t, tc.alg, tc.claims)
			}
			p, err := a.Verify(t.Context(), raw)
			if tc.wantErr != nil {
				t.Logf("refused: %v", err)
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("got error %v, want %v", err, tc.wantErr)
				}
				if p != nil {
					t.Fatalf("got principal %+v with error", p)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if p.Subject != "alice" || p.Issuer != ti.URL {
				t.Fatalf("got subject %q issuer %q, want alice %q", p.Subject, p.Issuer, ti.URL)
			}
		})
	}
}

func TestVerifyMapsClaims(t *testing.T) {
	ti := newTestIssuer(t)
	clock := newFakeClock()
	a := newTestAuthenticator(t, ti.URL, clock, nil)
	now := clock.Now()
	raw := ti.sign(t, jose.RS256, ti.claims("deployd", now, map[string]any{
		"preferred_username": "alice", "email": "alice@acme.test", "owner": "acme", "isAdmin": true,
		"groups": []string{"dev", "ops"},
	}))
	p, err := a.Verify(t.Context(), raw)
	if err != nil {
		t.Fatal(err)
	}
	want := &Principal{
		Subject: "alice", Username: "alice", Email: "alice@acme.test", Org: "acme",
		Groups: []string{"dev", "ops"}, OrgAdmin: true, Issuer: ti.URL,
		Expiry: time.Unix(now.Add(time.Hour).Unix(), 0),
	}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Fatalf("principal (-want +got):\n%s", diff)
	}
}

func TestVerifyCache(t *testing.T) {
	ti := newTestIssuer(t)
	clock := newFakeClock()
	a := newTestAuthenticator(t, ti.URL, clock, nil)
	now := clock.Now()
	exp := now.Add(2 * time.Minute)
	raw := ti.sign(t, jose.RS256, ti.claims("deployd", now, map[string]any{"exp": exp.Unix(), "groups": []string{"g"}}))

	p, err := a.Verify(t.Context(), raw)
	if err != nil {
		t.Fatal(err)
	}
	key := sha256.Sum256([]byte(raw))
	entry, ok := a.verified.Peek(key)
	if !ok {
		t.Fatal("verified token not cached")
	}
	if !entry.until.Equal(exp) {
		t.Fatalf("cache entry until %v, want the token's exp %v", entry.until, exp)
	}

	// A caller mutating its Principal does not change the cached one.
	p.Groups[0] = "mutated"
	p2, err := a.Verify(t.Context(), raw)
	if err != nil {
		t.Fatal(err)
	}
	if p2.Groups[0] != "g" {
		t.Fatalf("cached principal shared with a caller: groups %v", p2.Groups)
	}

	// Past exp the cached entry is refused and dropped.
	clock.Advance(2*time.Minute + time.Second)
	if _, err := a.Verify(t.Context(), raw); !errors.Is(err, ErrTokenExpired) {
		t.Fatalf("got %v after exp, want ErrTokenExpired", err)
	}
	if _, ok := a.verified.Peek(key); ok {
		t.Fatal("expired entry still cached")
	}
}

func TestVerifyCacheRefusesOnHitAfterExp(t *testing.T) {
	// The hit path alone must refuse an expired entry: plant an entry whose
	// deadline has passed and check Verify does not return it.
	ti := newTestIssuer(t)
	clock := newFakeClock()
	a := newTestAuthenticator(t, ti.URL, clock, nil)
	raw := "planted.token.value"
	a.verified.Add(sha256.Sum256([]byte(raw)), cachedPrincipal{p: &Principal{Subject: "ghost"}, until: clock.Now()})
	if p, err := a.Verify(t.Context(), raw); err == nil {
		t.Fatalf("got principal %q from an entry past its deadline", p.Subject)
	}
}

func TestVerifyCacheEntryLifeIsBounded(t *testing.T) {
	ti := newTestIssuer(t)
	clock := newFakeClock()
	a := newTestAuthenticator(t, ti.URL, clock, nil)
	now := clock.Now()
	raw := ti.sign(t, jose.RS256, ti.claims("deployd", now, map[string]any{"exp": now.Add(5 * time.Hour).Unix()}))
	if _, err := a.Verify(t.Context(), raw); err != nil {
		t.Fatal(err)
	}
	entry, _ := a.verified.Peek(sha256.Sum256([]byte(raw)))
	if want := now.Add(maxCacheEntryLife); !entry.until.Equal(want) {
		t.Fatalf("cache entry until %v, want %v", entry.until, want)
	}
}
