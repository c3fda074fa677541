package handlers

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/projection/drift"
)

// nativeParams: the native routes name the namespace with ?namespace=
// (?appNamespace= is accepted too).
func (s *Server) nativeApp(c echo.Context, snap *projection.Snapshot, extra ...string) (*projection.App, error) {
	q := c.QueryParams()
	if err := checkParams(q, append([]string{"namespace", "appNamespace"}, extra...)...); err != nil {
		return nil, err
	}
	ns, err := single(q, "namespace")
	if err != nil {
		return nil, err
	}
	if ns == "" {
		if ns, err = single(q, "appNamespace"); err != nil {
			return nil, err
		}
	}
	return s.lookup(c, snap, c.Param("name"), ns)
}

func (s *Server) nativeTree(c echo.Context) error {
	snap := s.d.Snapshots.Snapshot()
	a, err := s.nativeApp(c, snap)
	if err != nil {
		return err
	}
	return s.respondCachedAt(c, a.ETag()+"."+strconv.FormatUint(a.TreeDigest(), 36), "native|"+a.Key().String(), func() ([]byte, error) {
		return marshalJSON(a.NativeTree())
	})
}

// ref is a parsed ref token, group:kind:namespace:name.
type ref struct {
	kind      projection.Kind
	namespace string
	name      string
	token     string
}

// parseRef reads a ref token. The kind must be one deployd reads; Secrets
// are not, whatever the token says.
func parseRef(token string) (ref, error) {
	parts := strings.Split(token, ":")
	if len(parts) != 4 {
		return ref{}, errorf(http.StatusBadRequest, "resource ref "+quoteShort(token)+" is not group:kind:namespace:name (the core group is empty, as in :Service:hanzo:iam)")
	}
	group, kindName, ns, name := parts[0], parts[1], parts[2], parts[3]
	k := projection.LookupKind(group, kindName)
	if !k.InRegistry() {
		return ref{}, errorf(http.StatusBadRequest, "kind "+quoteShort(strings.TrimPrefix(group+"/"+kindName, "/"))+" is not one deployd reads")
	}
	if !projection.IsNamespace(ns) {
		return ref{}, errorf(http.StatusBadRequest, "namespace "+quoteShort(ns)+" in the resource ref is not a DNS-1123 label (or one followed by '.' and a cluster's name)")
	}
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		return ref{}, errorf(http.StatusBadRequest, "name "+quoteShort(name)+" in the resource ref is not a valid object name")
	}
	return ref{kind: k, namespace: ns, name: name, token: projection.RefToken(k, ns, name)}, nil
}

type resourceAnswer struct {
	Ref           string         `json:"ref"`
	Health        string         `json:"health"`
	HealthMessage string         `json:"healthMessage"`
	LiveManifest  map[string]any `json:"liveManifest"`
	DesiredSource string         `json:"desiredSource"`
	Diff          drift.Diff     `json:"diff"`
}

// resource answers one node's live manifest and its desired-vs-live diff.
// The object must belong to the app: in its tree (the App, owned by it,
// named after it, or below those), or carrying the instance label in the
// app's namespace. Anything else is 404, as for a missing object.
func (s *Server) resource(c echo.Context) error {
	snap := s.d.Snapshots.Snapshot()
	a, err := s.nativeApp(c, snap)
	if err != nil {
		return err
	}
	r, err := parseRef(c.Param("ref"))
	if err != nil {
		return err
	}
	notPart := errorf(http.StatusNotFound, "resource "+quoteShort(r.token)+" is not part of application "+quoteShort(a.Name))
	node, inTree := a.Node(r.token)
	if !inTree && r.namespace != a.Namespace {
		return notPart
	}
	if s.d.Live == nil {
		return errorf(http.StatusServiceUnavailable, "live manifests are not available: no Kubernetes configuration")
	}
	live, err := s.d.Live.Get(c.Request().Context(), r.kind, r.namespace, r.name)
	if err != nil {
		return clusterError(err, "read "+r.kind.String(), "get")
	}
	if !inTree && !labelledFor(live, a.Name) {
		return notPart
	}
	ans := resourceAnswer{Ref: r.token, Health: "", LiveManifest: liveManifest(live)}
	if inTree && node.HasHealth {
		ans.Health, ans.HealthMessage = string(node.Health.Status), node.Health.Message
	} else if o, err := projection.DecodeKind(r.kind, live); err == nil {
		if h, ok := projection.ObjectHealth(o); ok {
			ans.Health, ans.HealthMessage = string(h.Status), h.Message
		}
	}
	var desired map[string]any
	desired, ans.DesiredSource = drift.Desired(r.kind, live, s.rendered())
	if ans.Diff, err = drift.Compare(live, desired); err != nil {
		return errorCause(http.StatusBadGateway, "the difference could not be computed", err)
	}
	return c.JSON(http.StatusOK, ans)
}

func labelledFor(obj map[string]any, app string) bool {
	md, _ := obj["metadata"].(map[string]any)
	labels, _ := md["labels"].(map[string]any)
	v, _ := labels["app.kubernetes.io/instance"].(string)
	return v == app
}

// liveManifest is the object without its managedFields (bookkeeping, not
// state).
func liveManifest(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	if md, ok := obj["metadata"].(map[string]any); ok {
		m := make(map[string]any, len(md))
		for k, v := range md {
			if k != "managedFields" {
				m[k] = v
			}
		}
		out["metadata"] = m
	}
	return out
}

// clusterError turns an API server error into a safe answer: 404 for a
// missing object, 502 naming the RBAC verb for a refusal, 502 otherwise.
func clusterError(err error, what, verb string) error {
	var st apierrors.APIStatus
	switch {
	case apierrors.IsNotFound(err):
		return errorCause(http.StatusNotFound, "the object is not in the cluster (any more)", err)
	case apierrors.IsForbidden(err):
		return errorCause(http.StatusBadGateway, "deployd may not "+what+": its ClusterRole lacks the "+quoteShort(verb)+" verb", err)
	case apierrors.IsConflict(err):
		return errorCause(http.StatusConflict, "the object changed meanwhile; try again", err)
	case errors.As(err, &st):
		return errorCause(http.StatusBadGateway, "the Kubernetes API server refused to "+what, err)
	default:
		return errorCause(http.StatusBadGateway, "the Kubernetes API server could not be reached to "+what, err)
	}
}
