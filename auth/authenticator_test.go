package auth

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"go.uber.org/goleak"

	"github.com/hanzoai/deploy/auth/authtest"
)

func TestDisabledFailsClosed(t *testing.T) {
	ti := newTestIssuer(t)
	clock := newFakeClock()
	token := ti.sign(t, jose.RS256, ti.claims("deployd", clock.Now(), map[string]any{"owner": "admin"}))

	tests := []struct {
		name   string
		cfg    Config
		reason string
	}{
		{
			name:   "no public URL",
			cfg:    Config{Issuer: ti.URL, ClientID: "deployd"},
			reason: "sign-in disabled: DEPLOY_PUBLIC_URL is not set",
		},
		{
			name:   "public URL over http on a real host",
			cfg:    Config{Issuer: ti.URL, ClientID: "deployd", PublicURL: "http://deploy.example.com"},
			reason: "sign-in disabled: DEPLOY_PUBLIC_URL:",
		},
		{
			name:   "issuer over http on a real host",
			cfg:    Config{Issuer: "http://id.example.com", ClientID: "deployd", PublicURL: "https://deploy.example.com"},
			reason: "sign-in disabled: IAM_ENDPOINT:",
		},
		{
			name:   "short cookie key",
			cfg:    Config{Issuer: ti.URL, ClientID: "deployd", PublicURL: "https://deploy.example.com", CookieKey: []byte("short")},
			reason: "sign-in disabled: DEPLOY_COOKIE_KEY:",
		},
		{
			name:   "issuer unreachable",
			cfg:    Config{Issuer: closedURL(t), ClientID: "deployd", PublicURL: "https://deploy.example.com", DiscoveryRetry: time.Hour},
			reason: "sign-in disabled: the identity provider http://127.0.0.1:",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs authtest.LogBuffer
			tc.cfg.Now = clock.Now
			a := New(t.Context(), tc.cfg, slog.New(slog.NewTextHandler(&logs, nil)))
			defer a.Close()

			st := a.Status()
			if st.Enabled || !strings.HasPrefix(st.Reason, tc.reason) {
				t.Fatalf("Status() = %+v, want disabled with reason starting %q", st, tc.reason)
			}
			if _, err := a.StartLogin("/"); !errors.Is(err, ErrDisabled) || err.Error() != st.Reason {
				t.Fatalf("StartLogin error %v, want ErrDisabled saying %q", err, st.Reason)
			}
			if _, err := a.Verify(t.Context(), token); !errors.Is(err, ErrDisabled) {
				t.Fatalf("Verify error %v, want ErrDisabled", err)
			}
			r := httptest.NewRequest(http.MethodGet, "/v1/deploy/callback?state=x&code=y", nil)
			if _, err := a.FinishLogin(t.Context(), r); !errors.Is(err, ErrDisabled) {
				t.Fatalf("FinishLogin error %v, want ErrDisabled", err)
			}
			r.AddCookie(&http.Cookie{Name: "deploy_session.0", Value: "x"})
			r.AddCookie(&http.Cookie{Name: "__Host-deploy_session.0", Value: "x"})
			if _, err := a.SessionPrincipal(t.Context(), r); !errors.Is(err, ErrDisabled) {
				t.Fatalf("SessionPrincipal error %v, want ErrDisabled", err)
			}
			select {
			case <-a.Ready():
				t.Fatal("Ready closed while disabled")
			default:
			}
			if !strings.Contains(logs.String(), "sign-in disabled") && !strings.Contains(logs.String(), "not reachable") {
				t.Fatalf("the log does not say sign-in is off:\n%s", logs.String())
			}
		})
	}
}

// closedURL is an http URL on which nothing listens.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + l.Addr().String()
	l.Close()
	return u
}

func TestDiscoveryRetriesUntilTheIssuerComesUp(t *testing.T) {
	ti := newTestIssuer(t)
	ti.down.Store(true)
	transport := &http.Transport{}
	defer transport.CloseIdleConnections()
	leaks := goleak.IgnoreCurrent()

	clock := newFakeClock()
	a := New(t.Context(), Config{
		Issuer: ti.URL, ClientID: "deployd", PublicURL: "http://127.0.0.1:8080", CookieKey: testKey,
		Now: clock.Now, DiscoveryRetry: 5 * time.Millisecond, HTTPClient: &http.Client{Transport: transport},
	}, nil)
	if st := a.Status(); st.Enabled || !strings.Contains(st.Reason, "not reachable yet") {
		t.Fatalf("Status() = %+v while the issuer is down", st)
	}
	ti.down.Store(false)
	select {
	case <-a.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("sign-in did not come up within 10 s of the issuer")
	}
	if st := a.Status(); !st.Enabled {
		t.Fatalf("Status() = %+v after discovery", st)
	}
	token := ti.sign(t, jose.RS256, ti.claims("deployd", clock.Now(), nil))
	if _, err := a.Verify(t.Context(), token); err != nil {
		t.Fatalf("Verify after late discovery: %v", err)
	}
	a.Close()
	a.Close() // idempotent
	transport.CloseIdleConnections()
	goleak.VerifyNone(t, leaks)
}

func TestDiscoveryRetryEndsWithTheContext(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	ctx, cancel := context.WithCancel(t.Context())
	a := New(ctx, Config{Issuer: closedURL(t), PublicURL: "http://127.0.0.1:8080", DiscoveryRetry: time.Millisecond}, nil)
	cancel()
	done := make(chan struct{})
	go func() { a.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the retry goroutine did not stop with its context")
	}
	goleak.VerifyNone(t, leaks)
	if a.Status().Enabled {
		t.Fatal("enabled without discovery")
	}
}

func TestRandomCookieKeyIsLoggedOnce(t *testing.T) {
	ti := newTestIssuer(t)
	var logs authtest.LogBuffer
	a := New(t.Context(), Config{Issuer: ti.URL, PublicURL: "http://127.0.0.1:8080"}, slog.New(slog.NewTextHandler(&logs, nil)))
	defer a.Close()
	if !a.Status().Enabled {
		t.Fatalf("Status() = %+v", a.Status())
	}
	for range 3 {
		if _, err := a.StartLogin("/"); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), "DEPLOY_COOKIE_KEY is not set"); n != 1 {
		t.Fatalf("the generated key was logged %d times, want once:\n%s", n, logs.String())
	}
}
