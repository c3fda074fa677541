package handlers

import (
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/hanzoai/deploy/projection"
)

// resourceParams name one object of an app's tree, as Argo CD's
// ApplicationResourceRequest does.
var resourceParams = []string{"namespace", "resourceName", "version", "group", "kind"}

// appResource resolves the app and the object of its tree the query names
// (namespace, resourceName, version, group, kind). ?name= is the
// resource's name on these routes (the UI sends it so), or the app's: it
// must be one of them. Only kinds deployd reads can be named (a Secret is
// not, whatever the query says), and only objects of the app's tree are
// found; anything else is the same 404.
func (s *Server) appResource(c echo.Context, extra ...string) (*projection.App, *projection.NodeInfo, error) {
	a, err := s.resolveApp(c, s.d.Snapshots.Snapshot(), true, append(append([]string(nil), resourceParams...), extra...)...)
	if err != nil {
		return nil, nil, err
	}
	q := c.QueryParams()
	get := func(k string) string { v, _ := single(q, k); return v }
	for _, k := range resourceParams {
		if _, err := single(q, k); err != nil {
			return nil, nil, err
		}
	}
	group, kindName, version, ns, name := get("group"), get("kind"), get("version"), get("namespace"), get("resourceName")
	if kindName == "" || name == "" {
		return nil, nil, errorf(http.StatusBadRequest, "name the resource with kind, resourceName, namespace, group (empty for the core group) and version")
	}
	if err := agreesAny(q, "name", a.Name, name); err != nil {
		return nil, nil, err
	}
	k := projection.LookupKind(group, kindName)
	if !k.InRegistry() {
		return nil, nil, errorf(http.StatusBadRequest, "kind "+quoteShort(trimGroup(group, kindName))+" is not one deployd reads")
	}
	if version != "" && version != k.Info().Version {
		return nil, nil, errorf(http.StatusBadRequest, "version "+quoteShort(version)+" of "+k.String()+" is not the one deployd reads ("+k.Info().Version+")")
	}
	if ns == "" {
		ns = a.Namespace
	}
	node, ok := a.Node(projection.RefToken(k, ns, name))
	if !ok {
		return nil, nil, errorf(http.StatusNotFound, "resource "+quoteShort(projection.RefToken(k, ns, name))+" is not part of application "+quoteShort(a.Name))
	}
	return a, node, nil
}

func trimGroup(group, kind string) string {
	if group == "" {
		return kind
	}
	return group + "/" + kind
}

// agreesAny checks a repeated parameter that may name either of two things.
func agreesAny(q url.Values, key, a, b string) error {
	for _, v := range q[key] {
		if v != a && v != b {
			return errorf(http.StatusBadRequest, "query parameter "+key+"="+quoteShort(v)+" names neither the application "+quoteShort(a)+" nor the resource "+quoteShort(b))
		}
	}
	return nil
}

// liveObject reads a tree node's object from the API server.
func (s *Server) liveObject(c echo.Context, n *projection.NodeInfo) (map[string]any, error) {
	if s.d.Live == nil {
		return nil, errorf(http.StatusServiceUnavailable, "live manifests are not available: no Kubernetes configuration")
	}
	live, err := s.d.Live.Get(c.Request().Context(), n.Obj.Kind, n.Obj.Namespace, n.Obj.Name)
	if err != nil {
		return nil, clusterError(err, "read "+n.Obj.Kind.String(), "get")
	}
	return live, nil
}

// liveOrGone is liveObject for a walk over the tree: an object deleted
// since the snapshot was taken is nil, not an error.
func (s *Server) liveOrGone(c echo.Context, n *projection.NodeInfo) (map[string]any, error) {
	if s.d.Live == nil {
		return nil, errorf(http.StatusServiceUnavailable, "live manifests are not available: no Kubernetes configuration")
	}
	live, err := s.d.Live.Get(c.Request().Context(), n.Obj.Kind, n.Obj.Namespace, n.Obj.Name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, clusterError(err, "read "+n.Obj.Kind.String(), "get")
	}
	return live, nil
}

// manifestAnswer is Argo CD's ApplicationResourceResponse.
type manifestAnswer struct {
	Manifest string `json:"manifest"`
}

// argoResource answers Argo CD's GET resource: the live manifest of one
// object of the app's tree, as a JSON string.
func (s *Server) argoResource(c echo.Context) error {
	_, n, err := s.appResource(c)
	if err != nil {
		return err
	}
	live, err := s.liveObject(c, n)
	if err != nil {
		return err
	}
	b, err := json.Marshal(liveManifest(live))
	if err != nil {
		return errorCause(http.StatusBadGateway, "the live manifest could not be encoded", err)
	}
	return c.JSON(http.StatusOK, manifestAnswer{Manifest: string(b)})
}

// linksAnswer is Argo CD's LinksResponse; deployd has no link
// configuration, so it is always empty.
type linksAnswer struct {
	Items []struct{} `json:"items"`
}

// appLinks answers Argo CD's application links: none. ?namespace= is the
// app's namespace on this route.
func (s *Server) appLinks(c echo.Context) error {
	q := c.QueryParams()
	if ns, err := single(q, "namespace"); err != nil {
		return err
	} else if ns != "" {
		if app, err := single(q, "appNamespace"); err != nil || (app != "" && app != ns) {
			return errorf(http.StatusBadRequest, "namespace and appNamespace name different namespaces")
		}
		q.Set("appNamespace", ns)
		q.Del("namespace")
	}
	if _, err := s.appFromPath(c, s.d.Snapshots.Snapshot()); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, linksAnswer{Items: []struct{}{}})
}

// resourceLinks answers Argo CD's resource links: none, for an object of
// the app's tree.
func (s *Server) resourceLinks(c echo.Context) error {
	if _, _, err := s.appResource(c); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, linksAnswer{Items: []struct{}{}})
}

// resourceAction is Argo CD's ResourceAction.
type resourceAction struct {
	Name        string `json:"name,omitempty"`
	Disabled    bool   `json:"disabled,omitempty"`
	IconClass   string `json:"iconClass,omitempty"`
	DisplayName string `json:"displayName,omitempty"`
}

type resourceActions struct {
	Actions []resourceAction `json:"actions"`
}

// actionRestart is the one action deployd runs: the rolling restart of a
// Deployment (its pod template's restartedAt annotation).
const actionRestart = "restart"

// resourceActions lists what can be run on an object: restart for a
// Deployment, disabled for a caller who may not write; nothing otherwise.
func (s *Server) resourceActions(c echo.Context) error {
	_, n, err := s.appResource(c)
	if err != nil {
		return err
	}
	out := resourceActions{Actions: []resourceAction{}}
	if n.Obj.Kind == projection.KindDeployment {
		sc, _ := scopeOf(c)
		out.Actions = append(out.Actions, resourceAction{Name: actionRestart, DisplayName: "Restart", IconClass: "fa fa-fw fa-redo", Disabled: !sc.CanWrite()})
	}
	return c.JSON(http.StatusOK, out)
}
