package handlers

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/hanzoai/deploy/projection"
	"github.com/labstack/echo/v4"
)

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
