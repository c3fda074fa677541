package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

type healthBody struct {
	Service string `json:"service"`
	Status  string `json:"status"`
	K8s     bool   `json:"k8s"`
	CRD     *bool  `json:"crd,omitempty"`
	// Reason is the initial sync's progress while it runs (still 503).
	Reason string `json:"reason,omitempty"`
}

// health reports whether the plane serves a real fleet: ok with 200, or
// degraded with 503, saying how far the initial sync is while it runs. It
// never carries an error string.
func (s *Server) health(service string) echo.HandlerFunc {
	return func(c echo.Context) error {
		st := s.d.Cluster()
		b := healthBody{Service: service, Status: "ok", K8s: st.Configured && st.Reachable}
		if b.K8s {
			crd := st.AppCRD
			b.CRD = &crd
		}
		code := http.StatusOK
		if !st.Ready {
			b.Status, code = "degraded", http.StatusServiceUnavailable
			b.Reason = st.Progress
		}
		c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
		return c.JSON(code, b)
	}
}
