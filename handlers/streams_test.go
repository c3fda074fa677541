package handlers

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hanzoai/deploy/stream"
)

// withHub gives the env's server a stream hub over its store.
func withHub(t *testing.T, env *serverEnv) *stream.Hub {
	t.Helper()
	hub := stream.NewHub(env.store, stream.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); hub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	env.srv.d.Hub = hub
	env.srv.streamRoutes()
	return hub
}

// readEvents reads SSE data lines until n events or the deadline.
func readEvents(t *testing.T, env *serverEnv, path, token string, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, env.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() && len(events) < n {
		if line := sc.Text(); strings.HasPrefix(line, "data: ") {
			events = append(events, strings.TrimPrefix(line, "data: "))
		}
	}
	return events
}

// TestStreamRoutes: the fleet stream and the tree stream through the HTTP
// surface, scoped by the caller's token.
func TestStreamRoutes(t *testing.T) {
	env := newServerEnv(t)
	withHub(t, env)
	acme := env.token(t, userAlice, time.Hour)
	events := readEvents(t, env, "/v1/deploy/stream/applications", acme, 3)
	if len(events) != 3 {
		t.Fatalf("got %d events", len(events))
	}
	for _, e := range events {
		if !strings.HasPrefix(e, `{"result":{"type":"ADDED","application":{`) || !strings.Contains(e, `"namespace":"tenant-acme"`) {
			t.Fatalf("event %s", e)
		}
	}
	tree := readEvents(t, env, "/v1/deploy/stream/applications/web/resource-tree", acme, 1)
	if len(tree) != 1 || !strings.HasPrefix(tree[0], `{"result":{"nodes":[`) {
		t.Fatalf("tree event %v", tree)
	}
	for _, c := range []struct {
		path  string
		token string
		code  int
	}{
		{"/v1/deploy/stream/applications?resourceVersion=abc", acme, 400},
		{"/v1/deploy/stream/applications?bogus=1", acme, 400},
		{"/v1/deploy/stream/applications", "", 401},
		{"/v1/deploy/stream/applications/api/resource-tree", acme, 404},
	} {
		if r := env.get(t, c.path, c.token); r.code != c.code {
			t.Errorf("GET %s: %d %s, want %d", c.path, r.code, r.body, c.code)
		}
	}
}
