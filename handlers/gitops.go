package handlers

import (
	"net/http"

	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/projection"
	"github.com/labstack/echo/v4"
)

type gitopsBody struct {
	Installed    bool                     `json:"installed"`
	Reason       string                   `json:"reason,omitempty"`
	Applications []projection.Application `json:"applications"`
	Engine       gitops.EngineStatus      `json:"engine"`
}

// gitops lists the CD Applications (SuperAdmin only).
func (s *Server) gitops(c echo.Context) error {
	if err := checkParams(c.QueryParams()); err != nil {
		return err
	}
	st := s.d.Cluster()
	out := gitopsBody{Installed: st.CDCRD, Applications: []projection.Application{}, Engine: s.engineStatus()}
	if !st.CDCRD {
		out.Reason = "the CD Application CRD (applications.apps.hanzo.ai) is not installed"
	}
	for _, a := range s.d.Snapshots.Snapshot().CDApplications() {
		out.Applications = append(out.Applications, a.Application())
	}
	return c.JSON(http.StatusOK, out)
}
