package stream_test

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/stream"
	"github.com/hanzoai/deploy/stream/streamtest"
)

// TestWireStart: headers and the first comment arrive before any event;
// then the (here empty) burst's id-only frame at the cluster's position; a
// heartbeat is a comment carrying the newest position; each event is id +
// data.
func TestWireStart(t *testing.T) {
	clock := streamtest.NewClock(time.Unix(1_760_000_000, 0))
	e := newEnv(t, stream.Options{Clock: clock}, nil)
	// An object that makes no row: the cluster is at a position, with no
	// application in it.
	orphan := &appState{ns: "hanzo", name: "orphan"}
	e.apply(projection.Change{Op: projection.Upsert, Object: orphan.configMap()})
	base := e.store.Snapshot().Position.First()
	if base == 0 {
		t.Fatal("the store has no position after a change")
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+"/apps", nil)
	req.Header.Set("X-Identity", "all")
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	for k, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no"} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("header %s: got %q, want %q", k, got, want)
		}
	}
	br := bufio.NewReader(resp.Body)
	readFrame := func() string {
		t.Helper()
		var b strings.Builder
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("read: %v (so far %q)", err, b.String())
			}
			b.WriteString(line)
			if line == "\n" {
				return b.String()
			}
		}
	}
	if got, want := readFrame(), "retry: 3000\n: ping\n\n"; got != want {
		t.Errorf("first frame %q, want %q", got, want)
	}
	if got, want := readFrame(), "id: "+strconv.FormatUint(base, 10)+"\n\n"; got != want {
		t.Errorf("empty burst frame %q, want %q", got, want)
	}
	s := &appState{ns: "tenant-acme", name: "web", org: "acme", tag: "v1.0.0", ready: 1}
	e.apply(projection.Change{Op: projection.Upsert, Object: s.object()})
	a := e.store.Snapshot().Get("tenant-acme", "web")
	want := "id: " + strconv.FormatUint(base+1, 10) + "\ndata: {\"result\":{\"type\":\"ADDED\",\"application\":" + string(a.ApplicationJSON()) + "}}\n\n"
	if got := readFrame(); got != want {
		t.Errorf("event frame:\n got %q\nwant %q", got, want)
	}
	if !clock.WaitFor(t.Context(), 1, 0) {
		t.Fatal("no heartbeat ticker")
	}
	// The event may have come from the catch-up, just before the stream
	// joins its view: a heartbeat before that would pass it by.
	waitFor(t, 5*time.Second, "the stream to join its view", func() bool { return e.hub.Stats().Joined == 1 })
	clock.Advance(15 * time.Second)
	if got, want := readFrame(), "id: "+strconv.FormatUint(base+1, 10)+"\n: ping\n\n"; got != want {
		t.Errorf("heartbeat %q, want %q", got, want)
	}
	s.org = "" // leaves every tenant; a SuperAdmin sees MODIFIED
	e.apply(projection.Change{Op: projection.Upsert, Object: s.object()})
	if got := readFrame(); !strings.HasPrefix(got, "id: "+strconv.FormatUint(base+2, 10)+"\ndata: {\"result\":{\"type\":\"MODIFIED\"") {
		t.Errorf("second event %q", got)
	}
	s.present = false
	e.apply(projection.Change{Op: projection.Delete, Object: s.object()})
	last := e.published()[2]
	want = "id: " + strconv.FormatUint(base+3, 10) + "\ndata: {\"result\":{\"type\":\"DELETED\",\"application\":" + string(last.Old.ApplicationJSON()) + "}}\n\n"
	if got := readFrame(); got != want {
		t.Errorf("DELETED carries the last known Application:\n got %q\nwant %q", got, want)
	}
}

// TestEncodedOncePerView: subscribers of one view share each frame; the
// encoding count grows by the number of views that see an event, not by
// the number of subscribers.
func TestEncodedOncePerView(t *testing.T) {
	f := newFleet(13, 2)
	e := newEnv(t, stream.Options{}, f)
	const fields = "/apps?fields=result.type,result.application.metadata.name"
	views := []struct{ id, path string }{
		{"all", "/apps"}, {"all", "/apps"}, {"all", "/apps"}, // one view
		{"acme", "/apps"}, {"acme", "/apps"}, // a second
		{"globex", "/apps"},              // a third
		{"all", fields}, {"all", fields}, // a fourth
	}
	var ws []*watcher
	for _, v := range views {
		ws = append(ws, e.watch(t, v.id, v.path))
	}
	waitFor(t, 5*time.Second, "the views", func() bool { st := e.hub.Stats(); return st.Views == 4 && st.Subscribers == len(views) })
	before := e.hub.Stats().Encodings
	var acme0 *appState
	for _, a := range f.apps {
		if a.ns == "tenant-acme" {
			acme0 = a
			break
		}
	}
	acme0.tag = "v7.0.0" // seen by: all, all+fields, acme — not globex
	e.apply(projection.Change{Op: projection.Upsert, Object: acme0.object()})
	for i, w := range ws {
		if views[i].id == "globex" {
			continue
		}
		fr := w.next()
		for !fr.HasData {
			fr = w.next()
		}
		if views[i].path == fields {
			k := `{"result":{"type":"MODIFIED","application":{"metadata":{"name":"` + acme0.name + `"}}}}`
			if fr.Data != k {
				t.Errorf("fields view: got %s, want %s", fr.Data, k)
			}
		}
	}
	if got := e.hub.Stats().Encodings - before; got != 3 {
		t.Errorf("one event seen by 3 views (8 subscribers) was encoded %d times, want 3", got)
	}
}

func TestParseRevisions(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		err  string
	}{
		{"", 0, ""},
		{"0", 0, ""},
		{" 1761234567000123 ", 1761234567000123, ""},
		{"18446744073709551615", 18446744073709551615, ""},
		{"18446744073709551616", 0, "does not fit in 64 bits"},
		{"123456789012345678901", 0, "more than 20 digits"},
		{"-1", 0, "decimal number"},
		{"+1", 0, "decimal number"},
		{"1e9", 0, "decimal number"},
		{"abc", 0, "decimal number"},
	} {
		p, err := stream.ParseLastEventID(tc.in, nil)
		got := p.First()
		if tc.err == "" && (err != nil || got != tc.want) {
			t.Errorf("ParseLastEventID(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "Last-Event-ID ")) {
			t.Errorf("ParseLastEventID(%q) error %v; want one saying %q", tc.in, err, tc.err)
		}
		p, err = stream.ParseResourceVersion(tc.in, nil)
		got = p.First()
		if tc.err == "" && (err != nil || got != tc.want) {
			t.Errorf("ParseResourceVersion(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
		if tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), "resourceVersion ")) {
			t.Errorf("ParseResourceVersion(%q) error %v", tc.in, err)
		}
	}
}

func TestParseRequest(t *testing.T) {
	for _, tc := range []struct {
		query, lastID string
		err           string
	}{
		{"", "", ""},
		{"name=web&projects=shop,ops&projects=default&selector=hanzo.ai/env%3Dmain&appNamespace=tenant-acme&fields=result.type&resourceVersion=12", "13", ""},
		{"fields=", "", ""},
		{"nmae=web", "", "unknown query parameter"},
		{"name=Web", "", "DNS-1123"},
		{"selector=a%3D%3D%3Db", "", "not a label selector"},
		{"selector=a&selector=b", "", "more than once"},
		{"fields=items.metadata.name", "", "is not in the event: its fields start with result."},
		{"fields=result..type", "", "dotted path"},
		{"resourceVersion=x", "", "resourceVersion"},
		{"", "x", "Last-Event-ID"},
		{"appNamespace=Tenant", "", "appNamespace"},
		{"projects=a%20b", "", "project"},
	} {
		r, _ := http.NewRequest(http.MethodGet, "/x?"+tc.query, nil)
		if tc.lastID != "" {
			r.Header.Set("Last-Event-ID", tc.lastID)
		}
		_, err := stream.ParseRequest(r, nil)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.query, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: got %v, want an error saying %q", tc.query, err, tc.err)
		}
	}
	r, _ := http.NewRequest(http.MethodGet, "/x?projects=shop,ops&projects=default&resourceVersion=12&fields=-result.application.status.history", nil)
	r.Header.Set("Last-Event-ID", "13")
	req, err := stream.ParseRequest(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"shop", "ops", "default"}, req.Filter.Projects); diff != "" {
		t.Errorf("projects (-want +got):\n%s", diff)
	}
	if req.ResourceVersion.First() != 12 || req.LastEventID.First() != 13 || !req.Filter.Fields.Exclude {
		t.Errorf("got %+v", req)
	}
}

func TestFieldsApply(t *testing.T) {
	doc := `{"result":{"type":"ADDED","application":{"metadata":{"name":"web","labels":{"a":"b"}},"status":{"sync":{"status":"Synced"},"history":[{"id":1,"revision":"v1"},{"id":2,"revision":"v2"}]}}}}`
	for _, tc := range []struct{ fields, want string }{
		{"", doc},
		{"result.type", `{"result":{"type":"ADDED"}}`},
		{"result.application.metadata.name,result.type", `{"result":{"type":"ADDED","application":{"metadata":{"name":"web"}}}}`},
		{"result.application.status.history.revision", `{"result":{"application":{"status":{"history":[{"revision":"v1"},{"revision":"v2"}]}}}}`},
		{"result.application,result.application.metadata.name", `{"result":{"application":{"metadata":{"name":"web","labels":{"a":"b"}},"status":{"sync":{"status":"Synced"},"history":[{"id":1,"revision":"v1"},{"id":2,"revision":"v2"}]}}}}`},
		{"result.type.deeper", `{"result":{}}`},
		{"result.nothing", `{"result":{}}`},
		{"-result.application.status.history,result.application.metadata.labels", `{"result":{"type":"ADDED","application":{"metadata":{"name":"web"},"status":{"sync":{"status":"Synced"}}}}}`},
		{"-result.application.status.history.id", `{"result":{"type":"ADDED","application":{"metadata":{"name":"web","labels":{"a":"b"}},"status":{"sync":{"status":"Synced"},"history":[{"revision":"v1"},{"revision":"v2"}]}}}}`},
	} {
		f, err := stream.ParseFields(tc.fields)
		if err != nil {
			t.Fatalf("%q: %v", tc.fields, err)
		}
		got, err := f.Apply([]byte(doc))
		if err != nil || string(got) != tc.want {
			t.Errorf("fields %q:\n got %s (%v)\nwant %s", tc.fields, got, err, tc.want)
		}
	}
}
