package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServePprof: the profiles are off by default (404 on the metrics
// listener); with DEPLOY_PPROF=true the metrics listener serves them and
// the public listener still does not (it answers with the page, as for any
// path it does not route); any other value stops serve at start.
func TestServePprof(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("DEPLOY_PUBLIC_URL", "")
	for _, tc := range []struct {
		value             string
		metrics           int
		wantHeapInProfile bool
	}{
		{"", http.StatusNotFound, false},
		{"false", http.StatusNotFound, false},
		{"true", http.StatusOK, true},
	} {
		t.Run("DEPLOY_PPROF="+tc.value, func(t *testing.T) {
			t.Setenv("DEPLOY_PPROF", tc.value)
			addr, maddr := freeAddr(t), freeAddr(t)
			t.Setenv("DEPLOYD_METRICS_LISTEN", maddr)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- run(ctx, []string{"serve", "--listen", addr}, io.Discard, io.Discard) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("serve: %v", err)
				}
			}()
			if code, _ := getWhenUp(t, maddr, "/metrics"); code != http.StatusOK {
				t.Fatalf("metrics: %d, want 200", code)
			}
			code, body := getWhenUp(t, maddr, "/debug/pprof/heap?debug=1")
			if code != tc.metrics {
				t.Fatalf("metrics listener /debug/pprof/heap: got %d, want %d", code, tc.metrics)
			}
			if got := strings.HasPrefix(body, "heap profile:"); got != tc.wantHeapInProfile {
				t.Fatalf("metrics listener /debug/pprof/heap is a heap profile: got %v, want %v:\n%.200s", got, tc.wantHeapInProfile, body)
			}
			// The public listener answers these paths as it answers any
			// path of the page's own routes: with the page, never a profile.
			for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"} {
				if _, body := getWhenUp(t, addr, path); !strings.HasPrefix(body, "<!doctype html>") {
					t.Fatalf("public %s: got %.120q, want the page", path, body)
				}
			}
		})
	}
	t.Run("DEPLOY_PPROF=yes", func(t *testing.T) {
		t.Setenv("DEPLOY_PPROF", "yes")
		err := run(t.Context(), []string{"serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, io.Discard, io.Discard)
		if want := `DEPLOY_PPROF "yes": want true or false`; err == nil || err.Error() != want {
			t.Fatalf("got %v, want %q", err, want)
		}
	})
	t.Run("without a metrics listener", func(t *testing.T) {
		t.Setenv("DEPLOY_PPROF", "true")
		err := run(t.Context(), []string{"serve", "--listen", "127.0.0.1:0", "--metrics-listen="}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "DEPLOYD_METRICS_LISTEN") {
			t.Fatalf("got %v, want an error naming DEPLOYD_METRICS_LISTEN", err)
		}
	})
}

// freeAddr is a loopback address nothing listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// getWhenUp GETs path from addr, retrying until the listener accepts.
func getWhenUp(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + path)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp.StatusCode, string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s%s: %v", addr, path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
