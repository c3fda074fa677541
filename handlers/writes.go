package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/projection"
)

// Writer performs deployd's writes: JSON merge patches of an App or a
// Deployment. It returns the object as stored.
type Writer interface {
	MergePatch(ctx context.Context, kind projection.Kind, namespace, name string, patch []byte) (map[string]any, error)
}

// writeRoutes mounts the writes. The SuperAdmin check comes first, before
// anything is looked up; cookie-authenticated writes must come from the
// dashboard's origin (SameOrigin, on every request).
func (s *Server) writeRoutes() {
	w := []echo.MiddlewareFunc{s.requireWriter, s.requireReady}
	for path, h := range map[string]echo.HandlerFunc{
		"/v1/deploy/:name/sync":      s.sync(nativeParams),
		"/v1/deploy/:name/rollback":  s.rollback(nativeParams),
		"/v1/paas/apps/:app/deploy":  s.paasDeploy,
		"/v1/paas/apps/:app/release": s.paasRelease,
	} {
		s.handle(http.MethodPost, path, h, w...)
		s.writes[writeRoute{http.MethodPost, path}] = true
	}
}

var nativeParams = []string{"namespace", "appNamespace"}

// requireWriter admits SuperAdmins only: 401 without a principal, 403 for
// anyone else — whether or not the app exists.
func (s *Server) requireWriter(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := superAdminOnly(c, "writes are"); err != nil {
			return err
		}
		if s.d.Writer == nil {
			return errorf(http.StatusServiceUnavailable, "writes are not available: no Kubernetes configuration")
		}
		return next(c)
	}
}

// writableApp resolves the App a write names. Only operator Apps are
// written: a static site or a CD Application is a 400.
func (s *Server) writableApp(c echo.Context, params []string) (*projection.App, error) {
	snap := s.d.Snapshots.Snapshot()
	var a *projection.App
	var err error
	if len(params) > 0 && params[0] == "namespace" {
		a, err = s.nativeApp(c, snap)
	} else {
		a, err = s.appFromPath(c, snap)
	}
	if err != nil {
		return nil, err
	}
	rec := auditOf(c)
	rec.app, rec.namespace = a.Name, a.Namespace
	if a.Row != projection.RowApp {
		return nil, errorf(http.StatusBadRequest, quoteShort(a.Name)+" is a "+rowNoun(a.Row)+": only Apps are synced and rolled back")
	}
	return a, nil
}

func rowNoun(k projection.RowKind) string {
	if k == projection.RowSite {
		return "static site"
	}
	return "CD Application"
}

// syncAnnotations is the annotation part of the sync merge patch: when, and
// who: the subject (the stable identity) and, beside it, the display name.
func (s *Server) syncAnnotations(c echo.Context) map[string]any {
	by, name := "", ""
	if p := auth.PrincipalFrom(c.Request().Context()); p != nil {
		by, name = p.Subject, p.Username
	}
	return map[string]any{
		projection.AnnotationSyncRequestedAt:     s.d.Now().UTC().Format(time.RFC3339),
		projection.AnnotationSyncRequestedBy:     by,
		projection.AnnotationSyncRequestedByName: name,
	}
}

// sync asks the operator to reconcile the App now: the sync annotation, by
// merge patch. It answers the Application.
func (s *Server) sync(params []string) echo.HandlerFunc {
	return func(c echo.Context) error {
		body, err := io.ReadAll(c.Request().Body)
		if err != nil {
			return errorf(http.StatusBadRequest, "the sync body could not be read (at most 64 KiB)")
		}
		namespaceFromBody(c, body, params)
		a, err := s.writableApp(c, params)
		if err != nil {
			return err
		}
		dryRun, err := parseSync(body, a)
		if err != nil {
			return err
		}
		auditOf(c).summary = "sync"
		if dryRun {
			auditOf(c).summary = "sync (dry run)"
			return c.JSONBlob(http.StatusOK, a.ApplicationJSON())
		}
		patch := map[string]any{"metadata": map[string]any{"annotations": s.syncAnnotations(c)}}
		return s.patchAndAnswer(c, a, patch)
	}
}

// namespaceFromBody takes the app's namespace from a write's body
// (appNamespace, as Argo CD's UI sends it) when the query names none: an
// App's name alone may be in several clusters. The body is checked against
// the app found later, as a whole.
func namespaceFromBody(c echo.Context, body []byte, params []string) {
	if !slices.Contains(params, "appNamespace") {
		return
	}
	q := c.QueryParams()
	if q.Get("appNamespace") != "" || q.Get("namespace") != "" {
		return
	}
	var named struct {
		AppNamespace string `json:"appNamespace"`
	}
	if json.Unmarshal(bytes.TrimSpace(body), &named) == nil && named.AppNamespace != "" {
		q.Set("appNamespace", named.AppNamespace)
	}
}

// drainBody refuses a body a route does not take.
func drainBody(c echo.Context) error {
	b, _ := io.ReadAll(io.LimitReader(c.Request().Body, 1<<16))
	if t := bytes.TrimSpace(b); len(t) > 0 && string(t) != "{}" && string(t) != "null" {
		var v map[string]any
		if json.Unmarshal(t, &v) != nil {
			return errorf(http.StatusBadRequest, "the request body is not JSON: send {} or nothing")
		}
	}
	return nil
}
