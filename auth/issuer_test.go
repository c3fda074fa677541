package auth

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// testIssuer is a minimal OIDC issuer for verification tests: discovery and
// a key set with an RSA key (kid "rsa", no alg restriction) and a P-256 key
// (kid "ec"). It signs whatever claims a test gives it with any algorithm.
type testIssuer struct {
	URL  string
	rsa  *rsa.PrivateKey
	ec   *ecdsa.PrivateKey
	down atomic.Bool // discovery answers 503 while set
	srv  *httptest.Server
}

var (
	testKeysOnce sync.Once
	testRSAKey   *rsa.PrivateKey
	testECKey    *ecdsa.PrivateKey
)

func newTestIssuer(t testing.TB) *testIssuer {
	t.Helper()
	testKeysOnce.Do(func() {
		var err error
		if testRSAKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if testECKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
	})
	ti := &testIssuer{rsa: testRSAKey, ec: testECKey}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		if ti.down.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer":                                ti.URL,
			"authorization_endpoint":                ti.URL + "/authorize",
			"token_endpoint":                        ti.URL + "/token",
			"jwks_uri":                              ti.URL + "/jwks",
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256", "PS256"},
		})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
			{Key: &ti.rsa.PublicKey, KeyID: "rsa", Use: "sig"},
			{Key: &ti.ec.PublicKey, KeyID: "ec", Use: "sig"},
		}})
	})
	ti.srv = httptest.NewServer(mux)
	ti.URL = ti.srv.URL
	t.Cleanup(ti.srv.Close)
	return ti
}

// sign signs claims with alg; the key follows from the algorithm family.
func (ti *testIssuer) sign(t testing.TB, alg jose.SignatureAlgorithm, claims map[string]any) string {
	t.Helper()
	return ti.signWithKid(t, alg, "", claims)
}

// signWithKid signs like sign but names kid (when set) in the header, e.g.
// an EC signature claiming to be by the RSA key.
func (ti *testIssuer) signWithKid(t testing.TB, alg jose.SignatureAlgorithm, kid string, claims map[string]any) string {
	t.Helper()
	var key jose.SigningKey
	switch alg {
	case jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512:
		key = jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: ti.rsa, KeyID: "rsa"}}
	case jose.ES256:
		key = jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: ti.ec, KeyID: "ec"}}
	case jose.HS256:
		// Algorithm confusion: the RSA public key used as an HMAC secret.
		der, err := x509.MarshalPKIXPublicKey(&ti.rsa.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
		key = jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: secret, KeyID: "rsa"}}
	default:
		t.Fatalf("sign: unsupported alg %s", alg)
	}
	if kid != "" {
		jwk := key.Key.(jose.JSONWebKey)
		jwk.KeyID = kid
		key.Key = jwk
	}
	signer, err := jose.NewSigner(key, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatalf("signer: %v", err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// claims returns a valid claim set for client at now, with extra merged in.
func (ti *testIssuer) claims(client string, now time.Time, extra map[string]any) map[string]any {
	c := map[string]any{
		"iss": ti.URL,
		"sub": "alice",
		"aud": client,
		"iat": now.Unix(),
		"exp": now.Add(time.Hour).Unix(),
	}
	for k, v := range extra {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	return c
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Now().Truncate(time.Second)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// testKey is fixed cookie key material for tests.
var testKey = bytes.Repeat([]byte{7}, 32)

// newTestAuthenticator builds an Authenticator for ti, waits until it is
// enabled and closes it at cleanup.
func newTestAuthenticator(t testing.TB, issuer string, clock *fakeClock, mutate func(*Config)) *Authenticator {
	t.Helper()
	cfg := Config{
		Issuer:     issuer,
		ClientID:   "deployd",
		PublicURL:  "http://127.0.0.1:8080",
		CookieKey:  testKey,
		Now:        clock.Now,
		HTTPClient: &http.Client{Timeout: 5 * time.Second},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	a := New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(a.Close)
	if st := a.Status(); !st.Enabled {
		t.Fatalf("sign-in not enabled: %s", st.Reason)
	}
	return a
}
