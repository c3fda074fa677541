package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hanzoai/deploy/auth/authtest"
)

// TestServeWithoutCluster: with no configuration to be found, deployd
// serve still starts, says why in its log, answers degraded health (503)
// and refuses sign-in with the missing setting named.
func TestServeWithoutCluster(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("DEPLOY_PUBLIC_URL", "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &authtest.LogBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve", "--listen", addr}, io.Discard, stderr) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	get := func(path string) (int, string) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp, err := http.Get("http://" + addr + path)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				return resp.StatusCode, strings.TrimSpace(string(b))
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s: %v", path, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if code, body := get("/v1/deploy/health"); code != http.StatusServiceUnavailable || body != `{"service":"deploy","status":"degraded","k8s":false}` {
		t.Fatalf("health: %d %s", code, body)
	}
	if code, body := get("/v1/deploy/login"); code != http.StatusServiceUnavailable || !strings.Contains(body, "DEPLOY_PUBLIC_URL") {
		t.Fatalf("login: %d %s", code, body)
	}
	if !strings.Contains(stderr.String(), "serving without a cluster") || !strings.Contains(stderr.String(), "no Kubernetes configuration") {
		t.Fatalf("the log does not say why:\n%s", stderr.String())
	}
}
