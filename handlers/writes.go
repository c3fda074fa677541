package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/handlers/metrics"
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
	e := s.e
	w := []echo.MiddlewareFunc{s.requireWriter, s.requireReady}
	for path, h := range map[string]echo.HandlerFunc{
		"/v1/deploy/:name/sync":      s.sync(nativeParams),
		"/v1/deploy/:name/rollback":  s.rollback(nativeParams),
		"/v1/paas/apps/:app/deploy":  s.paasDeploy,
		"/v1/paas/apps/:app/release": s.paasRelease,
	} {
		e.POST(path, h, w...)
		s.writes[http.MethodPost+" "+path] = true
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

// auditKey carries what a write handler did, for its audit line.
type auditKey struct{}

type auditRecord struct {
	app, namespace, summary string
}

// isWriteRoute reports whether a route pattern is one of the writes.
func (s *Server) isWriteRoute(method, path string) bool {
	if method == http.MethodPost && (path == reconcilePath || path == webhookPath || path == suspendPath || path == resumePath) {
		return true
	}
	return s.writes[method+" "+path]
}

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
		c.SetRequest(c.Request().WithContext(context.WithValue(c.Request().Context(), auditKey{}, rec)))
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
		s.d.Log.LogAttrs(c.Request().Context(), slog.LevelInfo, "audit", attrs...)
		return err
	}
}

func auditOf(c echo.Context) *auditRecord {
	if rec, ok := c.Request().Context().Value(auditKey{}).(*auditRecord); ok {
		return rec
	}
	return &auditRecord{}
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
		a, err := s.writableApp(c, params)
		if err != nil {
			return err
		}
		body, err := io.ReadAll(c.Request().Body)
		if err != nil {
			return errorf(http.StatusBadRequest, "the sync body could not be read (at most 64 KiB)")
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

// rollbackRequest is Argo CD's rollback body ({"id": N, …}) or deployd's
// ({"tag": "vX.Y.Z"}).
type rollbackRequest struct {
	ID           *int64 `json:"id"`
	Tag          string `json:"tag"`
	DryRun       bool   `json:"dryRun"`
	Prune        bool   `json:"prune"`
	Name         string `json:"name"`
	AppNamespace string `json:"appNamespace"`
	Project      string `json:"project"`
}

const rollbackUsage = `send {"id": <history id>} or {"tag": "vX.Y.Z"}`

// parseRollback decodes and checks a rollback body against the app's
// history; it returns the tag to roll back to.
func parseRollback(body []byte, a *projection.App) (string, rollbackRequest, error) {
	return parseRollbackIn(body, a, a.History)
}

// parseRollbackIn is parseRollback against the given history (the App's
// joined with the tags its file declared in git, for a managed App).
func parseRollbackIn(body []byte, a *projection.App, history []projection.HistoryEntry) (string, rollbackRequest, error) {
	var req rollbackRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return "", req, errorf(http.StatusBadRequest, "the rollback body is not valid JSON of the expected shape: "+rollbackUsage)
	}
	if dec.More() {
		return "", req, errorf(http.StatusBadRequest, "the rollback body holds more than one JSON value: "+rollbackUsage)
	}
	switch {
	case req.ID == nil && req.Tag == "":
		return "", req, errorf(http.StatusBadRequest, "the rollback body names no release: "+rollbackUsage)
	case req.ID != nil && req.Tag != "":
		return "", req, errorf(http.StatusBadRequest, "the rollback body names both an id and a tag: send one of them")
	case req.Prune:
		return "", req, errorf(http.StatusBadRequest, "prune is not supported: deployd never deletes resources on rollback; send prune: false")
	}
	if err := sameApp(a, req.Name, req.AppNamespace, req.Project); err != nil {
		return "", req, err
	}
	if req.ID != nil {
		for _, h := range history {
			if h.ID == *req.ID && h.ID > 0 {
				if !projection.IsSemverTag(h.Revision) {
					return "", req, errorf(http.StatusBadRequest, "history id "+strconv.FormatInt(h.ID, 10)+" ran "+quoteShort(h.Revision)+", which is not a vX.Y.Z release: roll back by tag")
				}
				return h.Revision, req, nil
			}
		}
		return "", req, errorf(http.StatusBadRequest, "the history of "+quoteShort(a.Name)+" has no id "+strconv.FormatInt(*req.ID, 10)+"; its ids are "+historyIDsIn(history))
	}
	if !projection.IsSemverTag(req.Tag) {
		return "", req, errorf(http.StatusBadRequest, "tag "+quoteShort(req.Tag)+" is not a release: send a clean vX.Y.Z tag")
	}
	for _, h := range history {
		if h.Revision == req.Tag {
			return req.Tag, req, nil
		}
	}
	return "", req, errorf(http.StatusBadRequest, quoteShort(req.Tag)+" was never released to "+quoteShort(a.Name)+"; its history holds "+historyTagsIn(history))
}

func historyIDsIn(history []projection.HistoryEntry) string {
	var ids []string
	for _, h := range history {
		if h.ID > 0 {
			ids = append(ids, strconv.FormatInt(h.ID, 10))
		}
	}
	if len(ids) == 0 {
		return "none (roll back by tag)"
	}
	return strings.Join(ids, ", ")
}

func historyTags(a *projection.App) string { return historyTagsIn(a.History) }

func historyTagsIn(history []projection.HistoryEntry) string {
	var tags []string
	for _, h := range history {
		if projection.IsSemverTag(h.Revision) {
			tags = append(tags, h.Revision)
		}
	}
	if len(tags) == 0 {
		return "no vX.Y.Z release"
	}
	return strings.Join(tags, ", ")
}

// rollback pins the App's declared tag to a prior release; the operator
// rolls it out. It answers the Application.
func (s *Server) rollback(params []string) echo.HandlerFunc {
	return func(c echo.Context) error {
		a, err := s.writableApp(c, params)
		if err != nil {
			return err
		}
		if a.Repository == "" {
			return errorf(http.StatusUnprocessableEntity, quoteShort(a.Name)+" declares no image repository (spec.image.repository): there is nothing to roll back")
		}
		body, err := io.ReadAll(c.Request().Body)
		if err != nil {
			return errorf(http.StatusBadRequest, "the rollback body could not be read (at most 64 KiB)")
		}
		file, managed := s.managedFile(a)
		history := a.History
		if managed {
			history = s.withGitHistory(c, a)
		}
		tag, req, err := parseRollbackIn(body, a, history)
		rec := auditOf(c)
		rec.summary = summarizeRollback(req)
		if err != nil {
			return err
		}
		rec.summary += " -> " + tag
		if managed && !s.d.Engine.PushEnabled() {
			return s.pushOffError(a, file)
		}
		if req.DryRun {
			return c.JSONBlob(http.StatusOK, a.ApplicationJSON())
		}
		if managed {
			// A commit: the engine's leader makes it.
			if handled, err := s.forwardToLeader(c, body); handled {
				return err
			}
			return s.writeTag(c, a, tag, "rollback")
		}
		patch := map[string]any{
			"metadata": map[string]any{"annotations": s.syncAnnotations(c)},
			"spec":     map[string]any{"image": map[string]any{"tag": tag}},
		}
		return s.patchAndAnswer(c, a, patch)
	}
}

func summarizeRollback(r rollbackRequest) string {
	switch {
	case r.ID != nil:
		return "rollback id " + strconv.FormatInt(*r.ID, 10)
	case r.Tag != "":
		return "rollback tag " + r.Tag
	}
	return "rollback"
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

// patchAndAnswer merge-patches the App (retrying once on a conflict) and
// answers its Application as the projection sees it once the watch has
// delivered the change or any later version of the App (another write may
// land first: the patched version itself is then never seen), or, after a
// short wait, as it was with the operation pending.
func (s *Server) patchAndAnswer(c echo.Context, a *projection.App, patch map[string]any) error {
	body, _ := json.Marshal(patch)
	stored, err := s.mergePatch(c.Request().Context(), projection.KindApp, a.Namespace, a.Name, body)
	if err != nil {
		phase := metrics.PhaseFailed
		var ae *apiError
		if errors.As(err, &ae) && ae.Code >= 500 {
			phase = metrics.PhaseError
		}
		s.d.Metrics.AppSync(a, phase)
		return err
	}
	s.d.Metrics.AppSync(a, metrics.PhaseSucceeded)
	rv := resourceVersionOf(stored)
	ctx, cancel := context.WithTimeout(c.Request().Context(), 3*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if cur := s.d.Snapshots.Snapshot().Get(a.Namespace, a.Name); cur != nil && len(cur.Tree) > 0 && reached(cur.Tree[0].Obj.ResourceVersion, rv) {
			return c.JSONBlob(http.StatusOK, cur.ApplicationJSON())
		}
		select {
		case <-ctx.Done():
			s.d.Log.Warn("the watch had not delivered a write yet; answering the last known state", "app", a.Key().String(), "resourceVersion", rv)
			return c.JSONBlob(http.StatusOK, a.ApplicationJSON())
		case <-tick.C:
		}
	}
}

// reached reports whether the delivered resourceVersion cur is the written
// one or a later version of the same object. resourceVersions are opaque in
// general; an etcd-backed API server gives decimal integers that grow with
// every write, and apimachinery's CompareResourceVersion orders exactly
// those (well-formed decimals, no leading zero) and refuses anything else.
// Two versions it cannot order are the same only when equal: a server of
// opaque versions is waited for by the exact version, as before.
func reached(cur, written string) bool {
	if cur == written {
		return true
	}
	cmp, err := resourceversion.CompareResourceVersion(cur, written)
	return err == nil && cmp > 0
}

// mergePatch patches, retrying once on a conflict (then 409), and maps
// Kubernetes errors to safe answers.
func (s *Server) mergePatch(ctx context.Context, kind projection.Kind, ns, name string, patch []byte) (map[string]any, error) {
	stored, err := s.d.Writer.MergePatch(ctx, kind, ns, name, patch)
	if apierrors.IsConflict(err) {
		stored, err = s.d.Writer.MergePatch(ctx, kind, ns, name, patch)
	}
	if err != nil {
		return nil, clusterError(err, "patch "+kind.String(), "patch")
	}
	return stored, nil
}

func resourceVersionOf(obj map[string]any) string {
	md, _ := obj["metadata"].(map[string]any)
	rv, _ := md["resourceVersion"].(string)
	return rv
}

type deployAnswer struct {
	OK          bool   `json:"ok"`
	App         string `json:"app"`
	Namespace   string `json:"namespace"`
	Env         string `json:"env"`
	RestartedAt string `json:"restartedAt"`
}

// paasDeploy rolls the app's Deployment (a rolling restart: the image tag
// never changes). env is required: deploy never defaults to production.
func (s *Server) paasDeploy(c echo.Context) error {
	name, env, namespace, err := paasAppParams(c)
	if err != nil {
		return err
	}
	if env == "" {
		return errorf(http.StatusBadRequest, "env is required: add ?env=main, test or dev (deploy never defaults to production)")
	}
	if err := drainBody(c); err != nil {
		return err
	}
	rec := auditOf(c)
	rec.summary = "rolling restart env=" + env
	a, err := s.paasTarget(name, env, namespace)
	if err != nil {
		return err
	}
	rec.namespace = a.Namespace
	hasDeployment := false
	for _, n := range a.Tree {
		if n.Obj.Kind == projection.KindDeployment && n.Obj.Name == a.Name {
			hasDeployment = true
		}
	}
	if !hasDeployment {
		return errorf(http.StatusNotFound, "app "+quoteShort(name)+" has no Deployment to restart")
	}
	at := s.d.Now().UTC().Format(time.RFC3339)
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
		"annotations": map[string]any{projection.AnnotationRestartedAt: at}}}}})
	if _, err := s.mergePatch(c.Request().Context(), projection.KindDeployment, a.Namespace, a.Name, patch); err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, deployAnswer{OK: true, App: a.Name, Namespace: a.Namespace, Env: env, RestartedAt: at})
}

// paasTarget is the one operator App named name in env (and namespace,
// when given).
func (s *Server) paasTarget(name, env, namespace string) (*projection.App, error) {
	var found []*projection.App
	for a := range s.d.Snapshots.Snapshot().Apps() {
		if a.Row == projection.RowApp && a.Name == name && a.Env == env && (namespace == "" || a.Namespace == namespace) {
			found = append(found, a)
		}
	}
	switch {
	case len(found) == 0:
		where := "env " + env
		if namespace != "" {
			where += " in namespace " + namespace
		}
		return nil, errorf(http.StatusNotFound, "app "+quoteShort(name)+" does not run in "+where)
	case len(found) > 1:
		var nss []string
		for _, a := range found {
			nss = append(nss, a.Namespace)
		}
		return nil, errorf(http.StatusBadRequest, "app "+quoteShort(name)+" runs in env "+env+" in namespaces "+strings.Join(nss, ", ")+": add &namespace=<namespace>")
	}
	return found[0], nil
}
