package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hanzoai/deploy/fleet"
	"github.com/hanzoai/deploy/projection"
)

// A tiny fleet: 20 Apps of 2 pods each.
const snapApps, snapReplicas = 20, 2

// TestSnapshot: the first start loads the fleet and caches it; the second
// starts from the cache without loading and serves the same objects; a
// change made in the second is not in the third, which starts from the
// cache again.
func TestSnapshot(t *testing.T) {
	t.Setenv(SnapshotsEnv, t.TempDir())
	key := FleetSnapshotKey(t, snapApps, snapReplicas)
	loads := 0
	opt := WithSnapshot(key, func(t testing.TB, c *Cluster) {
		loads++
		LoadFleet(t, c, snapApps, snapReplicas)
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "snapshotted", Namespace: "hanzo"}}
		if _, err := c.Clientset().CoreV1().ServiceAccounts(sa.Namespace).Create(t.Context(), sa, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create ServiceAccount: %v", err)
		}
	})
	rendered := fleet.RenderAll(FleetApps(snapApps, snapReplicas))
	want := countByResource(t, rendered)
	var app *unstructured.Unstructured
	for _, o := range rendered {
		if o.GetKind() == "App" {
			app = o
			break
		}
	}
	appRes := func(c *Cluster) interface {
		Get(context.Context, string, metav1.GetOptions, ...string) (*unstructured.Unstructured, error)
	} {
		gvr, ok := projection.GVROf(app.GetAPIVersion(), app.GetKind())
		if !ok {
			t.Fatalf("%s is not a registry kind", app.GetKind())
		}
		return c.Dynamic().Resource(gvr).Namespace(app.GetNamespace())
	}

	var loadedSpec any
	t.Run("first start loads and saves", func(t *testing.T) {
		c := Start(t, opt)
		if loads != 1 {
			t.Fatalf("load called %d times, want 1", loads)
		}
		meta := readMeta(t, key)
		if meta.Key != key || meta.Keys == 0 || meta.Bytes == 0 {
			t.Errorf("snapshot metadata %+v: want key %s and some keys and bytes", meta, key)
		}
		// etcd was stopped, copied and started again under the running
		// API server: reads and writes go through.
		if diff := cmp.Diff(want, countLive(t, c, want)); diff != "" {
			t.Errorf("objects after the snapshot (-want +got):\n%s", diff)
		}
		live, err := appRes(c).Get(t.Context(), app.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get App %s/%s: %v", app.GetNamespace(), app.GetName(), err)
		}
		loadedSpec = live.Object["spec"]
		if diff := cmp.Diff(app.Object["spec"], loadedSpec); diff != "" {
			t.Errorf("App spec as loaded (-rendered +live):\n%s", diff)
		}
		c.Apply(t, namespace("after-the-snapshot"))
	})

	var dirs []string
	run := func(t *testing.T) *Cluster {
		c := Start(t, opt)
		if loads != 1 {
			t.Fatalf("load called %d times, want 1 (the snapshot is cached)", loads)
		}
		if diff := cmp.Diff(want, countLive(t, c, want)); diff != "" {
			t.Errorf("objects from the snapshot (-want +got):\n%s", diff)
		}
		live, err := appRes(c).Get(t.Context(), app.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get App %s/%s: %v", app.GetNamespace(), app.GetName(), err)
		}
		if diff := cmp.Diff(loadedSpec, live.Object["spec"]); diff != "" {
			t.Errorf("App spec from the snapshot (-loaded +got):\n%s", diff)
		}
		_, err = c.Clientset().CoreV1().Namespaces().Get(t.Context(), "after-the-snapshot", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("namespace created after the snapshot was taken: get gave %v, want not found", err)
		}
		// The API server's keys are new in every run; a ServiceAccount
		// saved with the snapshot gets a token signed by them, which
		// authenticates.
		tr, err := c.Clientset().CoreV1().ServiceAccounts("hanzo").CreateToken(t.Context(), "snapshotted",
			&authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("token for the saved ServiceAccount: %v", err)
		}
		cfg := rest.CopyConfig(c.Config)
		cfg.BearerToken = tr.Status.Token
		as, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		review, err := as.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("authenticate with the ServiceAccount's token: %v", err)
		}
		if got, want := review.Status.UserInfo.Username, "system:serviceaccount:hanzo:snapshotted"; got != want {
			t.Errorf("the token authenticates as %q, want %q", got, want)
		}
		if c.EtcdURL() == readMeta(t, key).EtcdURL {
			t.Errorf("etcd serves at %s, the snapshot's own URL; want fresh ports", c.EtcdURL())
		}
		dirs = append(dirs, c.Dir)
		return c
	}
	t.Run("second start copies the snapshot", func(t *testing.T) {
		c := run(t)
		patch := []byte(`{"spec":{"image":{"tag":"changed-in-run-2"}}}`)
		gvr, _ := projection.GVROf(app.GetAPIVersion(), app.GetKind())
		if _, err := c.Dynamic().Resource(gvr).Namespace(app.GetNamespace()).Patch(t.Context(), app.GetName(),
			types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("patch App: %v", err)
		}
		c.CompactEtcd(t)
	})
	t.Run("third start does not see the second's change", func(t *testing.T) { run(t) })
	if len(dirs) == 2 && dirs[0] == dirs[1] {
		t.Errorf("two runs shared the folder %s", dirs[0])
	}
}

// countByResource counts objects by resource.
func countByResource(t *testing.T, objs []*unstructured.Unstructured) map[schema.GroupVersionResource]int {
	t.Helper()
	n := map[schema.GroupVersionResource]int{}
	for _, o := range objs {
		gvr, ok := projection.GVROf(o.GetAPIVersion(), o.GetKind())
		if !ok {
			t.Fatalf("%s is not a registry kind", o.GetKind())
		}
		n[gvr]++
	}
	return n
}

// countLive counts the cluster's objects of the resources of want, but
// those in namespaces of the cluster's own (default, kube-system…).
func countLive(t *testing.T, c *Cluster, want map[schema.GroupVersionResource]int) map[schema.GroupVersionResource]int {
	t.Helper()
	got := map[schema.GroupVersionResource]int{}
	for gvr := range want {
		list, err := c.Dynamic().Resource(gvr).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list %s: %v", gvr.Resource, err)
		}
		for _, o := range list.Items {
			if ns := o.GetNamespace(); ns != "default" && !strings.HasPrefix(ns, "kube-") {
				got[gvr]++
			}
		}
	}
	return got
}

func readMeta(t *testing.T, key string) snapshotMetadata {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(SnapshotDir(), key, snapshotMeta))
	if err != nil {
		t.Fatalf("snapshot metadata: %v", err)
	}
	var m snapshotMetadata
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("snapshot metadata: %v", err)
	}
	return m
}

// childEnv selects what TestSnapshotChild does in a child test process.
const childEnv = "DEPLOYD_SNAPSHOT_CHILD"

const childKey = "child-test"

// TestSnapshotChild runs in a child process of the tests below: it starts
// a cluster with a snapshot whose load creates a namespace and then, by
// $DEPLOYD_SNAPSHOT_CHILD, fails the test and returns ("error"), fails it
// and stops ("failnow"), panics ("panic"), or returns ("load").
func TestSnapshotChild(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		t.Skip("runs as a child process of TestSnapshotInterruptedLoad and TestSnapshotConcurrentFirstRuns")
	}
	c := Start(t, WithSnapshot(childKey, func(t testing.TB, c *Cluster) {
		fmt.Println("LOAD CALLED")
		c.Apply(t, namespace("loaded"))
		switch mode {
		case "error":
			t.Error("load fails and returns")
		case "failnow":
			t.FailNow()
		case "panic":
			panic("load panics")
		}
	}))
	if _, err := c.Clientset().CoreV1().Namespaces().Get(t.Context(), "loaded", metav1.GetOptions{}); err != nil {
		t.Fatalf("get the loaded namespace: %v", err)
	}
}

// runChild runs TestSnapshotChild in a new process with the snapshots in
// dir and returns its output and whether it passed.
func runChild(t *testing.T, dir, mode string) (string, bool) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestSnapshotChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, SnapshotsEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("run child test: %v", err)
		}
	}
	if strings.Contains(string(out), "SKIP") && strings.Contains(string(out), "not found") {
		t.Fatalf("child test skipped:\n%s", out)
	}
	return string(out), err == nil
}

// TestSnapshotInterruptedLoad: a load that fails the test (and returns or
// not) or panics leaves no snapshot, and an unfinished one (a run killed
// while writing it) is never trusted; the next start loads again.
func TestSnapshotInterruptedLoad(t *testing.T) {
	binary(t, "etcd")
	dir := t.TempDir()
	t.Setenv(SnapshotsEnv, dir)
	for _, mode := range []string{"error", "failnow", "panic"} {
		out, passed := runChild(t, dir, mode)
		if passed || !strings.Contains(out, "LOAD CALLED") {
			t.Fatalf("%s: the child test passed or never loaded; want a failure inside load:\n%s", mode, out)
		}
		if _, err := os.Stat(filepath.Join(dir, childKey)); !os.IsNotExist(err) {
			t.Fatalf("%s: a snapshot is there after an interrupted load (stat: %v)", mode, err)
		}
	}
	// What a run killed while copying leaves behind.
	stale := filepath.Join(dir, tmpFolder, childKey+".0123456789ab")
	if err := os.MkdirAll(filepath.Join(stale, "etcd"), 0o700); err != nil {
		t.Fatal(err)
	}
	loads := 0
	Start(t, WithSnapshot(childKey, func(t testing.TB, c *Cluster) { loads++ }))
	if loads != 1 {
		t.Errorf("load called %d times after interrupted loads, want 1", loads)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("an unfinished snapshot is still there (stat: %v)", err)
	}
	readMeta(t, childKey)
}

// TestSnapshotConcurrentFirstRuns: two processes starting the same key
// at once load it once; the other waits and starts from the snapshot.
func TestSnapshotConcurrentFirstRuns(t *testing.T) {
	binary(t, "etcd")
	dir := t.TempDir()
	outs := make([]string, 2)
	passed := make([]bool, 2)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Go(func() {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestSnapshotChild$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), childEnv+"=load", SnapshotsEnv+"="+dir)
			out, err := cmd.CombinedOutput()
			outs[i], passed[i] = string(out), err == nil
		})
	}
	wg.Wait()
	loaded := 0
	for i, out := range outs {
		if !passed[i] {
			t.Errorf("child %d failed:\n%s", i, out)
		}
		loaded += strings.Count(out, "LOAD CALLED")
	}
	if loaded != 1 {
		t.Errorf("load ran %d times in two concurrent first runs, want 1:\n%s", loaded, strings.Join(outs, "\n----\n"))
	}
	if i := slices.IndexFunc(outs, func(s string) bool { return strings.Contains(s, "waiting for it") }); i < 0 {
		t.Logf("neither run waited for the other (the first finished before the second looked)")
	}
}

func TestCheckKey(t *testing.T) {
	for _, key := range []string{"fleet-10000x10-0123abcd", "a", "A_b.c-9", strings.Repeat("k", 128)} {
		if err := checkKey(key); err != nil {
			t.Errorf("checkKey(%q) = %v, want nil", key, err)
		}
	}
	for _, key := range []string{"", ".hidden", "-flag", "a/b", "..", "a b", "ü", strings.Repeat("k", 129), "../x"} {
		if err := checkKey(key); err == nil {
			t.Errorf("checkKey(%q) = nil, want an error", key)
		}
	}
}

func TestSnapshotDir(t *testing.T) {
	t.Setenv(SnapshotsEnv, "")
	t.Setenv(ToolsEnv, "/opt/deployd/tools")
	if got, want := SnapshotDir(), "/opt/deployd/snapshots"; got != want {
		t.Errorf("SnapshotDir() = %q, want %q", got, want)
	}
	t.Setenv(SnapshotsEnv, "/var/snap")
	if got, want := SnapshotDir(), "/var/snap"; got != want {
		t.Errorf("SnapshotDir() = %q with %s set, want %q", got, SnapshotsEnv, want)
	}
}

func TestFleetSnapshotKey(t *testing.T) {
	a := FleetSnapshotKey(t, 10000, 10)
	if a != FleetSnapshotKey(t, 10000, 10) {
		t.Errorf("FleetSnapshotKey differs between two calls")
	}
	if err := checkKey(a); err != nil {
		t.Error(err)
	}
	if !strings.HasPrefix(a, "fleet-10000x10-") {
		t.Errorf("FleetSnapshotKey(10000, 10) = %q, want fleet-10000x10-<version>", a)
	}
	if b := FleetSnapshotKey(t, 10000, 3); strings.TrimPrefix(b, "fleet-10000x3-") == strings.TrimPrefix(a, "fleet-10000x10-") {
		t.Errorf("the version of %s and %s is the same; the replicas change what is rendered", a, b)
	}
}
