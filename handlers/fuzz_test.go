package handlers

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// FuzzParseRef: no panic; an accepted ref names a registry kind and
// round-trips; a Secret is never accepted.
func FuzzParseRef(f *testing.F) {
	for _, s := range []string{":Service:hanzo:iam", "apps:Deployment:tenant-acme:web", ":Secret:hanzo:x", "v1:Secret:hanzo:x",
		"hanzo.ai:App:hanzo:iam", ":::", "a:b:c:d:e", "", ":Pod:hanzo:web-1.2", "\x00:Pod:a:b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		r, err := parseRef(token)
		if err != nil {
			var ae *apiError
			if !asAPIError(err, &ae) || ae.Code != http.StatusBadRequest {
				t.Fatalf("parseRef(%q): %v, want a 400", token, err)
			}
			return
		}
		if !r.kind.InRegistry() || strings.Contains(strings.ToLower(r.kind.String()), "secret") {
			t.Fatalf("parseRef(%q) accepted kind %s", token, r.kind)
		}
		if again, err := parseRef(r.token); err != nil || again != r {
			t.Fatalf("ref %q does not round-trip: %v %v", r.token, again, err)
		}
	})
}

// FuzzListQuery: any query string is either a 400 or a filter whose cache
// key is stable; selectors never panic.
func FuzzListQuery(f *testing.F) {
	for _, s := range []string{"name=web", "projects=a,b&projects=c", "selector=a%3Db,c+in+(d)", "selector=!!!", "fields=items.metadata.name",
		"appNamespace=hanzo", "fields=items..x", "selector=a%3D%3D%3Db", "x=1", "name=a&name=b", "selector=" + strings.Repeat("a", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		lq, err := parseListQuery(q)
		if err != nil {
			var ae *apiError
			if !asAPIError(err, &ae) || ae.Code != http.StatusBadRequest {
				t.Fatalf("parseListQuery(%q): %v, want a 400", raw, err)
			}
			return
		}
		lq2, err := parseListQuery(q)
		if err != nil || lq2.key() != lq.key() {
			t.Fatalf("unstable: %q vs %q (%v)", lq.key(), lq2.key(), err)
		}
	})
}

// FuzzSelectFields: field selection on any JSON never panics and yields
// valid JSON.
func FuzzSelectFields(f *testing.F) {
	f.Add(`{"items":[{"metadata":{"name":"a"}}],"metadata":{"resourceVersion":"1"}}`, "items.metadata.name,metadata")
	f.Add(`[1,2,{"a":[{"b":3}]}]`, "items.a.b")
	f.Fuzz(func(t *testing.T, doc, fields string) {
		var v any
		if json.Unmarshal([]byte(doc), &v) != nil {
			return
		}
		paths, err := parseFields(fields)
		if err != nil {
			return
		}
		if _, err := json.Marshal(selectFields(v, paths)); err != nil {
			t.Fatal(err)
		}
	})
}

func asAPIError(err error, target **apiError) bool {
	ae, ok := err.(*apiError)
	if ok {
		*target = ae
	}
	return ok
}
