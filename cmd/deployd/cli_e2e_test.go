package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hanzoai/deploy/projection"
)

// TestCLIAgainstCluster: deployd app and deployd engine against a plane on
// a real API server with controllers: the tables and the JSON and YAML
// outputs, sync, rollback by tag and by history id, a restart; a member's
// write exits 1 with the server's message, bad usage exits 2.
func TestCLIAgainstCluster(t *testing.T) {
	f, env, root, _ := startShop(t)
	c := f.c
	member := env.token(t, acmeMember, time.Hour)

	cli := func(token string, args ...string) (string, string, int) {
		t.Helper()
		var out, errb bytes.Buffer
		args = append(args, "--server", env.URL, "--token", token)
		err := run(t.Context(), args, &out, &errb)
		code := 0
		if err != nil {
			code = exitCode(err)
			errb.WriteString(err.Error())
		}
		return out.String(), errb.String(), code
	}
	ok := func(token string, args ...string) string {
		t.Helper()
		out, errs, code := cli(token, args...)
		if code != 0 {
			t.Fatalf("deployd %s: exit %d: %s", strings.Join(args, " "), code, errs)
		}
		return out
	}

	// Tables, JSON and YAML.
	list := ok(root, "app", "list")
	if !strings.HasPrefix(list, "NAME") || !strings.Contains(list, "shop") || !strings.Contains(list, "Synced") || !strings.Contains(list, "v1.1.0") {
		t.Fatalf("app list:\n%s", list)
	}
	if wide := ok(root, "app", "list", "-o", "wide"); !strings.Contains(wide, "ghcr.io/hanzoai/shop:v1.1.0") {
		t.Fatalf("app list -o wide:\n%s", wide)
	}
	var items struct{ Items []json.RawMessage }
	if err := json.Unmarshal([]byte(ok(root, "app", "list", "-o", "json")), &items); err != nil || len(items.Items) != 1 {
		t.Fatalf("app list -o json: %v (%d items)", err, len(items.Items))
	}
	if y := ok(root, "app", "get", "shop", "-o", "yaml"); !strings.Contains(y, "name: shop") || !strings.Contains(y, "status:") {
		t.Fatalf("app get -o yaml:\n%s", y)
	}
	if none := ok(member, "app", "list", "-l", "hanzo.ai/env=main"); strings.Contains(none, "shop") {
		t.Fatalf("a member of acme lists platform's app:\n%s", none)
	}
	hist := ok(root, "app", "history", "shop")
	if lines := strings.Split(strings.TrimSpace(hist), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[1], "2 ") || !strings.Contains(lines[1], "v1.1.0") {
		t.Fatalf("app history (newest first):\n%s", hist)
	}

	// Refusals: exit 1 with the server's message, and nothing written (the
	// controllers keep writing the Deployment's status: its generation
	// says whether its spec changed).
	written := func() string {
		t.Helper()
		d, err := c.Clientset().AppsV1().Deployments("hanzo").Get(t.Context(), "shop", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		app, err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace("hanzo").Get(t.Context(), "shop", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("App %s %v, Deployment generation %d", app.GetResourceVersion(), app.Object["spec"], d.Generation)
	}
	before := written()
	if _, errs, code := cli(member, "app", "sync", "shop"); code != 1 || !strings.Contains(errs, "platform administrators") {
		t.Fatalf("a member's sync: exit %d: %s", code, errs)
	}
	if _, errs, code := cli(root, "app", "rollback", "shop", "--revision", "v0.0.1"); code != 1 || !strings.Contains(errs, "never released") {
		t.Fatalf("rollback to a tag never released: exit %d: %s", code, errs)
	}
	if after := written(); after != before {
		t.Fatalf("refused writes changed the cluster: %s -> %s", before, after)
	}
	// Usage: exit 2.
	for _, args := range [][]string{{"app", "get"}, {"app", "rollback", "shop"}, {"app", "list", "-o", "xml"}, {"app", "frobnicate"}, {"engine"}} {
		if _, errs, code := cli(root, args...); code != 2 {
			t.Errorf("deployd %s: exit %d (%s), want 2", strings.Join(args, " "), code, errs)
		}
	}
	if _, errs, code := cli(root, "app", "list", "-h"); code != 0 || !strings.Contains(errs, "example:") {
		t.Errorf("app list -h: exit %d, usage %q", code, errs)
	}

	// The newest pod's log (the fake kubelet's lines, through the API
	// server), once the rollout has replaced the old pods.
	c.WaitFor(t, 60*time.Second, func() (bool, error) {
		pods, err := c.Clientset().CoreV1().Pods("hanzo").List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=shop"})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Spec.Containers[0].Image != "ghcr.io/hanzoai/shop:v1.1.0" {
				return false, nil
			}
		}
		return len(pods.Items) == 2, nil
	})
	if logs := ok(root, "app", "logs", "shop", "--tail", "2"); logs != "fake kubelet: image ghcr.io/hanzoai/shop:v1.1.0\nfake kubelet: nothing runs here; this log is all there is\n" {
		t.Fatalf("app logs --tail 2:\n%s", logs)
	}
	// Followed, the log goes on until the caller stops (the fake kubelet
	// adds a line a second).
	fctx, cancel := context.WithTimeout(t.Context(), 4*time.Second)
	var followed bytes.Buffer
	if err := run(fctx, []string{"app", "logs", "shop", "-f", "--tail", "1", "--server", env.URL, "--token", root}, &followed, io.Discard); err != nil {
		t.Fatalf("app logs -f: %v", err)
	}
	cancel()
	if lines := strings.Split(strings.TrimSpace(followed.String()), "\n"); len(lines) < 2 || lines[0] != "fake kubelet: nothing runs here; this log is all there is" || !strings.HasPrefix(lines[1], "fake kubelet: still here (1)") {
		t.Fatalf("app logs -f --tail 1 for 4s:\n%s", followed.String())
	}

	// wait: reached at once when it is; else the last state at the timeout.
	if out := ok(root, "app", "wait", "shop", "--timeout", "30s"); !strings.Contains(out, "hanzo/shop: Healthy, Synced at v1.1.0") {
		t.Fatalf("app wait: %s", out)
	}

	// Writes.
	if out := ok(root, "app", "sync", "shop"); !strings.Contains(out, "sync of hanzo/shop requested") {
		t.Fatalf("app sync: %s", out)
	}
	if out := ok(root, "app", "rollback", "shop", "--revision", "1"); !strings.Contains(out, "rolls back to v1.0.0") {
		t.Fatalf("app rollback --revision 1: %s", out)
	}
	// Declared, not rolled out: the diff shows the image, and wait gives up with the last state; once
	// the operator rolls it out, wait returns.
	if d := ok(root, "app", "diff", "shop"); !strings.HasPrefix(d, "no differences: ") {
		t.Fatalf("app diff with nothing declared beside the live objects:\n%s", d)
	}
	// What kubectl apply declared (its last-applied annotation) asks for
	// three replicas; two run.
	lastApplied := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"shop","namespace":"hanzo"},"spec":{"replicas":3}}`
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{projection.AnnotationLastApplied: lastApplied}}})
	if _, err := c.Clientset().AppsV1().Deployments("hanzo").Patch(t.Context(), "shop", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	var d string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		d = ok(root, "app", "diff", "shop")
		if strings.Contains(d, "===== Deployment hanzo/shop (- live, + declared) =====\n") && strings.Contains(d, "\n-   replicas: 2\n+   replicas: 3\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("app diff of a Deployment with 2 replicas that declares 3:\n%s", d)
		}
	}
	if _, errs, code := cli(root, "app", "wait", "shop", "--sync", "--timeout", "2s"); code != 1 || !strings.Contains(errs, "not reached in 2s; the last state: ") || !strings.Contains(errs, "OutOfSync at v1.0.0") {
		t.Fatalf("app wait on an out-of-sync app: exit %d: %s", code, errs)
	}
	waited := make(chan string, 1)
	go func() {
		var out, errb bytes.Buffer
		err := run(t.Context(), []string{"app", "wait", "shop", "--timeout", "60s", "--server", env.URL, "--token", root}, &out, &errb)
		waited <- fmt.Sprint(out.String(), errb.String(), err)
	}()
	f.operator()
	select {
	case out := <-waited:
		if !strings.Contains(out, "hanzo/shop: Healthy, Synced at v1.0.0") {
			t.Fatalf("app wait through a rollout: %s", out)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("app wait did not return after the rollout")
	}
	if out := ok(root, "app", "rollback", "shop", "--revision", "v1.1.0"); !strings.Contains(out, "rolls back to v1.1.0") {
		t.Fatalf("app rollback --revision v1.1.0: %s", out)
	}
	if out := ok(root, "app", "restart", "shop"); !strings.Contains(out, "rolling restart of Deployment hanzo/shop") {
		t.Fatalf("app restart: %s", out)
	}

	// The engine: off here, which the status says and a reconcile refuses.
	if st := ok(root, "engine", "status"); !strings.Contains(st, "disabled") {
		t.Fatalf("engine status:\n%s", st)
	}
	if _, errs, code := cli(root, "engine", "reconcile", "--dry-run"); code != 1 || !strings.Contains(errs, "DEPLOY_ENGINE_ENABLED") {
		t.Fatalf("engine reconcile without an engine: exit %d: %s", code, errs)
	}
}
