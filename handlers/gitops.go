package handlers

import (
	"net/http"
	"slices"

	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/projection"
	"github.com/labstack/echo/v4"
)

type gitopsBody struct {
	Installed    bool                     `json:"installed"`
	Reason       string                   `json:"reason,omitempty"`
	Applications []projection.Application `json:"applications"`
	// Engine is the engine ?cluster= names, the first cluster's when it
	// is absent.
	Engine gitops.EngineStatus `json:"engine"`
	// Engines is every cluster's engine, the first's first, when deployd
	// serves several clusters.
	Engines []gitops.EngineStatus `json:"engines,omitempty"`
}

// gitops lists the CD Applications and the engines (SuperAdmin only).
func (s *Server) gitops(c echo.Context) error {
	if err := checkParams(c.QueryParams(), "cluster"); err != nil {
		return err
	}
	eng, name, err := s.engineNamed(c)
	if err != nil {
		return err
	}
	st := s.d.Cluster()
	out := gitopsBody{Installed: st.CDCRD, Applications: []projection.Application{}, Engines: s.engineStatuses()}
	out.Engine = s.engineStatusOf(eng, max(0, slices.Index(s.clusterNames, name)))
	if !st.CDCRD {
		out.Reason = "the CD Application CRD (applications.apps.hanzo.ai) is not installed"
	}
	for _, a := range s.d.Snapshots.Snapshot().CDApplications() {
		out.Applications = append(out.Applications, a.Application())
	}
	return c.JSON(http.StatusOK, out)
}
