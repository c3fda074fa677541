package clustertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hanzoai/deploy/fleet"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"
)

// Object parses one manifest (YAML or JSON) for Apply.
func Object(t testing.TB, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatalf("parse manifest: %v", err)
	}
	if u.GetKind() == "" || u.GetAPIVersion() == "" {
		t.Fatalf("manifest without apiVersion or kind:\n%s", manifest)
	}
	return u
}

// Apply creates each object, or updates it when it exists (the given
// metadata and spec replace the live ones; resourceVersion comes from the
// live object). When an object carries a status, that status is then
// written through the status subresource where the kind has one (a create
// or update ignores it there), so a test can set what a controller or the
// operator would have reported. It returns the objects as stored, in order.
// A namespaced object without a namespace goes to "default".
func (c *Cluster) Apply(t testing.TB, objs ...*unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	ctx := t.Context()
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, obj := range objs {
		ri, err := c.resourceFor(obj.GroupVersionKind(), obj.GetNamespace())
		if err != nil {
			t.Fatalf("apply %s: %v", describe(obj), err)
		}
		fresh := obj.DeepCopy()
		fresh.SetResourceVersion("")
		stored, err := ri.Create(ctx, fresh, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			stored, err = fleet.Replace(ctx, ri, obj)
		}
		if err != nil {
			t.Fatalf("apply %s: %v", describe(obj), err)
		}
		if status, ok := obj.Object["status"].(map[string]any); ok && len(status) > 0 {
			withStatus, err := writeStatus(ctx, ri, stored, status)
			if err != nil {
				t.Fatalf("apply status of %s: %v", describe(obj), err)
			}
			stored = withStatus
		}
		out = append(out, stored)
	}
	return out
}

// writeStatus puts status on the live object through the status
// subresource; a kind without one (404) keeps what the create stored.
func writeStatus(ctx context.Context, ri dynamic.ResourceInterface, stored *unstructured.Unstructured, status map[string]any) (*unstructured.Unstructured, error) {
	cur := stored.DeepCopy()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur.Object["status"] = runtime.DeepCopyJSONValue(status)
		next, err := ri.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if err == nil {
			cur = next
			return nil
		}
		if apierrors.IsConflict(err) {
			if live, gerr := ri.Get(ctx, cur.GetName(), metav1.GetOptions{}); gerr == nil {
				cur = live
			}
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return stored, nil
	}
	return cur, err
}

// Delete deletes each object (missing ones are fine) without waiting for
// it to be gone; objects with finalizers or owners linger until those are
// done, as they would anywhere.
func (c *Cluster) Delete(t testing.TB, objs ...*unstructured.Unstructured) {
	t.Helper()
	for _, obj := range objs {
		ri, err := c.resourceFor(obj.GroupVersionKind(), obj.GetNamespace())
		if err != nil {
			t.Fatalf("delete %s: %v", describe(obj), err)
		}
		if err := ri.Delete(t.Context(), obj.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("delete %s: %v", describe(obj), err)
		}
	}
}

// Resource is the dynamic client for a kind, in namespace for a namespaced
// kind ("" means "default"; ignored for cluster-scoped kinds).
func (c *Cluster) Resource(t testing.TB, gvk schema.GroupVersionKind, namespace string) dynamic.ResourceInterface {
	t.Helper()
	ri, err := c.resourceFor(gvk, namespace)
	if err != nil {
		t.Fatalf("resource for %s: %v", gvk, err)
	}
	return ri
}

// resourceFor maps a kind to its resource through discovery, refreshing the
// cached discovery once when the kind is unknown (a CRD installed since).
func (c *Cluster) resourceFor(gvk schema.GroupVersionKind, namespace string) (dynamic.ResourceInterface, error) {
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		c.mapper.Reset()
		m, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return c.dynamic.Resource(m.Resource), nil
	}
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	return c.dynamic.Resource(m.Resource).Namespace(namespace), nil
}

// WaitFor calls cond until it returns true, failing the test when timeout
// passes first or when cond returns an error (return false, nil to keep
// waiting through an expected error such as NotFound). It polls, starting
// at a few milliseconds and backing off to 200 ms.
func (c *Cluster) WaitFor(t testing.TB, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	interval := 5 * time.Millisecond
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-t.Context().Done():
			t.Fatalf("wait: test ended: %v", t.Context().Err())
		case <-timer.C:
		}
		ok, err := cond()
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", timeout)
		}
		if interval < 200*time.Millisecond {
			interval = min(interval*2, 200*time.Millisecond)
		}
		timer.Reset(interval)
	}
}

// describe names an object in messages: "Kind namespace/name".
func describe(u *unstructured.Unstructured) string {
	name := u.GetName()
	if ns := u.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return strings.TrimSpace(fmt.Sprintf("%s %s", u.GetKind(), name))
}
