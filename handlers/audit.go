package handlers

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/hanzoai/deploy/auth"
	"github.com/labstack/echo/v4"
)

// auditRecord is what a write handler did, for its audit line; the
// request's state carries it (requestState.audit).
type auditRecord struct {
	app, namespace, summary string
}

// isWriteRoute reports whether a route pattern is one of the writes.
func (s *Server) isWriteRoute(method, path string) bool {
	if method == http.MethodPost && (path == reconcilePath || path == webhookPath || path == suspendPath || path == resumePath) {
		return true
	}
	return s.writes[writeRoute{method, path}]
}

// writeRoute names a write route: its method and its path template.
type writeRoute struct{ method, path string }

// audit writes one structured line per write request: who, what, when and
// the result. It runs before authentication, so refusals (a bad token, a
// foreign origin, a non-admin) are audited too.
func (s *Server) audit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !s.isWriteRoute(c.Request().Method, c.Path()) {
			return next(c)
		}
		rec := &auditRecord{app: c.Param("name")}
		if rec.app == "" {
			rec.app = c.Param("app")
		}
		ensureState(c).audit = rec
		start := s.d.Now()
		err := next(c)
		status := c.Response().Status
		var ae *apiError
		result := "ok"
		if errors.As(err, &ae) {
			status, result = ae.Code, ae.Message
		} else if err != nil {
			status, result = http.StatusInternalServerError, "internal error"
		}
		attrs := []slog.Attr{
			slog.Time("at", start.UTC()),
			slog.String("route", c.Path()),
			slog.String("app", rec.app),
			slog.String("namespace", rec.namespace),
			slog.String("body", rec.summary),
			slog.Int("status", status),
			slog.String("result", result),
		}
		if p := auth.PrincipalFrom(c.Request().Context()); p != nil {
			attrs = append(attrs, slog.String("sub", p.Subject), slog.String("user", p.Username), slog.String("org", p.Org))
		}
		if st := stateOf(c.Request().Context()); st != nil && st.forward != nil {
			attrs = append(attrs, slog.String("forwardedBy", st.forward.From))
		}
		s.d.Log.LogAttrs(c.Request().Context(), slog.LevelInfo, "audit", attrs...)
		return err
	}
}

func auditOf(c echo.Context) *auditRecord {
	if st := stateOf(c.Request().Context()); st != nil && st.audit != nil {
		return st.audit
	}
	return &auditRecord{}
}
