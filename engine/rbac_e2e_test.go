package engine

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/engine/enginetest"
	"github.com/hanzoai/deploy/gitops"
)

// testLeastPrivilege: as deployd's identity bound to deploy/rbac.yaml's
// ClusterRole (and nothing else), the engine lists, applies and prunes its
// allow-listed kinds, and that identity may not create what policy
// refuses.
func testLeastPrivilege(t *testing.T, c *clustertest.Cluster, srv *enginetest.Server) {
	raw, err := os.ReadFile(filepath.Join("..", "deploy", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var probe struct{ Kind string }
		if err := yaml.Unmarshal(doc, &probe); err == nil && probe.Kind == "ClusterRole" {
			if err := yaml.Unmarshal(doc, &role); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(role.Rules) == 0 {
		t.Fatal("deploy/rbac.yaml has no ClusterRole rules")
	}
	role.ObjectMeta = metav1.ObjectMeta{Name: "deployd-engine-e2e"}
	cs := c.Clientset()
	if _, err := cs.RbacV1().ClusterRoles().Create(t.Context(), &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = cs.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "deployd-engine-e2e"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "deployd"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	repo := srv.NewRepo(t, "fleet-rbac")
	repo.Commit(t, "an app and a middleware", map[string]string{
		"crs/a.yaml": appYAML("r-app1", "hanzo", "v1"),
		"crs/b.yaml": appYAML("r-app2", "hanzo", "v1"),
		"crs/m.yaml": "apiVersion: hanzo.ai/v1alpha1\nkind: Middleware\nmetadata: {name: r-mw, namespace: hanzo}\nspec: {headers: {x: y}}\n",
	})
	user := rest.CopyConfig(c.UserConfig(clustertest.DeploydUser))
	e, err := New(func() Config {
		cfg := Defaults()
		cfg.Repo, cfg.Path, cfg.Instance, cfg.Interval, cfg.Prune, cfg.PruneMaxRatio = repo.URL, "crs", "rbac", 0, true, 0.5
		cfg.CacheDir = filepath.Join(t.TempDir(), "cache")
		return cfg
	}(), user, nil)
	if err != nil {
		t.Fatal(err)
	}
	var rep *gitops.ReconcileReport
	c.WaitFor(t, 10*time.Second, func() (bool, error) { // the authorizer's cache catches up
		rep, err = e.Reconcile(t.Context(), gitops.TriggerRequest, false)
		return err == nil && rep.Synced == 3, nil
	})
	repo.Commit(t, "remove one", map[string]string{"crs/b.yaml": ""})
	rep, err = e.Reconcile(t.Context(), gitops.TriggerRequest, false)
	if err != nil || rep.Pruned != 1 || appExists(t, c, "hanzo", "r-app2") {
		t.Fatalf("prune as deployd: %v, %+v", err, rep)
	}
	cs, err = kubernetes.NewForConfig(user)
	if err != nil {
		t.Fatal(err)
	}
	for _, try := range []func() error{
		func() error {
			_, err := cs.CoreV1().Secrets("hanzo").List(t.Context(), metav1.ListOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoles().Create(t.Context(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.AppsV1().Deployments("hanzo").Create(t.Context(), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
			return err
		},
	} {
		if err := try(); !apierrors.IsForbidden(err) {
			t.Errorf("as deployd: got %v, want Forbidden", err)
		}
	}
}

// testLeaseLeastPrivilege: as deployd's identity bound to deploy/rbac.yaml's
// Role in its namespace (and the ClusterRole testLeastPrivilege bound), an
// engine with a Lease takes it, keeps its state in the ConfigMap, and runs.
func testLeaseLeastPrivilege(t *testing.T, c *clustertest.Cluster, srv *enginetest.Server) {
	raw, err := os.ReadFile(filepath.Join("..", "deploy", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.Role
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var probe struct{ Kind string }
		if err := yaml.Unmarshal(doc, &probe); err == nil && probe.Kind == "Role" {
			if err := yaml.Unmarshal(doc, &role); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(role.Rules) == 0 || role.Namespace == "" {
		t.Fatal("deploy/rbac.yaml has no Role for the engine's Lease")
	}
	createNamespaces(t, c, role.Namespace)
	cs := c.Clientset()
	role.ObjectMeta = metav1.ObjectMeta{Name: role.Name, Namespace: role.Namespace}
	if _, err := cs.RbacV1().Roles(role.Namespace).Create(t.Context(), &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = cs.RbacV1().RoleBindings(role.Namespace).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: role.Namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "deployd"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	repo := srv.NewRepo(t, "fleet-lease-rbac")
	repo.Commit(t, "an app", map[string]string{"crs/a.yaml": appYAML("lr-app", "hanzo", "v1")})
	cfg := Defaults() // instance "universe": the Role names its Lease
	cfg.Repo, cfg.Path, cfg.Interval = repo.URL, "crs", time.Second
	cfg.CacheDir = filepath.Join(t.TempDir(), "cache")
	lease := DefaultLease()
	lease.Namespace, lease.Identity, lease.URL = role.Namespace, NewIdentity(), "http://127.0.0.1:1"
	lease.Duration, lease.RenewDeadline, lease.RetryPeriod = 3*time.Second, 2*time.Second, 200*time.Millisecond
	cfg.Lease = &lease
	e, err := New(cfg, rest.CopyConfig(c.UserConfig(clustertest.DeploydUser)), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	c.WaitFor(t, 20*time.Second, func() (bool, error) {
		st := e.Status()
		return st.Leader != nil && st.Leader.Identity == lease.Identity && st.LastRun != nil && st.LastRun.Error == "" && st.LastRun.Synced == 1, nil
	})
	l, err := cs.CoordinationV1().Leases(role.Namespace).Get(t.Context(), LeaseName("universe"), metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != lease.Identity {
		t.Fatalf("the Lease: %v %+v", err, l)
	}
	if l, self, err := e.Leader(); !self || err != nil || l.URL != "" {
		t.Errorf("Leader() on the leader: %+v %v %v", l, self, err)
	}
}
