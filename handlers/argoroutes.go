package handlers

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// argoPrefixes are where the Argo CD dialect is served: deployd's own
// prefix and Argo CD's (so the stock Argo CD UI and Argo CD's REST clients
// work unchanged). Both are mounted from one table and cannot drift.
var argoPrefixes = [...]string{"/v1/deploy", "/api/v1"}

// route is one entry of the Argo CD dialect's table: its path below a
// prefix, its handler and middleware, and whether it is a write (audited).
type route struct {
	method string
	path   string
	h      echo.HandlerFunc
	mw     []echo.MiddlewareFunc
	write  bool
}

// argoTable is every route of the Argo CD dialect (the package doc lists them).
func (s *Server) argoTable() []route {
	scoped := []echo.MiddlewareFunc{RequireScope(), s.requireReady}
	validated := []echo.MiddlewareFunc{s.requirePrincipal}
	w := []echo.MiddlewareFunc{s.requireWriter, s.requireReady}
	get := func(path string, h echo.HandlerFunc, mw []echo.MiddlewareFunc) route {
		return route{method: http.MethodGet, path: path, h: h, mw: mw}
	}
	post := func(path string, h echo.HandlerFunc) route {
		return route{method: http.MethodPost, path: path, h: h, mw: w, write: true}
	}
	t := []route{
		// Public, as Argo CD's are: the login page reads them before
		// anyone signs in. They hold nothing about the fleet.
		get("/settings", s.settings, nil),
		get("/version", s.version, nil),
		get("/account/can-i/:resource/:action/*", s.canI, validated),
		get("/account/can-i/:resource/:action", s.canI, validated),

		get("/applications", s.listApplications, scoped),
		get("/applications/:name", s.getApplication, scoped),
		get("/applications/:name/resource-tree", s.getTree, scoped),
		get("/applications/:name/managed-resources", s.managedResources, scoped),
		get("/applications/:name/resource", s.argoResource, scoped),
		get("/applications/:name/resource/actions", s.resourceActions, scoped),
		get("/applications/:name/resource/links", s.resourceLinks, scoped),
		get("/applications/:name/links", s.appLinks, scoped),
		get("/applications/:name/events", s.events, scoped),
		get("/applications/:name/manifests", s.manifests, scoped),
		get("/applications/:name/logs", s.argoLogs, scoped),
		get("/applications/:name/syncwindows", s.syncWindows, scoped),
		get("/applications/:name/revisions/:rev/metadata", s.revisionMetadata, scoped),
		get("/clusters", s.clusters, scoped),
		get("/clusters/:server", s.getCluster, append([]echo.MiddlewareFunc{s.wholePath}, scoped...)),
		get("/projects", s.projects, scoped),
		// A read sent as a POST (its query is a body).
		{method: http.MethodPost, path: "/repositories/:repo/appdetails", h: s.repoAppDetails, mw: scoped},

		post("/applications/:name/sync", s.sync(appParams)),
		post("/applications/:name/rollback", s.rollback(appParams)),
		post("/applications/:name/resource/actions", s.runResourceAction(false)),
		post("/applications/:name/resource/actions/v2", s.runResourceAction(true)),
	}
	return t
}

// streamTable is the Argo CD dialect's streams (mounted when there is a
// hub).
func (s *Server) streamTable() []route {
	scoped := []echo.MiddlewareFunc{RequireScope(), s.requireReady}
	return []route{
		{method: http.MethodGet, path: "/stream/applications", h: s.streamApplications, mw: scoped},
		{method: http.MethodGet, path: "/stream/applications/:name/resource-tree", h: s.streamTree, mw: scoped},
	}
}

// mountArgo registers the table under both prefixes, and Argo CD's version
// path.
func (s *Server) mountArgo() {
	s.mount(s.argoTable())
	s.e.GET("/api/version", s.version)
	s.e.GET("/extensions.js", extensionsScript)
}

// streamRoutes mounts the SSE streams of the fleet and of one tree.
func (s *Server) streamRoutes() {
	if s.d.Hub != nil {
		s.mount(s.streamTable())
	}
}

func (s *Server) mount(table []route) {
	for _, prefix := range argoPrefixes {
		for _, r := range table {
			s.handle(r.method, prefix+r.path, r.h, r.mw...)
			if r.write {
				s.writes[writeRoute{r.method, prefix + r.path}] = true
			}
		}
	}
}

// wholePath refuses a match that took in more segments than the route has:
// Echo's router, backtracking from /v1/deploy/:name/…, can hand a
// parameter the rest of a longer path. Such a path is no route of ours.
func (s *Server) wholePath(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if strings.Count(c.Request().URL.EscapedPath(), "/") != strings.Count(c.Path(), "/") {
			return s.apiNotFound(c)
		}
		return next(c)
	}
}
