package handlers

import (
	"net/http"
	"slices"
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
	paasDrift  = []string{"ok", "yellow", "red"}
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

// paasRows are the board's rows the scope reads: operator Apps only.
func (s *Server) paasRows(snap *projection.Snapshot, sc auth.Scope) []projection.AppView {
	var out []projection.AppView
	add := func(a *projection.App) {
		if a.Row != projection.RowApp || !sc.SeesPaaS(a.Namespace) {
			return
		}
		var rel *projection.Release
		if s.d.Releases != nil {
			_, _, repo := projection.RepoParts(a.Repository)
			rel = s.d.Releases(repo, a.Declared)
		}
		out = append(out, a.View(s.d.ClusterName, rel))
	}
	if sc.IsAll() {
		for a := range snap.Apps() {
			add(a)
		}
	} else if nss, _ := sc.PaaSNamespaces(); len(nss) > 0 {
		for _, nr := range snap.Namespaces() {
			if slices.Contains(nss, nr.Namespace) {
				for _, a := range nr.Rows {
					add(a)
				}
			}
		}
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

func (s *Server) paasList(c echo.Context) error {
	sc, err := scopeOf(c)
	if err != nil {
		return err
	}
	q := c.QueryParams()
	if err := checkParams(q, "env", "health", "org", "drift"); err != nil {
		return err
	}
	env, err := oneOf(q, "env", paasEnvs)
	if err != nil {
		return err
	}
	health, err := oneOf(q, "health", paasHealth)
	if err != nil {
		return err
	}
	drift, err := oneOf(q, "drift", paasDrift)
	if err != nil {
		return err
	}
	org, err := optionalName(q, "org")
	if err != nil {
		return err
	}
	snap := s.d.Snapshots.Snapshot()
	key := "paas|" + sc.Key() + "|" + env + "|" + health + "|" + org + "|" + drift
	return s.respondCached(c, snap.Revision, key, func() ([]byte, error) {
		out := paasList{Apps: []projection.AppView{}, Summary: paasSummary{ByDrift: map[string]int{"ok": 0, "yellow": 0, "red": 0}}}
		for _, v := range s.paasRows(snap, sc) {
			h := v.Health
			if h == "" {
				h = "unknown"
			}
			if (env != "" && v.Env != env) || (health != "" && h != health) || (org != "" && v.Org != org) || (drift != "" && string(v.Drift.Severity) != drift) {
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
