package handlers

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/metrics"
)

// recoverPanics turns a panic in a handler into a logged 500: a panic is a
// bug, never an answer.
func recoverPanics(log *slog.Logger) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) (err error) {
			defer func() {
				if r := recover(); r != nil {
					if r == http.ErrAbortHandler {
						panic(r)
					}
					log.Error("handler panicked", "path", c.Path(), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
					err = errorf(http.StatusInternalServerError, "internal error")
				}
			}()
			return next(c)
		}
	}
}

// accessLog writes one structured line per request, and records it in m
// (by route template, never the raw path) with the refusal it was, if any.
// It never logs headers, cookies or tokens.
func accessLog(log *slog.Logger, now func() time.Time, m *metrics.Metrics) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := now()
			err := next(c)
			if err != nil {
				var ae *apiError
				if errors.As(err, &ae) && ae.Refusal != "" {
					m.Refusal(ae.Refusal)
				}
				c.Error(err)
			}
			r, res := c.Request(), c.Response()
			took := now().Sub(start)
			m.Request(r.Method, c.Path(), res.Status, took)
			// The line's attributes live in an array on this stack, not
			// in a slice grown per request.
			attrs := [...]slog.Attr{
				slog.String("method", r.Method),
				slog.String("route", c.Path()),
				slog.String("path", r.URL.Path),
				slog.Int("status", res.Status),
				slog.Int64("bytes", res.Size),
				slog.Float64("ms", float64(took.Microseconds())/1000),
				slog.String("remote", c.RealIP()),
				{}, {}, // sub and org, when signed in
			}
			n := len(attrs) - 2
			if p := auth.PrincipalFrom(r.Context()); p != nil {
				attrs[n], attrs[n+1] = slog.String("sub", p.Subject), slog.String("org", p.Org)
				n += 2
			}
			log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs[:n]...)
			return nil
		}
	}
}

// tracing starts a span per request with the global tracer provider, once
// the binary installed one (an exporter, OTEL_EXPORTER_OTLP_ENDPOINT).
// Until then the provider is otel's no-op and a request skips the span and
// the trace context's extraction altogether: both would allocate for
// nothing.
func tracing() echo.MiddlewareFunc {
	tracer := otel.Tracer("github.com/hanzoai/deploy/handlers")
	prop := propagation.TraceContext{}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if !tracingOn() {
				return next(c)
			}
			r := c.Request()
			ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
			ctx, span := tracer.Start(ctx, r.Method+" "+c.Path(), trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("http.route", c.Path())))
			defer span.End()
			c.SetRequest(r.WithContext(ctx))
			err := next(c)
			status := c.Response().Status
			if he, ok := err.(*apiError); ok {
				status = he.Code
			}
			span.SetAttributes(attribute.Int("http.response.status_code", status))
			if status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
			return err
		}
	}
}

// noopTracerProvider is otel's global provider before any is installed:
// it hands out spans that record nothing.
var noopTracerProvider = otel.GetTracerProvider()

// tracingOn reports whether a tracer provider that records spans is
// installed: neither the global one before any was set, nor an explicit
// no-op. It is cheap enough to ask on every request (an atomic load).
func tracingOn() bool {
	switch tp := otel.GetTracerProvider(); tp.(type) {
	case noop.TracerProvider:
		return false
	default:
		return tp != noopTracerProvider
	}
}

// The security headers' values, made once and assigned to every answer's
// header map as they are: each slice has length and capacity 1, so a later
// Add copies it rather than writing into it.
var (
	nosniffHeader    = []string{"nosniff"}
	sameOriginHeader = []string{"same-origin"}
	denyHeader       = []string{"DENY"}
	noStoreHeader    = []string{"no-store"}
)

// securityHeaders sets the headers every answer carries. Cache-Control
// no-store keeps the page and every answer about a signed-in caller out of
// every cache, the back/forward cache included: after signing out, Back
// must not show what the signed-out user saw. Answers with an ETag keep it
// (a client may still revalidate what it holds itself).
func securityHeaders() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			// The keys are canonical already: what Set would do, without
			// a new slice per header and answer.
			h := c.Response().Header()
			h["X-Content-Type-Options"] = nosniffHeader
			h["Referrer-Policy"] = sameOriginHeader
			h["X-Frame-Options"] = denyHeader
			h[echo.HeaderCacheControl] = noStoreHeader
			return next(c)
		}
	}
}

// readyTrusted is how long requireReady trusts a ready answer before it
// asks the clusters again. A status is a walk over every watched kind and
// its informer, with a sort and a progress text: worth doing while the
// fleet loads, not for every read of a ready one. Readiness is answered
// afresh until it is reached; after it, a cluster that stops being ready
// (its App CRD deleted) is refused at most this late.
const readyTrusted = 250 * time.Millisecond

// requireReady answers 503 with the reason while the projection does not
// reflect a cluster (none configured, unreachable, caches not synced).
func (s *Server) requireReady(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		now := time.Since(processStart)
		if now >= time.Duration(s.readyUntil.Load()) {
			if st := s.d.Cluster(); !st.Ready {
				c.Response().Header().Set("Retry-After", "5")
				return errorf(http.StatusServiceUnavailable, "the fleet is not available yet: "+st.Reason)
			}
			s.readyUntil.Store(int64(now + readyTrusted))
		}
		return next(c)
	}
}

// processStart is the origin of readyUntil's monotonic clock.
var processStart = time.Now()

// requirePrincipal admits any validated principal, with or without an org.
func (s *Server) requirePrincipal(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if auth.PrincipalFrom(c.Request().Context()) == nil {
			_, err := scopeOf(c) // the 401 with its reason
			if isNavigation(c.Request()) {
				return c.Redirect(http.StatusFound, loginRedirect(c.Request()))
			}
			return err
		}
		return next(c)
	}
}

// requireSuperAdmin admits SuperAdmins only.
func (s *Server) requireSuperAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := superAdminOnly(c, "this route is"); err != nil {
			return err
		}
		return next(c)
	}
}

// superAdminOnly is the one SuperAdmin gate of the admin routes, the
// writes and the engine's: 401 without a principal, else a 403 refusal
// (counted as not_superadmin) for anyone but a SuperAdmin. what names
// what is refused ("writes are", "this route is").
func superAdminOnly(c echo.Context, what string) error {
	sc, err := scopeOf(c)
	if err != nil {
		return err
	}
	if !sc.CanWrite() {
		return refusal(http.StatusForbidden, "not_superadmin", what+" for platform administrators (members of the admin organization)")
	}
	return nil
}

// requirePaaS admits SuperAdmins and OrgAdmins (the drift board).
func (s *Server) requirePaaS(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		sc, err := scopeOf(c)
		if err != nil {
			return err
		}
		if !sc.CanReadPaaS() {
			return refusal(http.StatusForbidden, "not_org_admin", "the deploy board is for platform administrators and organization administrators")
		}
		return next(c)
	}
}
