package handlers

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/projection"
)

type paasList struct {
	Apps    []projection.AppView `json:"apps"`
	Summary paasSummary          `json:"summary"`
}

type paasSummary struct {
	Total   int            `json:"total"`
	ByDrift map[string]int `json:"byDrift"`
}

var (
	paasEnvs   = []string{"main", "test", "dev"}
	paasHealth = []string{"green", "yellow", "red", "unknown"}
	// paasDrift: a severity, or 1/true for every row that drifts (yellow
	// or red) and 0/false for every row that does not.
	paasDrift = []string{"ok", "yellow", "red", "1", "true", "0", "false"}
)

// oneOf reads an optional enumerated parameter.
func oneOf(q map[string][]string, key string, allowed []string) (string, error) {
	v, err := single(q, key)
	if err != nil || v == "" {
		return v, err
	}
	if !slices.Contains(allowed, v) {
		return "", errorf(http.StatusBadRequest, key+" must be one of "+strings.Join(allowed, ", "))
	}
	return v, nil
}

// paasRows are the board's rows the scope reads: operator Apps only, the
// ones the scope sees by the one visibility rule (visibleRows, every
// cluster's), when it may read the board at all.
func (s *Server) paasRows(snap *projection.Snapshot, sc auth.Scope) []projection.AppView {
	var out []projection.AppView
	if !sc.CanReadPaaS() {
		return out
	}
	for a := range s.visibleRows(snap, sc) {
		if a.Row != projection.RowApp || !sc.SeesPaaS(a.Namespace, a.Org) {
			continue
		}
		var rel *projection.Release
		if s.d.Releases != nil {
			rel = s.d.Releases(a.Repository, a.Declared)
		}
		out = append(out, a.View(s.clusterOf(a), rel))
	}
	slices.SortFunc(out, func(x, y projection.AppView) int {
		if c := strings.Compare(x.Org, y.Org); c != 0 {
			return c
		}
		if c := strings.Compare(x.App, y.App); c != 0 {
			return c
		}
		return strings.Compare(x.Env, y.Env)
	})
	return out
}

// clusterOf is the name of the cluster an App runs in.
func (s *Server) clusterOf(a *projection.App) string {
	if i := a.ClusterIndex(); i > 0 {
		name, _ := s.d.Projection.Cluster(i)
		return name
	}
	return s.d.ClusterName
}

// paasFilter is the board's query: env, health, org, drift and cluster,
// each optional.
type paasFilter struct{ env, health, org, drift, cluster string }

func parsePaaSFilter(q map[string][]string) (f paasFilter, err error) {
	if err = checkParams(q, "env", "health", "org", "drift", "cluster"); err != nil {
		return
	}
	if f.cluster, err = optionalName(q, "cluster"); err != nil {
		return
	}
	if f.env, err = oneOf(q, "env", paasEnvs); err != nil {
		return
	}
	if f.health, err = oneOf(q, "health", paasHealth); err != nil {
		return
	}
	if f.drift, err = oneOf(q, "drift", paasDrift); err != nil {
		return
	}
	switch f.drift {
	case "1", "true":
		f.drift = driftAny
	case "0", "false":
		f.drift = string(projection.SeverityOK)
	}
	f.org, err = optionalName(q, "org")
	return
}

func (f paasFilter) key() string {
	return f.env + "|" + f.health + "|" + f.org + "|" + f.drift + "|" + f.cluster
}

func (f paasFilter) match(v *projection.AppView) bool {
	h := v.Health
	if h == "" {
		h = "unknown"
	}
	return (f.env == "" || v.Env == f.env) && (f.health == "" || h == f.health) &&
		(f.org == "" || v.Org == f.org) && (f.cluster == "" || v.Cluster == f.cluster) && f.matchDrift(v.Drift.Severity)
}

// driftAny is the drift filter of drift=1: yellow or red.
const driftAny = "any"

func (f paasFilter) matchDrift(s projection.DriftSeverity) bool {
	switch f.drift {
	case "":
		return true
	case driftAny:
		return s != projection.SeverityOK
	}
	return string(s) == f.drift
}

// paasVersion is the version of the board's answers: the snapshot's
// revision, and the release source's generation when one is configured
// (release facts change without the cluster changing).
func (s *Server) paasVersion(rev uint64) string {
	v := strconv.FormatUint(rev, 10)
	if s.d.ReleaseChanges != nil {
		gen, _ := s.d.ReleaseChanges()
		v += "." + strconv.FormatUint(gen, 10)
	}
	return v
}

func (s *Server) paasList(c echo.Context) error {
	sc, err := scopeOf(c)
	if err != nil {
		return err
	}
	f, err := parsePaaSFilter(c.QueryParams())
	if err != nil {
		return err
	}
	snap := s.d.Snapshots.Snapshot()
	key := "paas|" + sc.Key() + "|" + f.key()
	return s.respondCachedAt(c, s.paasVersion(snap.Revision), key, func() ([]byte, error) {
		out := paasList{Apps: []projection.AppView{}, Summary: paasSummary{ByDrift: map[string]int{"ok": 0, "yellow": 0, "red": 0}}}
		for _, v := range s.paasRows(snap, sc) {
			if !f.match(&v) {
				continue
			}
			out.Apps = append(out.Apps, v)
			out.Summary.ByDrift[string(v.Drift.Severity)]++
		}
		out.Summary.Total = len(out.Apps)
		return marshalJSON(out)
	})
}

// paasAppParams reads what the routes of one /v1/paas app take: the :app
// path name, and the env and namespace that narrow it (both optional).
func paasAppParams(c echo.Context) (name, env, namespace string, err error) {
	q := c.QueryParams()
	if err = checkParams(q, "env", "namespace"); err != nil {
		return
	}
	if env, err = oneOf(q, "env", paasEnvs); err != nil {
		return
	}
	if namespace, err = optionalName(q, "namespace"); err != nil {
		return
	}
	name = c.Param("app")
	err = validName("app", name)
	return
}

func (s *Server) paasApp(c echo.Context) error {
	sc, err := scopeOf(c)
	if err != nil {
		return err
	}
	name, env, namespace, err := paasAppParams(c)
	if err != nil {
		return err
	}
	var found []projection.AppView
	for _, v := range s.paasRows(s.d.Snapshots.Snapshot(), sc) {
		if v.App == name && (env == "" || v.Env == env) && (namespace == "" || v.Namespace == namespace) {
			found = append(found, v)
		}
	}
	switch len(found) {
	case 0:
		return errNotFound(name)
	case 1:
		return c.JSON(http.StatusOK, found[0])
	}
	var envs []string
	for _, v := range found {
		envs = append(envs, v.Env+" ("+v.Namespace+")")
	}
	return errorf(http.StatusBadRequest, "app "+quoteShort(name)+" runs in "+strings.Join(envs, ", ")+": add ?env=main, test or dev (and &namespace=<namespace>)")
}
