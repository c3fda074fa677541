package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/hanzoai/deploy/metrics"
	"github.com/hanzoai/deploy/projection"
	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

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
