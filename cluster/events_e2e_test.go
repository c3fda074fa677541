package cluster_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/hanzoai/deploy/cluster"
	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/demo/demotest"
)

// TestEventsLive: against the real API server, as a user holding exactly
// deploy/rbac.yaml's ClusterRole, Events are listed per namespace and per
// involved object's uid.
func TestEventsLive(t *testing.T) {
	c := clustertest.Start(t)
	ctx := t.Context()
	cs := c.Clientset()
	bindDeploydRole(t, c)
	for _, ns := range []string{"hanzo", "tenant-acme"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	for _, e := range []struct{ ns, name, uid string }{
		{"hanzo", "a.1", "uid-a"}, {"hanzo", "a.2", "uid-a"}, {"hanzo", "b.1", "uid-b"}, {"tenant-acme", "c.1", "uid-c"},
	} {
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: e.name},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: e.ns, Name: e.uid, UID: types.UID(e.uid), APIVersion: "v1"},
			Reason:         "Tested", Message: "m", Type: corev1.EventTypeNormal, FirstTimestamp: now, LastTimestamp: now, Count: 1,
		}
		if _, err := cs.CoreV1().Events(e.ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := cluster.NewWatcher(c.UserConfig(clustertest.DeploydUser), "", cluster.NewFeed(), demotest.Options())
	if err != nil {
		t.Fatal(err)
	}
	names := func(ns, uid string) []string {
		t.Helper()
		var out []string
		c.WaitFor(t, 10*time.Second, func() (bool, error) {
			items, err := w.Events(ctx, ns, uid)
			if apierrors.IsForbidden(err) {
				return false, nil // the authorizer's cache catches up with the binding
			}
			out = nil
			for _, it := range items {
				out = append(out, it["metadata"].(map[string]any)["name"].(string))
			}
			slices.Sort(out)
			return err == nil, err
		})
		return out
	}
	for _, c := range []struct {
		ns, uid string
		want    []string
	}{
		{"hanzo", "", []string{"a.1", "a.2", "b.1"}},
		{"hanzo", "uid-a", []string{"a.1", "a.2"}},
		{"hanzo", "uid-c", nil},
		{"tenant-acme", "", []string{"c.1"}},
	} {
		if got := names(c.ns, c.uid); !slices.Equal(got, c.want) {
			t.Errorf("Events(%s, %q): got %v, want %v", c.ns, c.uid, got, c.want)
		}
	}
	// The role lists Events; it does not read one by name.
	_, err = kubernetes.NewForConfigOrDie(c.UserConfig(clustertest.DeploydUser)).CoreV1().Events("hanzo").Get(ctx, "a.1", metav1.GetOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("get an Event as deployd: got %v, want Forbidden", err)
	}
}

// bindDeploydRole installs deploy/rbac.yaml's ClusterRole and binds it to
// the deployd group.
func bindDeploydRole(t *testing.T, c *clustertest.Cluster) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "deploy", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var probe struct{ Kind string }
		if err := yaml.Unmarshal(doc, &probe); err != nil {
			t.Fatal(err)
		}
		if probe.Kind == "ClusterRole" {
			if err := yaml.Unmarshal(doc, &role); err != nil {
				t.Fatal(err)
			}
		}
	}
	cs := c.Clientset()
	if _, err := cs.RbacV1().ClusterRoles().Create(t.Context(), &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "deployd"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
