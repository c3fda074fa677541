package handlers

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/auth/authtest"
)

// TestSecurityHeadersOnEveryAnswer: an answer, a refusal and a 404 carry
// the security headers, and changing one answer's headers leaves the next
// answer's alone.
func TestSecurityHeadersOnEveryAnswer(t *testing.T) {
	env := newServerEnv(t)
	tok := env.token(t, userAlice, time.Hour)
	want := map[string]string{
		"X-Content-Type-Options": "nosniff",
		"Referrer-Policy":        "same-origin",
		"X-Frame-Options":        "DENY",
		"Cache-Control":          "no-store",
	}
	check := func(what string, h http.Header) {
		t.Helper()
		for k, v := range want {
			if got := h.Values(k); len(got) != 1 || got[0] != v {
				t.Errorf("%s: %s %q, want %q", what, k, got, v)
			}
		}
	}
	for _, tc := range []struct{ path, token string }{
		{"/v1/deploy/applications", tok},
		{"/v1/deploy/applications", ""},
		{"/v1/deploy/no/such/route", tok},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, tc.path, nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		env.srv.Handler().ServeHTTP(rec, req)
		check("GET "+tc.path, rec.Header())
		// A handler or a writer that adds to or edits a header must not
		// reach the next answer.
		rec.Header().Add("Cache-Control", "private")
		rec.Header().Set("X-Frame-Options", "SAMEORIGIN")
	}
}

// TestBodyLimitKeptForBodies: a request with a body is held to 64 KiB
// whether it says its length or not; one without a body is not wrapped.
func TestBodyLimitKeptForBodies(t *testing.T) {
	env, _ := newWriteEnv(t)
	root := env.token(t, userRoot, time.Hour)
	big := `{"pad":"` + strings.Repeat("x", 70<<10) + `"}`
	send := func(body io.Reader, length int64) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/deploy/applications/web/sync", body)
		req.ContentLength = length
		req.Header.Set("Authorization", "Bearer "+root)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		env.srv.Handler().ServeHTTP(rec, req)
		return rec
	}
	if rec := send(strings.NewReader(big), int64(len(big))); rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("a %d-byte body with its length: %d %s, want 413", len(big), rec.Code, rec.Body)
	}
	// Without a length (chunked), the limit is met while the body is read.
	if rec := send(io.MultiReader(strings.NewReader(big)), -1); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "at most 64 KiB") {
		t.Errorf("a %d-byte body without its length: %d %s, want 400 at most 64 KiB", len(big), rec.Code, rec.Body)
	}

	e := echo.New()
	var body io.ReadCloser
	e.Any("/", func(c echo.Context) error { body = c.Request().Body; return nil }, bodyLimit())
	e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	if body != http.NoBody {
		t.Errorf("a GET without a body reached its handler with %T, want http.NoBody", body)
	}
	e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", strings.NewReader("x")))
	if body == http.NoBody || body == nil {
		t.Errorf("a GET with a body reached its handler with %T, want the limit's reader", body)
	}
}

// TestRequestStateIsTheContext: the chain puts one value in a request's
// context, which answers the principal to auth.PrincipalFrom, also through
// a context derived from it, and keeps the arriving context's values.
func TestRequestStateIsTheContext(t *testing.T) {
	type arrivingKey struct{}
	p := &auth.Principal{Subject: "s", Org: "acme"}
	st := &requestState{Context: context.WithValue(context.Background(), arrivingKey{}, "v")}
	if auth.PrincipalFrom(st) != nil {
		t.Fatal("an anonymous request's state answers a principal")
	}
	st.principal = p
	derived, cancel := context.WithCancel(st)
	defer cancel()
	if got := auth.PrincipalFrom(derived); got != p {
		t.Fatalf("PrincipalFrom through a derived context: got %v, want the state's", got)
	}
	if stateOf(derived) != st || derived.Value(arrivingKey{}) != "v" {
		t.Fatal("the state or the arriving context's values are lost")
	}
	if stateOf(context.Background()) != nil {
		t.Fatal("a context without a state answers one")
	}
}

// TestTracingOnlyWithAProvider: a request is traced once a tracer provider
// is installed, and not while the provider is otel's default or a no-op.
func TestTracingOnlyWithAProvider(t *testing.T) {
	prev := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	if prev == noopTracerProvider && tracingOn() {
		t.Fatal("tracing is on before any provider was installed")
	}
	otel.SetTracerProvider(noop.NewTracerProvider())
	if tracingOn() {
		t.Fatal("tracing is on with a no-op provider")
	}
	otel.SetTracerProvider(sdktrace.NewTracerProvider())
	if !tracingOn() {
		t.Fatal("tracing is off with a provider installed")
	}
}

// TestAccessLinesGoToTheAccessLog: with an AccessLog given, every
// request's line is written there (deployd's holds them and writes them
// in batches), and the main log keeps its other lines.
func TestAccessLinesGoToTheAccessLog(t *testing.T) {
	var access authtest.LogBuffer
	env := newServerEnvWith(t, func(d *Deps) {
		d.AccessLog = slog.New(slog.NewJSONHandler(&access, nil))
	})
	if r := env.get(t, "/v1/deploy/applications", env.token(t, userAlice, time.Hour)); r.code != http.StatusOK {
		t.Fatalf("list: %d %s", r.code, r.body)
	}
	if got := access.String(); !strings.Contains(got, `"msg":"request"`) || !strings.Contains(got, `"route":"/v1/deploy/applications"`) {
		t.Errorf("the access log holds no line for the list: %q", got)
	}
	if strings.Contains(env.logs.String(), "msg=request") {
		t.Errorf("the main log holds an access line:\n%s", env.logs.String())
	}
}
