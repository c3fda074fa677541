package stream_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/stream"
	"github.com/hanzoai/deploy/stream/streamtest"
)

func treeData(a *projection.App) string { return `{"result":` + string(a.ApplicationTreeJSON()) + `}` }

// TestTreeStream: the tree at once, the whole tree again on each change,
// only a comment on a heartbeat, and the end (with nothing of the new
// version) when the app leaves the caller's scope or is deleted.
func TestTreeStream(t *testing.T) {
	clock := streamtest.NewClock(time.Unix(1_760_000_000, 0))
	f := newFleet(11, 2)
	e := newEnv(t, stream.Options{Clock: clock}, f)
	var acme0, acme1 *appState
	for _, a := range f.apps {
		if a.ns == "tenant-acme" {
			if acme0 == nil {
				acme0 = a
			} else {
				acme1 = a
			}
		}
	}
	open := func(id string, a *appState) (*http.Response, *streamtest.Reader) {
		resp, rd, err := e.dial(t.Context(), "/tree?namespace="+a.ns+"&name="+a.name, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp, rd
	}
	next := func(rd *streamtest.Reader) streamtest.Frame {
		t.Helper()
		fr, err := rd.Next()
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		return fr
	}
	current := func(a *appState) *projection.App { return e.store.Snapshot().Get(a.ns, a.name) }

	resp, rd := open("acme", acme0)
	if got := resp.Header.Get("Content-Type"); got != "text/event-stream" {
		t.Errorf("Content-Type %q, want text/event-stream", got)
	}
	if fr := next(rd); fr.Retry != "3000" {
		t.Errorf("first frame %+v, want retry: 3000", fr)
	}
	if fr := next(rd); fr.Data != treeData(current(acme0)) {
		t.Errorf("first tree:\n got %s\nwant %s", fr.Data, treeData(current(acme0)))
	}
	// A tree change: the whole tree again.
	acme0.cm++
	e.apply(projection.Change{Op: projection.Upsert, Object: acme0.configMap()})
	if fr := next(rd); fr.Data != treeData(current(acme0)) {
		t.Errorf("tree after a change:\n got %s\nwant %s", fr.Data, treeData(current(acme0)))
	}
	// Another app's change sends nothing; a heartbeat sends a comment only.
	acme1.cm++
	e.apply(projection.Change{Op: projection.Upsert, Object: acme1.configMap()})
	if !clock.WaitFor(t.Context(), 1, 0) {
		t.Fatal("no heartbeat ticker")
	}
	clock.Advance(15 * time.Second)
	if fr := next(rd); !fr.IsComment() || fr.Comments[0] != "ping" {
		t.Errorf("after a heartbeat: got %+v, want only a ping comment", fr)
	}
	// Leaving the scope ends the stream; the new version is never sent.
	acme0.org = "globex"
	e.apply(projection.Change{Op: projection.Upsert, Object: acme0.object()})
	for {
		fr, err := rd.Next()
		if err != nil {
			break
		}
		if fr.HasData {
			t.Errorf("after leaving the scope: got %q, want the end of the stream", fr.Data)
		}
	}
	// Deletion ends a SuperAdmin's stream.
	_, rd = open("all", acme1)
	next(rd)
	next(rd)
	acme1.present = false
	e.apply(projection.Change{Op: projection.Delete, Object: acme1.object()})
	for {
		fr, err := rd.Next()
		if err != nil {
			break
		}
		if fr.HasData {
			t.Errorf("after deletion: got %q, want the end of the stream", fr.Data)
		}
	}
	// Invisible and missing apps are the same 404.
	for _, tc := range []struct{ id, path string }{
		{"globex", "/tree?namespace=tenant-acme&name=app-00"},
		{"acme", "/tree?namespace=tenant-acme&name=nope"},
	} {
		resp, _, err := e.dial(t.Context(), tc.path, tc.id, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s: got %s, want 404", tc.id, tc.path, resp.Status)
		}
	}
}

// gatedWriter is an in-memory flushing ResponseWriter whose writes wait
// while the gate is held.
type gatedWriter struct {
	header  http.Header
	gate    sync.Mutex
	mu      sync.Mutex
	buf     bytes.Buffer
	writing chan struct{} // receives when a write starts
}

func (w *gatedWriter) Header() http.Header { return w.header }
func (w *gatedWriter) WriteHeader(int)     {}
func (w *gatedWriter) Flush()              {}
func (w *gatedWriter) Write(b []byte) (int, error) {
	select {
	case w.writing <- struct{}{}:
	default:
	}
	w.gate.Lock()
	defer w.gate.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(b)
}

func (w *gatedWriter) frames(t *testing.T) []streamtest.Frame {
	w.mu.Lock()
	defer w.mu.Unlock()
	rd := streamtest.NewReader(bytes.NewReader(w.buf.Bytes()))
	var out []streamtest.Frame
	for {
		f, err := rd.Next()
		if err != nil {
			return out
		}
		out = append(out, f)
	}
}

// TestTreeCoalesces: changes that arrive while the client's writer is busy
// cost one send of the latest tree, not one per change.
func TestTreeCoalesces(t *testing.T) {
	f := newFleet(12, 1)
	e := newEnv(t, stream.Options{}, f)
	var a *appState
	for _, x := range f.apps {
		if x.ns == "tenant-acme" {
			a = x
		}
	}
	w := &gatedWriter{header: http.Header{}, writing: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(t.Context())
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/tree", nil)
	served := make(chan error, 1)
	go func() {
		served <- e.hub.ServeTree(w, r, stream.TreeRequest{Scope: scopeOf(t, "acme"), Key: projection.AppKey{Namespace: a.ns, Name: a.name}})
	}()
	waitFor(t, 5*time.Second, "the first tree", func() bool { return len(w.frames(t)) == 2 })
	<-w.writing // drain the signal of the first writes
	w.gate.Lock()
	a.cm++
	e.apply(projection.Change{Op: projection.Upsert, Object: a.configMap()})
	<-w.writing // the writer is now blocked sending that tree
	for range 5 {
		a.cm++
		e.apply(projection.Change{Op: projection.Upsert, Object: a.configMap()})
	}
	latest := treeData(e.store.Snapshot().Get(a.ns, a.name))
	w.gate.Unlock()
	waitFor(t, 5*time.Second, "the latest tree", func() bool {
		fr := w.frames(t)
		return fr[len(fr)-1].Data == latest
	})
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	var trees []string
	for _, fr := range w.frames(t) {
		if fr.HasData {
			trees = append(trees, fr.Data)
		}
	}
	if len(trees) != 3 {
		t.Errorf("got %d trees for 6 changes made while one send was blocked, want 3 (first, blocked, latest):\n%s", len(trees), strings.Join(trees, "\n"))
	}
}
