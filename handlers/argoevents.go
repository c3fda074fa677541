package handlers

import (
	"context"
	"net/http"
	"sort"

	"github.com/labstack/echo/v4"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hanzoai/deploy/projection"
)

// EventReader lists the v1 Events of a namespace from the API server, live
// (Events are never watched or folded); with a uid, only those of that
// object.
type EventReader interface {
	Events(ctx context.Context, namespace, uid string) ([]map[string]any, error)
}

// events answers Argo CD's events route: the Kubernetes Events of the app's
// objects (every object of its tree), or of one of them named by
// resourceUID, or resourceNamespace and resourceName. Events of any other
// object never appear, whoever else shares the namespace.
func (s *Server) events(c echo.Context) error {
	a, err := s.appFromPath(c, s.d.Snapshots.Snapshot(), "resourceNamespace", "resourceName", "resourceUID", "fields")
	if err != nil {
		return err
	}
	q := c.QueryParams()
	fields, err := listFields(q)
	if err != nil {
		return err
	}
	var ns, name, uid string
	for k, dst := range map[string]*string{"resourceNamespace": &ns, "resourceName": &name, "resourceUID": &uid} {
		if *dst, err = single(q, k); err != nil {
			return err
		}
	}
	uids := map[string]bool{}
	one := ""
	if ns != "" || name != "" || uid != "" {
		for _, n := range eventTargets(a, ns, name, uid) {
			uids[n.Obj.UID], one = true, n.Obj.UID
		}
		switch len(uids) {
		case 0:
			return errorf(http.StatusNotFound, "the resource named by resourceUID, resourceNamespace and resourceName is not part of application "+quoteShort(a.Name))
		case 1:
		default:
			one = ""
		}
	} else {
		for _, n := range a.Tree {
			if n.Obj.UID != "" {
				uids[n.Obj.UID] = true
			}
		}
	}
	if s.d.Events == nil {
		return errorf(http.StatusServiceUnavailable, "events are not available: no Kubernetes configuration")
	}
	raw, err := s.d.Events.Events(c.Request().Context(), a.Namespace, one)
	if err != nil {
		return clusterError(err, "list Events", "list")
	}
	out := corev1.EventList{Items: []corev1.Event{}}
	for _, m := range raw {
		var ev corev1.Event
		if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &ev) != nil {
			continue
		}
		if !uids[string(ev.InvolvedObject.UID)] || ev.InvolvedObject.Namespace != a.Namespace {
			continue
		}
		ev.ManagedFields = nil
		out.Items = append(out.Items, ev)
	}
	sort.SliceStable(out.Items, func(i, j int) bool {
		ti, tj := lastSeen(&out.Items[i]), lastSeen(&out.Items[j])
		if ti != tj {
			return ti < tj
		}
		return out.Items[i].Name < out.Items[j].Name
	})
	return jsonFields(c, out, fields)
}

// eventTargets are the tree nodes the resource parameters name (a name
// alone may name several kinds: the App, its Deployment and its Service).
func eventTargets(a *projection.App, ns, name, uid string) []*projection.NodeInfo {
	var out []*projection.NodeInfo
	for _, n := range a.Tree {
		o := n.Obj
		if o.UID != "" && (uid == "" || o.UID == uid) && (ns == "" || o.Namespace == ns) && (name == "" || o.Name == name) {
			out = append(out, n)
		}
	}
	return out
}

// lastSeen is when an Event last happened, in Unix nanoseconds.
func lastSeen(e *corev1.Event) int64 {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.UnixNano()
	case !e.EventTime.IsZero():
		return e.EventTime.UnixNano()
	}
	return e.CreationTimestamp.UnixNano()
}
