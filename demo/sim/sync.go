package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/hanzoai/deploy/fleet"
	"github.com/hanzoai/deploy/projection"
)

// sync writes every App's objects as its state renders them: creates what
// is new, patches what changed since the simulator last wrote it, deletes
// what is gone (pods first).
func (s *Simulator) sync(ctx context.Context) error {
	var errs []error
	for _, k := range s.sortedKeys() {
		a := s.apps[k]
		want := map[string]bool{}
		for _, u := range fleet.Render(a.app, a.st) {
			key := objKey(u)
			want[key] = true
			if err := s.write(ctx, a, key, u); err != nil {
				errs = append(errs, err)
			}
		}
		var gone []string
		for key := range a.keys {
			if !want[key] {
				gone = append(gone, key)
			}
		}
		sort.Slice(gone, func(i, j int) bool {
			if oi, oj := deleteOrder(gone[i]), deleteOrder(gone[j]); oi != oj {
				return oi < oj
			}
			return gone[i] < gone[j]
		})
		for _, key := range gone {
			if w := s.written[key]; w != nil {
				if err := s.delete(ctx, &unstructured.Unstructured{Object: w.obj}); err != nil {
					errs = append(errs, err)
					continue
				}
			}
			delete(s.written, key)
			delete(a.keys, key)
		}
	}
	return errors.Join(errs...)
}

// write brings one object to its rendered form. An App's metadata and spec
// are never written (they belong to whoever declared the App), only its
// status.
func (s *Simulator) write(ctx context.Context, a *appSim, key string, u *unstructured.Unstructured) error {
	w := s.written[key]
	if w == nil {
		created, err := s.loader.Create(ctx, u)
		if err != nil {
			return err
		}
		s.written[key] = &writtenObj{obj: u.Object, generation: created.GetGeneration()}
		a.keys[key] = true
		return nil
	}
	ri, err := s.resource(u)
	if err != nil {
		return err
	}
	if u.GetKind() != "App" {
		if patch := mainPatch(w.obj, u.Object); patch != nil {
			out, err := ri.Patch(ctx, u.GetName(), types.MergePatchType, mustJSON(patch), metav1.PatchOptions{})
			if apierrors.IsNotFound(err) {
				return s.recreate(ctx, a, key, u)
			}
			if err != nil {
				return fmt.Errorf("patch %s: %w", key, err)
			}
			if !restartedSince(out, a) {
				w.generation = out.GetGeneration()
			}
		}
	}
	status, _ := u.Object["status"].(map[string]any)
	if status != nil && w.generation > 0 && (u.GetKind() == "Deployment" || u.GetKind() == "ReplicaSet") {
		status["observedGeneration"] = w.generation // the controller has seen its latest spec
	}
	prev, _ := w.obj["status"].(map[string]any)
	if d := mergeDiff(prev, status); len(d) > 0 {
		_, err := ri.Patch(ctx, u.GetName(), types.MergePatchType, mustJSON(map[string]any{"status": d}), metav1.PatchOptions{}, "status")
		if apierrors.IsNotFound(err) {
			return s.recreate(ctx, a, key, u)
		}
		if err != nil {
			return fmt.Errorf("patch status of %s: %w", key, err)
		}
	}
	w.obj = u.Object
	return nil
}

// restartedSince reports whether a Deployment's pod template was restarted
// (by someone else) after the simulator last read it: then its generation
// is one the controller has not seen yet, and must not be reported as
// observed.
func restartedSince(u *unstructured.Unstructured, a *appSim) bool {
	if u.GetKind() != "Deployment" {
		return false
	}
	at, _, _ := unstructured.NestedString(u.Object, "spec", "template", "metadata", "annotations", fleet.AnnotationRestartedAt)
	return at != a.st.Template.RestartedAt
}

// recreate creates again an object someone deleted.
func (s *Simulator) recreate(ctx context.Context, a *appSim, key string, u *unstructured.Unstructured) error {
	delete(s.written, key)
	if u.GetKind() == "App" {
		return nil // the App is gone; the next observe forgets it
	}
	return s.write(ctx, a, key, u)
}

func (s *Simulator) delete(ctx context.Context, u *unstructured.Unstructured) error {
	ri, err := s.resource(u)
	if err != nil {
		return err
	}
	zero := int64(0)
	err = ri.Delete(ctx, u.GetName(), metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s: %w", objKey(u), err)
	}
	return nil
}

func (s *Simulator) resource(u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvr, ok := projection.GVROf(u.GetAPIVersion(), u.GetKind())
	if !ok {
		return nil, fmt.Errorf("%s %s is not a registry kind", u.GetAPIVersion(), u.GetKind())
	}
	return s.dyn.Resource(gvr).Namespace(u.GetNamespace()), nil
}

// objKey names an object: Kind/namespace/name.
func objKey(u *unstructured.Unstructured) string {
	return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

// deleteOrder deletes what is owned before its owners.
func deleteOrder(key string) int {
	switch {
	case len(key) > 4 && key[:4] == "Pod/":
		return 0
	case len(key) > 11 && key[:11] == "ReplicaSet/":
		return 1
	case len(key) > 4 && key[:4] == "App/":
		return 3
	}
	return 2
}

// serverFields are metadata the API server manages or that never change
// after a create; patches leave them out.
var serverFields = []string{"uid", "resourceVersion", "generation", "creationTimestamp", "ownerReferences", "name", "namespace", "managedFields"}

// mainPatch is the merge patch of everything but status that turns prev
// into next, nil when nothing changed.
func mainPatch(prev, next map[string]any) map[string]any {
	out := map[string]any{}
	for k, nv := range next {
		switch k {
		case "apiVersion", "kind", "status":
			continue
		case "metadata":
			pm, _ := prev[k].(map[string]any)
			nm, _ := nv.(map[string]any)
			if d := mergeDiff(withoutKeys(pm, serverFields), withoutKeys(nm, serverFields)); len(d) > 0 {
				out[k] = d
			}
			continue
		}
		pv, _ := prev[k].(map[string]any)
		if nvm, ok := nv.(map[string]any); ok {
			if d := mergeDiff(pv, nvm); len(d) > 0 {
				out[k] = d
			}
		} else if !jsonEqual(prev[k], nv) {
			out[k] = runtime.DeepCopyJSONValue(nv)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func withoutKeys(m map[string]any, keys []string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

// mergeDiff is the JSON merge patch (RFC 7386) that turns a into b: keys
// of b that differ, recursively for maps; null for keys only in a.
func mergeDiff(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, bv := range b {
		av, ok := a[k]
		am, aMap := av.(map[string]any)
		bm, bMap := bv.(map[string]any)
		switch {
		case ok && aMap && bMap:
			if d := mergeDiff(am, bm); len(d) > 0 {
				out[k] = d
			}
		case !ok || !jsonEqual(av, bv):
			out[k] = bv
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			out[k] = nil
		}
	}
	return out
}

// jsonEqual compares two values of decoded JSON (unstructured content).
func jsonEqual(a, b any) bool {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for k, x := range av {
			y, ok := bv[k]
			if !ok || !jsonEqual(x, y) {
				return false
			}
		}
		return true
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for i := range av {
			if !jsonEqual(av[i], bv[i]) {
				return false
			}
		}
		return true
	case string, int64, float64, bool, nil:
		return a == b
	}
	return reflect.DeepEqual(a, b)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("sim: encode patch: " + err.Error()) // maps of JSON values always encode
	}
	return b
}
