package handlers

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hanzoai/deploy/projection"
)

// syncRequest is Argo CD's ApplicationSyncRequest. deployd's sync asks the
// operator to reconcile the whole App to its declared version: options that
// would change that are refused by name, never ignored.
type syncRequest struct {
	Name            string          `json:"name"`
	AppNamespace    string          `json:"appNamespace"`
	Project         string          `json:"project"`
	Revision        string          `json:"revision"`
	Revisions       []string        `json:"revisions"`
	SourcePositions []int64         `json:"sourcePositions"`
	DryRun          bool            `json:"dryRun"`
	Prune           bool            `json:"prune"`
	Strategy        *syncStrategy   `json:"strategy"`
	Resources       []any           `json:"resources"`
	Manifests       []string        `json:"manifests"`
	Infos           []any           `json:"infos"`
	RetryStrategy   json.RawMessage `json:"retryStrategy"`
	SyncOptions     *struct {
		Items []string `json:"items"`
	} `json:"syncOptions"`
}

type syncStrategy struct {
	Apply *struct {
		Force bool `json:"force"`
	} `json:"apply"`
	Hook *struct {
		Force bool `json:"force"`
	} `json:"hook"`
}

// parseSync reads a sync body (none, {} or Argo CD's SyncRequest) and
// checks it against the app; it reports whether it is a dry run.
func parseSync(body []byte, a *projection.App) (bool, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || string(body) == "null" {
		return false, nil
	}
	var req syncRequest
	if err := decodeBody(body, &req, "sync"); err != nil {
		return false, err
	}
	if err := sameApp(a, req.Name, req.AppNamespace, req.Project); err != nil {
		return false, err
	}
	declared := a.Application().Status.Sync.Revision
	for _, r := range append([]string{req.Revision}, req.Revisions...) {
		if r != "" && r != "HEAD" && r != declared && r != a.Application().Spec.Source.TargetRevision {
			return false, errorf(http.StatusBadRequest, "revision "+quoteShort(r)+" cannot be synced: deployd syncs the declared revision "+quoteShort(declared)+"; roll back by history id to run an earlier release")
		}
	}
	for _, p := range req.SourcePositions {
		if p != 1 {
			return false, errorf(http.StatusBadRequest, "sourcePositions: the application has one source")
		}
	}
	refuse := func(option, why string) error {
		return errorf(http.StatusBadRequest, option+" is not supported: "+why)
	}
	switch {
	case req.Prune:
		return false, refuse("prune", "deployd never deletes resources on sync; send prune: false")
	case len(req.Resources) > 0:
		return false, refuse("resources", "deployd syncs the whole application; send no resources")
	case len(req.Manifests) > 0:
		return false, refuse("manifests", "deployd syncs what the App declares")
	case len(req.Infos) > 0:
		return false, refuse("infos", "deployd takes no build environment")
	case len(bytes.TrimSpace(req.RetryStrategy)) > 0 && string(bytes.TrimSpace(req.RetryStrategy)) != "null":
		return false, refuse("retryStrategy", "the operator retries by itself")
	case req.SyncOptions != nil && len(req.SyncOptions.Items) > 0:
		return false, refuse("syncOptions", "deployd's sync has no options (asked for "+quoteShort(strings.Join(req.SyncOptions.Items, ", "))+")")
	case req.Strategy != nil && req.Strategy.Apply != nil:
		return false, refuse("strategy.apply", "deployd's sync is the default (hook) strategy")
	case req.Strategy != nil && req.Strategy.Hook != nil && req.Strategy.Hook.Force:
		return false, refuse("strategy.hook.force", "deployd never replaces resources by force")
	}
	return req.DryRun, nil
}

// decodeBody decodes one JSON value with unknown fields refused by name.
func decodeBody(body []byte, v any, what string) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return errorf(http.StatusBadRequest, "the "+what+" body has field "+quoteShort(strings.Trim(f, `"`))+", which deployd does not know")
		}
		return errorf(http.StatusBadRequest, "the "+what+" body is not valid JSON of the expected shape")
	}
	if dec.More() {
		return errorf(http.StatusBadRequest, "the "+what+" body holds more than one JSON value")
	}
	return nil
}

// sameApp checks the app a body names (name, appNamespace, project, each
// optional) against the app the path resolved.
func sameApp(a *projection.App, name, namespace, project string) error {
	switch {
	case name != "" && name != a.Name:
		return errorf(http.StatusBadRequest, "the body names application "+quoteShort(name)+", the path "+quoteShort(a.Name))
	case namespace != "" && namespace != a.Namespace:
		return errorf(http.StatusBadRequest, "the body's appNamespace "+quoteShort(namespace)+" is not the application's namespace "+quoteShort(a.Namespace))
	case project != "" && project != a.Project:
		return errorf(http.StatusBadRequest, "application "+quoteShort(a.Name)+" belongs to project "+quoteShort(a.Project)+", not "+quoteShort(project))
	}
	return nil
}

// actionRequest is Argo CD's ResourceActionRunRequestV2 (the v1 route
// takes the same fields from the query and the action as a JSON string).
type actionRequest struct {
	Name                     string `json:"name"`
	AppNamespace             string `json:"appNamespace"`
	Project                  string `json:"project"`
	Namespace                string `json:"namespace"`
	ResourceName             string `json:"resourceName"`
	Version                  string `json:"version"`
	Group                    string `json:"group"`
	Kind                     string `json:"kind"`
	Action                   string `json:"action"`
	ResourceActionParameters []any  `json:"resourceActionParameters"`
}

// runResourceAction runs the restart action on a Deployment of the app's
// tree: a rolling restart (SuperAdmin, audited). v2
// takes Argo CD's ResourceActionRunRequestV2 body; v1 the action as a JSON
// string and the resource in the query.
func (s *Server) runResourceAction(v2 bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		body, err := io.ReadAll(c.Request().Body)
		if err != nil {
			return errorf(http.StatusBadRequest, "the request body could not be read (at most 64 KiB)")
		}
		var req actionRequest
		if v2 {
			if err := decodeBody(body, &req, "action"); err != nil {
				return err
			}
			q := c.QueryParams()
			for k, v := range map[string]string{"name": req.Name, "appNamespace": req.AppNamespace, "project": req.Project,
				"namespace": req.Namespace, "resourceName": req.ResourceName, "version": req.Version, "group": req.Group, "kind": req.Kind} {
				if v == "" {
					continue
				}
				if got, ok := q[k]; ok && (len(got) != 1 || got[0] != v) {
					return errorf(http.StatusBadRequest, "the body's "+k+" "+quoteShort(v)+" contradicts the query's")
				}
				q.Set(k, v)
			}
		} else if err := json.Unmarshal(bytes.TrimSpace(body), &req.Action); err != nil {
			return errorf(http.StatusBadRequest, `the action body must be the action's name as a JSON string, e.g. "restart"`)
		}
		a, n, err := s.appResource(c)
		if err != nil {
			return err
		}
		rec := auditOf(c)
		rec.app, rec.namespace = a.Name, a.Namespace
		rec.summary = "action " + req.Action + " " + n.Obj.Kind.String() + " " + n.Obj.Namespace + "/" + n.Obj.Name
		switch {
		case req.Action != actionRestart:
			return errorf(http.StatusBadRequest, "action "+quoteShort(req.Action)+" is not one deployd runs: the only action is restart, on a Deployment")
		case n.Obj.Kind != projection.KindDeployment:
			return errorf(http.StatusBadRequest, "restart runs on a Deployment, not on a "+n.Obj.Kind.String())
		case len(req.ResourceActionParameters) > 0:
			return errorf(http.StatusBadRequest, "resourceActionParameters: restart takes none")
		}
		at := s.d.Now().UTC().Format(time.RFC3339)
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
			"annotations": map[string]any{projection.AnnotationRestartedAt: at}}}}})
		if _, err := s.mergePatch(c.Request().Context(), projection.KindDeployment, n.Obj.Namespace, n.Obj.Name, patch); err != nil {
			return err
		}
		rec.summary += " at " + at
		return c.JSON(http.StatusOK, struct{}{})
	}
}
