package handlers

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/projection/drift"
)

// resourceDiffItem is Argo CD's ResourceDiff: the states are JSON strings
// ("null" when there is none).
type resourceDiffItem struct {
	Group               string `json:"group,omitempty"`
	Kind                string `json:"kind,omitempty"`
	Namespace           string `json:"namespace,omitempty"`
	Name                string `json:"name,omitempty"`
	TargetState         string `json:"targetState,omitempty"`
	LiveState           string `json:"liveState,omitempty"`
	Diff                string `json:"diff,omitempty"`
	NormalizedLiveState string `json:"normalizedLiveState,omitempty"`
	PredictedLiveState  string `json:"predictedLiveState,omitempty"`
	ResourceVersion     string `json:"resourceVersion,omitempty"`
	Modified            bool   `json:"modified,omitempty"`
}

type managedResourcesAnswer struct {
	Items []resourceDiffItem `json:"items"`
}

// managedParams filter managed-resources to one object (Argo CD's
// ResourcesQuery: name is the resource's name here, the app is the path's).
var managedParams = []string{"namespace", "name", "version", "group", "kind", "fields"}

// managedResources answers Argo CD's managed-resources: for each object the
// app declares (its root and depth-1 children), the live state read now and
// the desired state — the engine's rendering when it manages the object,
// else the object's last-applied configuration — with the difference.
func (s *Server) managedResources(c echo.Context) error {
	a, err := s.resolveApp(c, s.d.Snapshots.Snapshot(), true, managedParams...)
	if err != nil {
		return err
	}
	q := c.QueryParams()
	filter := map[string]string{}
	for _, k := range managedParams[:5] {
		v, err := single(q, k)
		if err != nil {
			return err
		}
		filter[k] = v
	}
	fields, err := listFields(q)
	if err != nil {
		return err
	}
	out := managedResourcesAnswer{Items: []resourceDiffItem{}}
	for _, n := range a.ManagedNodes() {
		ki := n.Obj.Kind.Info()
		if !matchFilter(filter, ki, n.Obj) {
			continue
		}
		live, err := s.liveOrGone(c, n)
		if err != nil {
			return err
		}
		if live == nil {
			continue
		}
		item, err := s.diffItem(n, live)
		if err != nil {
			return errorCause(http.StatusBadGateway, "the difference could not be computed", err)
		}
		out.Items = append(out.Items, item)
	}
	return jsonFields(c, out, fields)
}

func matchFilter(f map[string]string, ki projection.KindInfo, o *projection.Object) bool {
	return (f["namespace"] == "" || f["namespace"] == o.Namespace) && (f["name"] == "" || f["name"] == o.Name) &&
		(f["kind"] == "" || f["kind"] == ki.Name) && (f["group"] == "" || f["group"] == ki.Group) &&
		(f["version"] == "" || f["version"] == ki.Version)
}

// rendered is the engines' rendering of the objects they declare (each
// object's cluster's engine), nil when no engine runs: where
// drift.Desired looks first.
func (s *Server) rendered() drift.Rendered {
	switch {
	case s.engines == nil && s.d.Engine == nil, s.engines != nil && len(s.engines) == 0:
		return nil
	case s.engines == nil:
		return s.d.Engine.Desired
	}
	return func(kind projection.Kind, namespace, name string) (map[string]any, bool) {
		if e := s.engineFor(namespace); e != nil {
			return e.Desired(kind, namespace, name)
		}
		return nil, false
	}
}

// diffItem compares one object's live state with its desired state, both
// normalized (without what the cluster manages); the live side is cut to
// what the desired side declares (what the server defaults, nobody declared), so the
// difference the UI draws between normalizedLiveState and
// predictedLiveState is the one that matters.
func (s *Server) diffItem(n *projection.NodeInfo, live map[string]any) (resourceDiffItem, error) {
	ki := n.Obj.Kind.Info()
	item := resourceDiffItem{Group: ki.Group, Kind: ki.Name, Namespace: n.Obj.Namespace, Name: n.Obj.Name, ResourceVersion: resourceVersionOf(live)}
	lm, err := json.Marshal(liveManifest(live))
	if err != nil {
		return item, err
	}
	item.LiveState = string(lm)
	desired, _ := drift.Desired(n.Obj.Kind, live, s.rendered())
	normLive := drift.Normalize(live)
	if desired == nil {
		b, err := json.Marshal(normLive)
		if err != nil {
			return item, err
		}
		item.TargetState, item.NormalizedLiveState, item.PredictedLiveState = "null", string(b), string(b)
		return item, nil
	}
	d, err := drift.Compare(live, desired)
	if err != nil {
		return item, err
	}
	cut, err := json.Marshal(drift.Declared(normLive, d.DesiredManifest))
	if err != nil {
		return item, err
	}
	want, err := json.Marshal(d.DesiredManifest)
	if err != nil {
		return item, err
	}
	item.TargetState, item.NormalizedLiveState, item.PredictedLiveState = string(want), string(cut), string(want)
	if d.Modified {
		p, err := json.Marshal(d.Patch)
		if err != nil {
			return item, err
		}
		item.Diff, item.Modified = string(p), true
	}
	return item, nil
}

// manifestResponse is Argo CD's ManifestResponse.
type manifestResponse struct {
	Manifests  []string `json:"manifests"`
	Namespace  string   `json:"namespace"`
	Server     string   `json:"server"`
	Revision   string   `json:"revision"`
	SourceType string   `json:"sourceType"`
}

// manifests answers the desired manifests deployd knows for the app's
// declared objects (the engine's rendering, else last-applied), for the
// revision it declares now; another revision is a 400.
func (s *Server) manifests(c echo.Context) error {
	a, err := s.appFromPath(c, s.d.Snapshots.Snapshot(), "revision", "sourcePositions", "revisions")
	if err != nil {
		return err
	}
	q := c.QueryParams()
	declared := a.Application().Status.Sync.Revision
	for _, k := range []string{"revision", "revisions"} {
		for _, v := range q[k] {
			if v != "" && v != "HEAD" && v != declared {
				return errorf(http.StatusBadRequest, k+" "+quoteShort(v)+": deployd knows the desired manifests of the declared revision "+quoteShort(declared)+" only")
			}
		}
	}
	for _, v := range q["sourcePositions"] {
		if v != "" && v != "1" {
			return errorf(http.StatusBadRequest, "sourcePositions "+quoteShort(v)+": the application has one source")
		}
	}
	out := manifestResponse{Manifests: []string{}, Namespace: a.Namespace, Server: s.d.Projection.ClusterServer, Revision: declared, SourceType: "Directory"}
	for _, n := range a.ManagedNodes() {
		live, err := s.liveOrGone(c, n)
		if err != nil {
			return err
		}
		if live == nil {
			continue
		}
		desired, _ := drift.Desired(n.Obj.Kind, live, s.rendered())
		if desired == nil {
			continue
		}
		b, err := json.Marshal(desired)
		if err != nil {
			return errorCause(http.StatusBadGateway, "a desired manifest could not be encoded", err)
		}
		out.Manifests = append(out.Manifests, string(b))
	}
	return c.JSON(http.StatusOK, out)
}
