package cluster

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/hanzoai/deploy/projection"
)

// TestClustersOwnTheirConnections: two clusters configured alike (the same
// server, CA and credentials, as aliases of one server are) each open
// their own HTTP/2 connection, shared by all of that cluster's lists and
// discovery, and another for its watches. client-go's transport cache
// gave every such cluster one transport, and at 500 clusters their
// thousands of watches queued for its streams and dialed 5,700
// connections at once.
func TestClustersOwnTheirConnections(t *testing.T) {
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not here", http.StatusNotFound)
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, BearerToken: "t", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}

	const clusters = 2
	ctx := context.Background()
	for range clusters {
		w, err := NewWatcher(cfg, "", nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		// Lists and discovery through each of the cluster's clients.
		_, _ = w.disco.ServerVersion()
		_, _ = w.dyn.Resource(projection.KindApp.GVR()).List(ctx, metav1.ListOptions{})
		_, _ = w.meta.Resource(projection.KindPod.GVR()).List(ctx, metav1.ListOptions{})
		lw, _ := builtinSource(w.typed, w.meta, projection.KindPod)
		_, _ = lw.ListWithContextFunc(ctx, metav1.ListOptions{})
		// Watches, through the cluster's other transport.
		_, _ = w.watchDyn.Resource(projection.KindApp.GVR()).Watch(ctx, metav1.ListOptions{})
		plain, _ := builtinSource(w.watchTyped, w.watchMeta, projection.KindPod)
		_, _ = plain.WatchFuncWithContext(ctx, metav1.ListOptions{})
	}
	if got, want := opened.Load(), int64(2*clusters); got != want {
		t.Errorf("%d connections opened by %d clusters configured alike, want %d (two each: lists, watches)", got, clusters, want)
	}
}
