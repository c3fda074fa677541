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
// and refuses sign-in with the missing setting named; /metrics is served on
// DEPLOYD_METRICS_LISTEN (not ready) and not on the public port.
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
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	maddr := mln.Addr().String()
	mln.Close()
	t.Setenv("DEPLOYD_METRICS_LISTEN", maddr)
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
	getFrom := func(addr, path string) (int, string) {
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
	get := func(path string) (int, string) { return getFrom(addr, path) }
	if code, body := getFrom(maddr, "/metrics"); code != http.StatusOK || !strings.Contains(body, "\ndeployd_ready 0\n") {
		t.Fatalf("metrics listener: %d, want 200 with deployd_ready 0:\n%s", code, body)
	}
	if code, _ := get("/metrics"); code != http.StatusNotFound {
		t.Fatalf("public /metrics: %d, want 404", code)
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

// TestServeRefusesBadReleaseSettings: a wrong release setting stops serve
// at start, naming the variable and what to write.
func TestServeRefusesBadReleaseSettings(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	for _, tc := range []struct{ key, value, want string }{
		{"DEPLOY_RELEASE_SOURCE", "gitlab", "DEPLOY_RELEASE_SOURCE \"gitlab\": want none, registry, github or registry,github"},
		{"DEPLOY_RELEASE_REFRESH", "1s", "DEPLOY_RELEASE_REFRESH \"1s\": want a duration of at least 10s"},
		{"DEPLOY_GITHUB_API", "ftp://example.com", "DEPLOY_GITHUB_API \"ftp://example.com\": want an http(s) base URL"},
		{"DEPLOY_GITHUB_TOKEN_FILE", "/nonexistent/token", "DEPLOY_GITHUB_TOKEN_FILE: /nonexistent/token does not exist"},
		{"DEPLOY_REGISTRY_AUTH_FILE", "/nonexistent/config.json", "DEPLOY_REGISTRY_AUTH_FILE: /nonexistent/config.json does not exist"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			t.Setenv(tc.key, tc.value)
			err := run(t.Context(), []string{"serve", "--listen", "127.0.0.1:0"}, io.Discard, io.Discard)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error starting %q", err, tc.want)
			}
		})
	}
}
