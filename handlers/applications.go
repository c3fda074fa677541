package handlers

import (
	"encoding/json"
	"iter"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/stream"
)

// visibleRows iterates the application rows a scope sees, in (namespace,
// name) order; a SuperAdmin's list ends with the CD Applications. A tenant's
// list is its index entry: O(its apps), not O(fleet).
func (s *Server) visibleRows(snap *projection.Snapshot, sc auth.Scope) iter.Seq[*projection.App] {
	return func(yield func(*projection.App) bool) {
		for _, run := range visibleRuns(snap, sc) {
			for _, a := range run.rows {
				if stream.Visible(sc, a) && !yield(a) {
					return
				}
			}
		}
	}
}

// errNotFound is the one answer for an application that does not exist and
// for one the caller may not see: no existence oracle.
func errNotFound(name string) error {
	return errorf(http.StatusNotFound, "application "+quoteShort(name)+" not found")
}

// appendNamed appends to found the rows of run (sorted by namespace, then
// name) named name, in namespace when it is not empty, that sc sees. A run
// of one namespace (a tenant's, or one namespace's rows) is searched in
// O(log n); a run across namespaces (the CD Applications), in full.
func appendNamed(found []*projection.App, sc auth.Scope, run []*projection.App, name, namespace string) []*projection.App {
	if len(run) == 0 {
		return found
	}
	if ns := run[0].Namespace; ns == run[len(run)-1].Namespace {
		if namespace != "" && namespace != ns {
			return found
		}
		if a := projection.FindRow(run, projection.AppKey{Namespace: ns, Name: name}); a != nil && stream.Visible(sc, a) {
			found = append(found, a)
		}
		return found
	}
	for _, a := range run {
		if a.Name == name && (namespace == "" || a.Namespace == namespace) && stream.Visible(sc, a) {
			found = append(found, a)
		}
	}
	return found
}

// lookup finds the row a scoped request names: the path's name, narrowed
// by a namespace parameter when given. A name that exists in several
// visible namespaces without one is a 400 that lists them.
func (s *Server) lookup(c echo.Context, snap *projection.Snapshot, name, namespace string) (*projection.App, error) {
	sc, err := scopeOf(c)
	if err != nil {
		return nil, err
	}
	if err := validName("application name", name); err != nil {
		return nil, err
	}
	if namespace != "" {
		if err := validNamespace("namespace", namespace); err != nil {
			return nil, err
		}
	}
	var found []*projection.App
	for _, run := range visibleRuns(snap, sc) {
		found = appendNamed(found, sc, run.rows, name, namespace)
	}
	switch len(found) {
	case 0:
		return nil, errNotFound(name)
	case 1:
		return found[0], nil
	}
	var nss []string
	for _, a := range found {
		nss = append(nss, a.Namespace)
	}
	return nil, errorf(http.StatusBadRequest, "application "+quoteShort(name)+" exists in namespaces "+strings.Join(nss, ", ")+": add ?appNamespace=<namespace>")
}

// appParams are the query parameters of the single-application routes.
// Argo CD's REST gateway repeats path parameters in the query: name (and
// applicationName, the path parameter of its resource-tree routes) must
// then agree with the path. project narrows like appNamespace and must
// agree with the app's project; refresh is accepted (the projection is
// always current, so there is nothing to refresh).
var appParams = []string{"name", "applicationName", "appNamespace", "project", "refresh"}

// appFromPath resolves :name with ?appNamespace= and ?project=, checking
// the gateway's repeated path parameters.
func (s *Server) appFromPath(c echo.Context, snap *projection.Snapshot, extra ...string) (*projection.App, error) {
	return s.resolveApp(c, snap, false, extra...)
}

// resolveApp is appFromPath; with nameIsResource, ?name= is not the app's
// but the resource's (Argo CD's resource routes send the resource's name
// there) and the caller checks it.
func (s *Server) resolveApp(c echo.Context, snap *projection.Snapshot, nameIsResource bool, extra ...string) (*projection.App, error) {
	q := c.QueryParams()
	known := appParams
	if len(extra) > 0 {
		known = append(slices.Clone(appParams), extra...)
	}
	if err := checkParams(q, known...); err != nil {
		return nil, err
	}
	name := c.Param("name")
	keys := [...]string{"applicationName", "name"}
	n := len(keys)
	if nameIsResource {
		n-- // name is the resource's, not the application's
	}
	for _, k := range keys[:n] {
		if err := agrees(q, k, name, "application"); err != nil {
			return nil, err
		}
	}
	if err := checkRefresh(q); err != nil {
		return nil, err
	}
	ns, err := single(q, "appNamespace")
	if err != nil {
		return nil, err
	}
	project, err := single(q, "project")
	if err != nil {
		return nil, err
	}
	a, err := s.lookup(c, snap, name, ns)
	if err != nil {
		return nil, err
	}
	if project != "" && project != a.Project {
		return nil, errorf(http.StatusBadRequest, "application "+quoteShort(a.Name)+" belongs to project "+quoteShort(a.Project)+", not "+quoteShort(project))
	}
	return a, nil
}

// agrees checks a path parameter repeated in the query: every value given
// must equal the path's.
func agrees(q url.Values, key, path, what string) error {
	for _, v := range q[key] {
		if v != path {
			return errorf(http.StatusBadRequest, "query parameter "+key+"="+quoteShort(v)+" contradicts the path, which names "+what+" "+quoteShort(path))
		}
	}
	return nil
}

// checkRefresh accepts Argo CD's refresh parameter (normal or hard).
func checkRefresh(q url.Values) error {
	v, err := single(q, "refresh")
	if err != nil {
		return err
	}
	switch v {
	case "", "normal", "hard", "true", "false":
		return nil
	}
	return errorf(http.StatusBadRequest, "refresh must be normal or hard")
}

func (s *Server) listApplications(c echo.Context) error {
	sc, err := scopeOf(c)
	if err != nil {
		return err
	}
	lq, err := parseListQuery(c.QueryParams(), s.clusterNames)
	if err != nil {
		return err
	}
	snap, err := s.snapshotAt(c, lq.resourceVersion)
	if err != nil {
		return err
	}
	rows := func(yield func(*projection.App) bool) {
		for a := range s.visibleRows(snap, sc) {
			if lq.matches(a) && !yield(a) {
				return
			}
		}
	}
	key := "apps|" + sc.Key() + "|" + lq.key()
	if lq.fields == nil {
		// A list is never assembled in memory: plain, it is written row by
		// row from the pre-encoded rows; gzipped, it is spliced from runs
		// compressed once per version (gzlist.go). A change elsewhere in
		// the fleet costs a tenant's next list no rendering.
		if notModifiedAt(c, s.listTag(snap, key, rows)) {
			return c.NoContent(http.StatusNotModified)
		}
		if acceptsGzip(c.Request()) {
			return s.writeGzipList(c, snap, key, func() []rowRun { return visibleRuns(snap, sc) }, func(a *projection.App) bool {
				return stream.Visible(sc, a) && lq.matches(a)
			})
		}
		h := c.Response().Header()
		h.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
		// With its length known, the list goes out in whole writes of the
		// list buffer, not in chunks the socket takes two writes each.
		h.Set(echo.HeaderContentLength, strconv.Itoa(projection.ApplicationListSize(snap.Position, rows)))
		c.Response().WriteHeader(http.StatusOK)
		return projection.WriteApplicationList(c.Response(), snap.Position, rows)
	}
	return s.respondCachedAt(c, s.listTag(snap, key, rows), key, func() ([]byte, error) {
		body := projection.AppendApplicationList(nil, snap.Position, rows)
		if lq.fields == nil {
			return body, nil
		}
		var doc any
		if err := json.Unmarshal(body, &doc); err != nil {
			return nil, err
		}
		return json.Marshal(selectFields(doc, lq.fields))
	})
}

func (s *Server) getApplication(c echo.Context) error {
	snap, err := s.snapshotAt(c, projection.Position{})
	if err != nil {
		return err
	}
	a, err := s.appFromPath(c, snap)
	if err != nil {
		return err
	}
	if hist, _, ok := s.gitHistory(c, a); ok {
		return s.applicationWithGitHistory(c, a, hist)
	}
	return s.respondCachedAt(c, a.ETag(), "app|"+a.Key().String(), func() ([]byte, error) { return a.ApplicationJSON(), nil })
}

func (s *Server) getTree(c echo.Context) error {
	snap, err := s.snapshotAt(c, projection.Position{})
	if err != nil {
		return err
	}
	a, err := s.appFromPath(c, snap)
	if err != nil {
		return err
	}
	return s.respondCachedAt(c, a.TreeETag(), "tree|"+a.Key().String(), func() ([]byte, error) { return a.ApplicationTreeJSON(), nil })
}

type syncWindowsState struct {
	ActiveWindows   []struct{} `json:"activeWindows"`
	AssignedWindows []struct{} `json:"assignedWindows"`
	CanSync         bool       `json:"canSync"`
}

func (s *Server) syncWindows(c echo.Context) error {
	sc, err := scopeOf(c)
	if err != nil {
		return err
	}
	if _, err := s.appFromPath(c, s.d.Snapshots.Snapshot()); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, syncWindowsState{ActiveWindows: []struct{}{}, AssignedWindows: []struct{}{}, CanSync: sc.CanWrite()})
}

// revisionMetadata is Argo CD's RevisionMetadata; date is absent when
// deployd does not know it (a declared release not rolled out yet).
type revisionMetadata struct {
	Author  string   `json:"author,omitempty"`
	Date    string   `json:"date,omitempty"`
	Message string   `json:"message"`
	Tags    []string `json:"tags,omitempty"`
}

// revisionMetadata answers for a revision the app has run, or the one it
// declares now (sync.revision) even before it is rolled out: {date, message}.
func (s *Server) revisionMetadata(c echo.Context) error {
	a, err := s.appFromPath(c, s.d.Snapshots.Snapshot(), "revision", "sourceIndex", "versionId")
	if err != nil {
		return err
	}
	rev := c.Param("rev")
	if err := agrees(c.QueryParams(), "revision", rev, "revision"); err != nil {
		return err
	}
	if _, commits, ok := s.gitHistory(c, a); ok {
		if m, ok := gitRevisionMetadata(commits, rev); ok {
			return c.JSON(http.StatusOK, m)
		}
	}
	for i := len(a.History) - 1; i >= 0; i-- {
		h := a.History[i]
		if h.Revision == rev {
			return c.JSON(http.StatusOK, revisionMetadata{
				Date:    projection.Timestamp(h.DeployedAt),
				Message: "release " + h.Revision + " of " + a.Name,
			})
		}
	}
	if rev != "" && rev == a.Application().Status.Sync.Revision {
		return c.JSON(http.StatusOK, revisionMetadata{
			Message: "release " + rev + " of " + a.Name + ", declared and not rolled out yet",
		})
	}
	return errorf(http.StatusNotFound, "revision "+quoteShort(rev)+" is not in the history of "+quoteShort(a.Name))
}
