package stream

import (
	"bytes"
	"net/http"
	"strconv"
	"testing"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/projection"
)

// TestRecordsEncodedOnlyWhenReadable: before the first sync, with no
// stream open, the records of the initial lists carry no encoded
// Application (nothing can read them: the ring is emptied at sync); with a
// stream open, or once synced, every record does.
func TestRecordsEncodedOnlyWhenReadable(t *testing.T) {
	store := projection.NewStore(projection.DefaultConfig())
	h := NewHub(store, Options{})
	rv := 0
	apply := func(names ...string) []projection.Delta {
		t.Helper()
		var changes []projection.Change
		for _, n := range names {
			rv++
			changes = append(changes, projection.Change{Op: projection.Upsert, Object: &projection.Object{
				Kind: projection.KindApp, Namespace: "hanzo", Name: n, UID: "uid-" + n,
				ResourceVersion: strconv.Itoa(rv), Generation: 1, Created: 1_760_000_000,
				Spec: &projection.AppSpec{Repository: "ghcr.io/hanzoai/" + n, Tag: "v" + strconv.Itoa(rv), Replicas: 1, Role: "service"},
			}})
		}
		deltas, err := store.Apply(changes...)
		if err != nil {
			t.Fatal(err)
		}
		return deltas
	}
	newest := func(n int) []*record {
		h.mu.Lock()
		defer h.mu.Unlock()
		var out []*record
		for i := h.ring.n - n; i < h.ring.n; i++ {
			out = append(out, h.ring.at(i))
		}
		return out
	}
	check := func(when string, recs []*record, encoded bool) {
		t.Helper()
		for _, rec := range recs {
			if got := rec.newJSON != nil; got != encoded {
				t.Errorf("%s: record of %s encoded %v, want %v", when, rec.key.Name, got, encoded)
			}
			if rec.deferred() {
				t.Errorf("%s: record of %s still holds its App versions after fan-out", when, rec.key.Name)
			}
		}
	}

	h.Publish(apply("a", "b", "c"))
	h.drain()
	check("initial lists, no stream", newest(3), false)

	s := &subscriber{max: 8, wake: make(chan struct{}, 1), cancel: func(error) {}}
	h.mu.Lock()
	h.clients[s] = struct{}{}
	h.mu.Unlock()
	h.Publish(apply("a"))
	h.drain()
	check("a stream open before sync", newest(1), true)

	// A record made while nothing was readable, fanned out after a stream
	// opened.
	h.mu.Lock()
	delete(h.clients, s)
	h.mu.Unlock()
	deltas := apply("b")
	rec := newRecord(&deltas[0], 0, false)
	if rec.newJSON != nil || !rec.deferred() {
		t.Fatal("a record made with encode false was encoded at once")
	}
	h.mu.Lock()
	h.clients[s] = struct{}{}
	h.fanOut(rec)
	delete(h.clients, s)
	h.mu.Unlock()
	check("a stream opened between making and fanning out", []*record{rec}, true)

	h.Synced(store.Snapshot().Position)
	h.drain()
	h.Publish(apply("c"))
	h.drain()
	check("synced, no stream", newest(1), true)
}

// flushRecorder is a ResponseWriter that keeps what it is written and can
// flush.
type flushRecorder struct {
	h       http.Header
	body    bytes.Buffer
	writes  int // calls of Write
	flushes int
}

func (f *flushRecorder) Header() http.Header         { return f.h }
func (f *flushRecorder) Write(b []byte) (int, error) { f.writes++; return f.body.Write(b) }
func (f *flushRecorder) WriteHeader(int)             {}
func (f *flushRecorder) Flush()                      { f.flushes++ }

// TestWritesGathered: what a stream writes until it flushes reaches the
// ResponseWriter in few writes (a round of 100 frames of 3 KB in five, not
// a hundred), in order and whole, and a frame larger than the buffer goes
// as it is; a flush writes what is gathered before it flushes.
func TestWritesGathered(t *testing.T) {
	rec := &flushRecorder{h: http.Header{}}
	out, err := newEventWriter(rec)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for i := range 100 {
		f := bytes.Repeat([]byte{byte('a' + i%26)}, 3000)
		out.write(f)
		want.Write(f)
	}
	if rec.writes > 4 || rec.flushes != 0 {
		t.Fatalf("before the flush: %d writes, %d flushes; want at most 4 (whole buffers), none", rec.writes, rec.flushes)
	}
	if err := out.flush(); err != nil {
		t.Fatal(err)
	}
	if rec.writes != 5 || rec.flushes != 1 || !bytes.Equal(rec.body.Bytes(), want.Bytes()) {
		t.Fatalf("after the flush: %d writes, %d flushes, %d bytes (same: %v); want 5 writes, 1 flush, the %d bytes in order",
			rec.writes, rec.flushes, rec.body.Len(), bytes.Equal(rec.body.Bytes(), want.Bytes()), want.Len())
	}
	rec.writes = 0
	big := bytes.Repeat([]byte("z"), writeChunk+1)
	out.write([]byte("small"))
	out.write(big)
	if rec.writes != 2 {
		t.Fatalf("a frame over the buffer: %d writes, want 2 (what was gathered, then the frame as it is)", rec.writes)
	}
	if err := out.flush(); err != nil || rec.writes != 2 || !bytes.HasSuffix(rec.body.Bytes(), append([]byte("small"), big...)) {
		t.Fatalf("flush after a large frame: err %v, %d writes: want no write more", err, rec.writes)
	}
}

// TestBurstBuildsNoFrames: a burst without fields writes each event in
// pieces, the same bytes encode builds, and allocates no frame per event.
func TestBurstBuildsNoFrames(t *testing.T) {
	store := projection.NewStore(projection.DefaultConfig())
	var changes []projection.Change
	for i := range 200 {
		n := "app-" + strconv.Itoa(i)
		changes = append(changes, projection.Change{Op: projection.Upsert, Object: &projection.Object{
			Kind: projection.KindApp, Namespace: "hanzo", Name: n, UID: "uid-" + n,
			ResourceVersion: strconv.Itoa(i + 1), Generation: 1, Created: 1_760_000_000,
			Spec: &projection.AppSpec{Repository: "ghcr.io/hanzoai/" + n, Tag: "v1", Replicas: 1, Role: "service"},
		}})
	}
	if _, err := store.Apply(changes...); err != nil {
		t.Fatal(err)
	}
	h := NewHub(store, Options{})
	spec := newView(auth.AllScope(), AppFilter{})
	rec := &flushRecorder{h: http.Header{}}
	out, err := newEventWriter(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := h.burst(t.Context(), out, spec); !ok {
		t.Fatal("burst failed")
	}
	var want bytes.Buffer
	snap := store.Snapshot()
	rows := spec.rows(snap)
	for i, a := range rows {
		if i == len(rows)-1 {
			want.Write(appendID(nil, snap.Position))
		}
		want.Write(spec.encode(projection.Added, a.ApplicationJSON()))
	}
	if !bytes.Equal(rec.body.Bytes(), want.Bytes()) {
		t.Fatalf("the burst wrote other bytes than its frames:\n%.300s\nwant\n%.300s", rec.body.Bytes(), want.Bytes())
	}
	app := []byte(`{"metadata":{"name":"x","namespace":"y"},"spec":{"project":"p"}}`)
	for _, param := range []string{"", "result.application.metadata.name"} {
		fields, err := ParseFields(param)
		if err != nil {
			t.Fatal(err)
		}
		v := newView(auth.AllScope(), AppFilter{Fields: fields})
		rec.body.Reset()
		v.writeAdded(out, app)
		if err := out.flush(); err != nil {
			t.Fatal(err)
		}
		if got, want := rec.body.String(), string(v.encode(projection.Added, app)); got != want {
			t.Errorf("fields %q: wrote %q, encode builds %q", param, got, want)
		}
	}

	allocs := testing.AllocsPerRun(20, func() {
		rec.body.Reset()
		h.burst(t.Context(), out, spec)
	})
	if allocs > 20 {
		t.Errorf("a burst of %d events allocated %.0f times, want no frame per event (at most 20)", len(rows), allocs)
	}
}
