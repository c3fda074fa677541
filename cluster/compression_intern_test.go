package cluster

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/hanzoai/deploy/projection"
)

// TestWatchesAskForNoGzip: a list asks the API server for gzip, a watch
// does not (a gzip reader keeps a 32 KiB window for as long as the watch
// lasts, and a deployd of 500 clusters holds 7,000 watches), for the
// built-in kinds and for those read through the dynamic client.
func TestWatchesAskForNoGzip(t *testing.T) {
	var mu sync.Mutex
	asked := map[string]string{} // "list"/"watch" of a path → Accept-Encoding
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		what := "list"
		if r.URL.Query().Get("watch") == "true" {
			what = "watch"
		}
		mu.Lock()
		asked[what+" "+r.URL.Path] = r.Header.Get("Accept-Encoding")
		mu.Unlock()
		http.Error(w, "not here", http.StatusNotFound)
	}))
	defer srv.Close()
	// Over TLS, as an API server is: client-go builds its own transport
	// (a plain-http config would share net/http's default one).
	w, err := NewWatcher(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, "", nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lw, _ := builtinSource(w.typed, w.meta, projection.KindPod)
	plain, _ := builtinSource(w.watchTyped, w.watchMeta, projection.KindPod)
	_, _ = lw.ListWithContextFunc(ctx, metav1.ListOptions{})
	_, _ = plain.WatchFuncWithContext(ctx, metav1.ListOptions{})
	res := w.dyn.Resource(projection.KindApp.GVR())
	_, _ = res.List(ctx, metav1.ListOptions{})
	_, _ = w.watchDyn.Resource(projection.KindApp.GVR()).Watch(ctx, metav1.ListOptions{})
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 4 {
		t.Fatalf("requests seen: %v", asked)
	}
	for req, enc := range asked {
		gz := strings.Contains(enc, "gzip")
		if strings.HasPrefix(req, "watch ") == gz {
			t.Errorf("%s asked Accept-Encoding %q: want gzip for a list, none for a watch", req, enc)
		}
	}
}
