package stream_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/stream"
)

func fuzzRevision(f *testing.F, parse func(string) (uint64, error), prefix string) {
	for _, s := range []string{"", "0", "1", "1761234567000123", " 42 ", "18446744073709551615", "18446744073709551616", "-1", "0x10", "１２", "9\x00", "0=1", "staging=5,in-cluster=7"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rev, err := parse(s)
		if err != nil {
			if rev != 0 || !strings.HasPrefix(err.Error(), prefix) {
				t.Fatalf("parse(%q) = %d, %v: want 0 and an error starting %q", s, rev, err, prefix)
			}
			return
		}
		trimmed := strings.TrimSpace(s)
		if strings.Contains(trimmed, "=") {
			// A position by cluster name: with one cluster (no names)
			// no part is known to be its own.
			if rev != 0 {
				t.Fatalf("parse(%q) = %d, want 0", s, rev)
			}
			return
		}
		if rev != 0 || (trimmed != "" && strings.Trim(trimmed, "0") != "") {
			if got, _ := strconv.ParseUint(trimmed, 10, 64); got != rev {
				t.Fatalf("parse(%q) = %d, want %d", s, rev, got)
			}
		}
	})
}

func FuzzParseLastEventID(f *testing.F) {
	fuzzRevision(f, func(s string) (uint64, error) { p, err := stream.ParseLastEventID(s, nil); return p.First(), err }, "Last-Event-ID ")
}

func FuzzParseResourceVersion(f *testing.F) {
	fuzzRevision(f, func(s string) (uint64, error) { p, err := stream.ParseResourceVersion(s, nil); return p.First(), err }, "resourceVersion ")
}

const fuzzDoc = `{"result":{"type":"ADDED","application":{"metadata":{"name":"web","labels":{"a":"b"}},"status":{"history":[{"id":1},{"id":2}],"sync":{"status":"Synced"}}}}}`

// FuzzParseFields: any parameter parses or fails with a message; a parsed
// one round-trips through String and, applied to a valid document, yields
// valid JSON; applied to anything, it never panics.
func FuzzParseFields(f *testing.F) {
	for _, s := range []string{"", "-", "result.type", "-result.application.status.history", "result.application.metadata.name,result.type", "result..x", "items.x", ",,,", "result." + strings.Repeat("a.", 200)} {
		f.Add(s, fuzzDoc)
	}
	f.Add("result.a", `{"result":[1,{"a":[{"a":1}]},"x"]}`)
	f.Add("-result.a", `{"result":{"a":1,"a":2}`)
	f.Fuzz(func(t *testing.T, s, doc string) {
		fields, err := stream.ParseFields(s)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		again, err := stream.ParseFields(fields.String())
		if err != nil {
			t.Fatalf("String %q does not parse: %v", fields.String(), err)
		}
		if diff := cmp.Diff(fields, again); diff != "" {
			t.Fatalf("round trip (-first +again):\n%s", diff)
		}
		out, err := fields.Apply([]byte(fuzzDoc))
		if err != nil || !json.Valid(out) {
			t.Fatalf("apply %q to a valid document: %s, %v", s, out, err)
		}
		if out, err := fields.Apply([]byte(doc)); err == nil && json.Valid([]byte(doc)) && !json.Valid(out) {
			t.Fatalf("apply %q to %q: invalid %q", s, doc, out)
		}
	})
}

// FuzzParseSelector: a selector parses or fails with a message; a parsed
// one prints in a form that parses to the same selector, and matching an
// Application's labels never panics.
func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{"", "hanzo.ai/env=main", "hanzo.ai/org in (acme,globex)", "!hanzo.ai/org", "a!=b,c", "a==", "x in (", "hanzo.ai/instance notin (a)", "a>1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := stream.ParseSelector(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "selector ") {
				t.Fatalf("error %q does not name the selector", err)
			}
			return
		}
		if sel == nil {
			return
		}
		again, err := stream.ParseSelector(sel.String())
		if err != nil || again.String() != sel.String() {
			t.Fatalf("selector %q prints as %q, which parses to %v, %v", s, sel.String(), again, err)
		}
		filter := stream.AppFilter{Selector: sel}
		filter.Matches(&projection.App{AppMeta: &projection.AppMeta{Namespace: "tenant-acme", Name: "web", Env: "main", Org: "acme"}})
	})
}

// FuzzParseRequest: any query and Last-Event-ID parse or fail with a
// message, never a panic.
func FuzzParseRequest(f *testing.F) {
	f.Add("name=web&projects=shop,ops&selector=hanzo.ai/env%3Dmain&appNamespace=tenant-acme&fields=result.type&resourceVersion=12", "13")
	f.Add("projects=&projects=%2C&fields=-&name=", "")
	f.Add("selector=a%20in%20(b", "x")
	f.Fuzz(func(t *testing.T, query, lastID string) {
		q, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		r := &httpRequestStub{}
		req, err := stream.ParseRequest(r.build(q, lastID), nil)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		_ = req.Filter.Matches(&projection.App{AppMeta: &projection.AppMeta{Namespace: "tenant-acme", Name: "web"}})
	})
}

type httpRequestStub struct{}

func (httpRequestStub) build(q url.Values, lastID string) *http.Request {
	r := &http.Request{URL: &url.URL{Path: "/v1/deploy/stream/applications", RawQuery: q.Encode()}, Header: http.Header{}}
	if lastID != "" {
		r.Header.Set("Last-Event-ID", lastID)
	}
	return r
}
