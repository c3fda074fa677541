package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/hanzoai/deploy/projection"
)

const apiDigest = "v3.1.0@sha256:4f2b0c7e1d9a8b6c5e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d"

// encodeAll percent-encodes every byte of s (what a client may send: any
// byte may be escaped, not only the reserved ones).
func encodeAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

// paramRoute is one route with a path parameter, written as a format with
// one %s where the parameter goes.
type paramRoute struct {
	method, format, param, value string
	stream                       bool
}

var paramRoutes = []paramRoute{
	{"GET", "/v1/deploy/applications/%s", "name", "web", false},
	{"GET", "/v1/deploy/applications/%s/resource-tree", "name", "web", false},
	{"GET", "/v1/deploy/applications/%s/syncwindows", "name", "web", false},
	{"GET", "/v1/deploy/applications/%s/revisions/" + url.PathEscape(apiDigest) + "/metadata", "name", "api", false},
	{"GET", "/v1/deploy/applications/api/revisions/%s/metadata", "rev", apiDigest, false},
	{"GET", "/v1/deploy/%s/tree", "name", "web", false},
	{"GET", "/v1/deploy/%s/resource/apps:Deployment:tenant-acme:web", "name", "web", false},
	{"GET", "/v1/deploy/web/resource/%s", "ref", "apps:Deployment:tenant-acme:web", false},
	{"GET", "/v1/deploy/%s/logs", "name", "web", false},
	{"GET", "/v1/paas/apps/%s?env=main", "app", "web", false},
	{"GET", "/v1/deploy/account/can-i/%s/sync/default/web", "resource", "applications", false},
	{"GET", "/v1/deploy/account/can-i/applications/%s/default/web", "action", "sync", false},
	{"GET", "/v1/deploy/account/can-i/applications/sync/%s", "subresource", "default/web", false},
	{"GET", "/v1/deploy/stream/applications/%s/resource-tree", "name", "web", true},
	{"POST", "/v1/deploy/applications/%s/sync", "name", "web", false},
	{"POST", "/v1/deploy/%s/sync?namespace=tenant-acme", "name", "web", false},
	{"POST", "/v1/paas/apps/%s/deploy?env=main", "app", "web", false},
}

// statusOf sends a request and reads the status and body; a stream is
// read up to its headers only.
func statusOf(t *testing.T, env *serverEnv, pr paramRoute, path, token string) reply {
	t.Helper()
	if !pr.stream {
		body := []byte(nil)
		if pr.method == http.MethodPost {
			body = []byte("{}")
		}
		return env.do(t, pr.method, path, token, body, "Content-Type", "application/json")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, pr.method, env.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", pr.method, path, err)
	}
	defer resp.Body.Close()
	r := reply{code: resp.StatusCode, header: resp.Header}
	if resp.StatusCode != http.StatusOK {
		var b strings.Builder
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		r.body = b.String()
	}
	return r
}

// TestPathParamsDecodedOnce: every route with a path parameter answers the
// same for a parameter written plainly and percent-encoded; a double-encoded
// one is decoded once only (it is refused or not found, never taken for the
// plain value); an invalid escape is a 400 naming the parameter.
func TestPathParamsDecodedOnce(t *testing.T) {
	env, _ := newWriteEnv(t)
	withDigestHistory(t, env)
	withHub(t, env)
	root := env.token(t, userRoot, time.Hour)
	for _, pr := range paramRoutes {
		t.Run(pr.method+" "+pr.format+" "+pr.param, func(t *testing.T) {
			plain := statusOf(t, env, pr, fmt.Sprintf(pr.format, pr.value), root)
			if plain.code >= 400 {
				t.Fatalf("plain %s: got %d: %s", pr.value, plain.code, plain.body)
			}
			for _, enc := range []string{url.PathEscape(pr.value), encodeAll(pr.value)} {
				got := statusOf(t, env, pr, fmt.Sprintf(pr.format, enc), root)
				if got.code != plain.code {
					t.Errorf("encoded %s: got %d, want %d as plain: %s", enc, got.code, plain.code, got.body)
				}
				if pr.method == http.MethodGet && !pr.stream && got.body != plain.body {
					t.Errorf("encoded %s: body differs from plain:\n got %.300s\nwant %.300s", enc, got.body, plain.body)
				}
			}
			// Decoded once, a double-encoded value is the literal "%61…":
			// never a name, a ref or a revision, and never the plain value's
			// answer (can-i answers for any string; a SuperAdmin's "yes" to
			// any subresource is no sign of a second decoding).
			double := strings.ReplaceAll(encodeAll(pr.value), "%", "%25")
			got := statusOf(t, env, pr, fmt.Sprintf(pr.format, double), root)
			switch {
			case strings.Contains(pr.format, "can-i"):
				if pr.param != "subresource" && got.body == plain.body {
					t.Errorf("double-encoded %s: answered as the plain value: %s", double, got.body)
				}
			case got.code < 400 || got.code >= 500:
				t.Errorf("double-encoded %s: got %d, want a 4xx: %.300s", double, got.code, got.body)
			}
			// net/http refuses an invalid escape in the request line itself
			// (400, before any route); one that reaches the router (a
			// RawPath set by a proxy or a test) is refused by name.
			req := httptest.NewRequest(pr.method, fmt.Sprintf(pr.format, "x"+pr.value), nil)
			prefix := pr.format[:strings.Index(pr.format, "%s")]
			req.URL.RawPath = prefix + "%zz" + req.URL.EscapedPath()[len(prefix)+1:]
			req.Header.Set("Authorization", "Bearer "+root)
			rec := httptest.NewRecorder()
			env.srv.Handler().ServeHTTP(rec, req)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("invalid escape: got %d, want 400: %s", rec.Code, rec.Body)
			}
			if msg := errorMessage(t, reply{code: rec.Code, body: rec.Body.String(), header: rec.Header()}); !strings.Contains(msg, "path parameter "+pr.param+" ") {
				t.Errorf("invalid escape: message %q does not name %s", msg, pr.param)
			}
		})
	}
}

// TestDigestRevisionBothSpellings: a digest-pinned revision is found
// written with a literal '@' and ':' and encoded; double-encoded it is not.
func TestDigestRevisionBothSpellings(t *testing.T) {
	env := newServerEnv(t)
	withDigestHistory(t, env)
	root := env.token(t, userRoot, time.Hour)
	for path, want := range map[string]int{
		"/v1/deploy/applications/api/revisions/" + apiDigest + "/metadata":                                   200,
		"/v1/deploy/applications/api/revisions/" + url.PathEscape(apiDigest) + "/metadata":                   200,
		"/v1/deploy/applications/api/revisions/" + strings.ReplaceAll(apiDigest, "@", "%40") + "/metadata":   200,
		"/v1/deploy/applications/api/revisions/" + strings.ReplaceAll(apiDigest, "@", "%2540") + "/metadata": 404,
		"/v1/deploy/applications/%69am?appNamespace=hanzo":                                                   200,
	} {
		if r := env.get(t, path, root); r.code != want {
			t.Errorf("GET %s: got %d, want %d: %.300s", path, r.code, want, r.body)
		}
	}
}

// withDigestHistory gives the fleet's digest-pinned app api a release of
// that digest in its history.
func withDigestHistory(t *testing.T, env *serverEnv) {
	t.Helper()
	for _, m := range fleetObjects(t) {
		if m["kind"] != "App" || m["metadata"].(map[string]any)["name"] != "api" {
			continue
		}
		st, _ := m["status"].(map[string]any)
		if st == nil {
			st = map[string]any{}
			m["status"] = st
		}
		st["upgradeHistory"] = []any{map[string]any{"tag": apiDigest, "startedAt": "2026-10-12T10:00:00Z", "completedAt": "2026-10-12T10:01:00Z", "result": "Succeeded"}}
		o, err := projection.Decode(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := env.store.Apply(projection.Change{Op: projection.Upsert, Object: o}); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("the fleet has no app api")
}

// TestCrawlAPI: every route of the table, with its parameters filled in,
// and fifty invented paths under /v1/: no API path ever answers the page;
// an unknown one is a JSON 404 naming the path, a known one with another
// method a 405 with Allow. The page is still served at / and its deep links.
func TestCrawlAPI(t *testing.T) {
	env, _ := newWriteEnv(t)
	withHub(t, env)
	root := env.token(t, userRoot, time.Hour)
	fill := strings.NewReplacer(":server", "in-cluster", ":name", "web", ":app", "web", ":rev", "v3.2.1", ":ref", "apps:Deployment:tenant-acme:web",
		":resource", "applications", ":action", "get", "*", "default/web")
	seen := map[string]bool{}
	for _, rt := range env.srv.Echo().Routes() {
		if !(strings.HasPrefix(rt.Path, "/v1") || strings.HasPrefix(rt.Path, "/api")) || strings.Contains(rt.Path, "stream") || rt.Method == "echo_route_not_found" {
			continue
		}
		path := fill.Replace(rt.Path)
		if seen[rt.Method+path] {
			continue
		}
		seen[rt.Method+path] = true
		r := env.do(t, rt.Method, path, root, []byte("{}"), "Content-Type", "application/json")
		if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") && r.code != http.StatusFound {
			t.Errorf("%s %s (route %s): Content-Type %q, want JSON (%d)", rt.Method, path, rt.Path, ct, r.code)
		}
		if r.code == http.StatusNotFound && strings.Contains(r.body, "no API route") {
			t.Errorf("%s %s: a routed path answered as unknown", rt.Method, path)
		}
		// Every other method of a routed path: 405 with Allow naming this one.
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
			if m == rt.Method || seen[m+path] {
				continue
			}
			r := env.do(t, m, path, root, nil)
			if r.code == http.StatusMethodNotAllowed {
				if allow := r.header.Get("Allow"); !strings.Contains(allow, rt.Method) {
					t.Errorf("%s %s: 405 with Allow %q, want it to name %s", m, path, allow, rt.Method)
				}
				errorMessage(t, r)
			} else if r.code == http.StatusNotFound || strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
				t.Errorf("%s %s: got %d %s, want 405 (the path is routed for %s)", m, path, r.code, r.header.Get("Content-Type"), rt.Method)
			}
		}
	}
	if len(seen) < 20 {
		t.Fatalf("crawled %d routes: the route table was not read", len(seen))
	}

	invented := []string{
		"/v1/", "/v1", "/v1/deploy", "/v1/deploy/", "/v1/paas", "/v1/paas/", "/v1/nope", "/v1/deploy/nope/at/all",
		"/v1/deploy/applications/iam/managed-resource", "/v1/deploy/applications/iam/event", "/v1/deploy/applications/iam/links/x",
		"/v1/deploy/applications/iam/resources", "/v1/deploy/applications/iam/resource/actions/v3", "/v1/deploy/applications/iam/manifest",
		"/v1/deploy/applications/iam/log", "/v1/deploy/applications/iam/pods/x/logs", "/v1/deploy/applications/web/revisions/v3.2.1",
		"/v1/deploy/applications/web/revisions/v3.2.1/chart-details", "/v1/deploy/applications/web/resource-tree/x",
		"/v1/deploy/applicatons", "/v1/deploy/application/web", "/v1/deploy/web/tree/x", "/v1/deploy/web/trees",
		"/v1/deploy/web/resource", "/v1/deploy/web/log", "/v1/deploy/web/logs/x", "/v1/deploy/clusters/in-cluster/invalidate-cache",
		"/v1/deploy/projects/default", "/v1/deploy/projects/default/detailed", "/v1/deploy/settings/plugins", "/v1/deploy/versions",
		"/v1/deploy/session", "/v1/deploy/session/userinfo/x", "/v1/deploy/account", "/v1/deploy/account/can-i",
		"/v1/deploy/stream", "/v1/deploy/stream/applications/web", "/v1/deploy/stream/applications/web/tree", "/v1/deploy/gitops/x",
		"/v1/paas/app", "/v1/paas/apps/web/x", "/v1/paas/apps/web/deploy/x", "/v1/paas/healthz", "/v1/paas/apps/web/history",
		"/v1/deploy/health/x", "/v1/deploy/index.html", "/v1/deploy/js/main.js", "/v1/index.html", "/v1/%2e%2e/index.html",
		"/api/v1/applicationsets", "/api/v1/repositories", "/api/v1/applications/web/nope", "/api/versions", "/api/v2/applications",
		"/api/", "/api",
	}
	if len(invented) < 50 {
		t.Fatalf("only %d invented paths", len(invented))
	}
	for _, p := range invented {
		for _, tok := range []string{root, ""} {
			r := env.get(t, p, tok, "Accept", "text/html", "Sec-Fetch-Mode", "navigate")
			if strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
				t.Errorf("GET %s: answered the page", p)
				continue
			}
			if r.code != http.StatusNotFound {
				t.Errorf("GET %s: got %d, want 404: %.200s", p, r.code, r.body)
				continue
			}
			if msg := errorMessage(t, r); !strings.Contains(msg, "no API route") {
				t.Errorf("GET %s: message %q, want it to say there is no such route", p, msg)
			}
		}
	}
	if r := env.get(t, "/v1/deploy/applications/iam/managed-resource", root); !strings.Contains(errorMessage(t, r), "/v1/deploy/applications/iam/managed-resource") {
		t.Errorf("the 404 does not name the path: %s", r.body)
	}

	for _, p := range []string{"/", "/?app=tenant-acme/web", "/?app=tenant-acme/web&tab=logs", "/?health=Degraded&q=web"} {
		r := env.get(t, p, "", "Accept", "text/html")
		if r.code != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || !strings.Contains(r.body, "/js/main.js") {
			t.Errorf("GET %s: got %d %s, want the page", p, r.code, r.header.Get("Content-Type"))
		}
	}
}

// TestNoStore: the page and every answer about a signed-in caller are kept
// out of caches (the back/forward cache included); answers with an ETag
// keep it and still revalidate.
func TestNoStore(t *testing.T) {
	env := newServerEnv(t)
	withHub(t, env)
	root := env.token(t, userRoot, time.Hour)
	for _, p := range []string{"/", "/?app=tenant-acme/web", "/js/main.js", "/v1/deploy/session/userinfo", "/v1/deploy/applications",
		"/v1/deploy/applications/web", "/v1/deploy/applications/web/resource-tree", "/v1/deploy/web/tree", "/v1/deploy/settings",
		"/v1/paas/apps", "/v1/deploy/nosuch"} {
		r := env.get(t, p, root)
		if cc := r.header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("GET %s: Cache-Control %q, want no-store", p, cc)
		}
	}
	r := env.get(t, "/v1/deploy/applications", root)
	etag := r.header.Get("Etag")
	if etag == "" {
		t.Fatal("the list has no ETag")
	}
	if r := env.get(t, "/v1/deploy/applications", root, "If-None-Match", etag); r.code != http.StatusNotModified || r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("revalidation: got %d with Cache-Control %q, want 304 and no-store", r.code, r.header.Get("Cache-Control"))
	}
	st := statusOf(t, env, paramRoute{method: http.MethodGet, stream: true}, "/v1/deploy/stream/applications", root)
	if cc := st.header.Get("Cache-Control"); st.code != http.StatusOK || cc != "no-store" {
		t.Errorf("stream: got %d with Cache-Control %q, want no-store", st.code, cc)
	}
}

// TestSiteRowName: a static site is served under its row's name by the
// list, the detail, both trees and the tree stream; its Middleware's name
// is no row.
func TestSiteRowName(t *testing.T) {
	env := newServerEnv(t)
	withHub(t, env)
	raw, err := os.ReadFile("../projection/testdata/sites.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatal(err)
		}
		o, err := projection.Decode(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := env.store.Apply(projection.Change{Op: projection.Upsert, Object: o}); err != nil {
			t.Fatal(err)
		}
	}
	root := env.token(t, userRoot, time.Hour)
	r := env.get(t, "/v1/deploy/applications?appNamespace=hanzo&fields=items.metadata.name", root)
	for _, want := range []string{`"docs"`, `"status"`, `"web-static"`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the list has no row %s: %s", want, r.body)
		}
	}
	if strings.Contains(r.body, `"docs-static"`) || strings.Contains(r.body, `"status-static"`) {
		t.Errorf("the list names a site after its Middleware: %s", r.body)
	}
	for path, want := range map[string]int{
		"/v1/deploy/applications/docs?appNamespace=hanzo":               200,
		"/v1/deploy/applications/docs/resource-tree?appNamespace=hanzo": 200,
		"/v1/deploy/docs/tree?namespace=hanzo":                          200,
		"/v1/deploy/applications/docs-static?appNamespace=hanzo":        404,
		"/v1/deploy/applications/web-static?appNamespace=hanzo":         200,
	} {
		r := env.get(t, path, root)
		if r.code != want {
			t.Errorf("GET %s: got %d, want %d: %.200s", path, r.code, want, r.body)
		}
		if want == 200 && strings.Contains(path, "tree") && !strings.Contains(r.body, `"docs-static"`) {
			t.Errorf("GET %s: the Middleware's node is not docs-static: %.300s", path, r.body)
		}
	}
	pr := paramRoute{method: http.MethodGet, stream: true}
	if st := statusOf(t, env, pr, "/v1/deploy/stream/applications/docs/resource-tree?appNamespace=hanzo", root); st.code != http.StatusOK {
		t.Errorf("the tree stream of docs: %d %s", st.code, st.body)
	}
}

// TestEveryParamRouteRefusesBadEscapes: every route with a path parameter,
// whoever mounted it and under whichever prefix, answers a parameter that
// is not valid percent-encoding with a 400 naming it: the decoding is one
// middleware, not a table kept in step with the routes.
func TestEveryParamRouteRefusesBadEscapes(t *testing.T) {
	env, _ := newWriteEnv(t)
	root := env.token(t, userRoot, time.Hour)
	checked := 0
	for _, r := range env.srv.Echo().Routes() {
		segs := strings.Split(r.Path, "/")
		for i, seg := range segs {
			if !strings.HasPrefix(seg, ":") && seg != "*" {
				continue
			}
			name := strings.TrimPrefix(seg, ":")
			if seg == "*" {
				if r.Path == "/*" || i != len(segs)-1 {
					continue // the page's fallback, not an API route
				}
				name = "subresource"
			}
			raw := slices.Clone(segs)
			for j, s := range raw {
				if strings.HasPrefix(s, ":") || s == "*" {
					raw[j] = "x"
				}
			}
			raw[i] = "x%zz"
			path := strings.Join(raw, "/")
			req := httptest.NewRequest(r.Method, strings.ReplaceAll(path, "%zz", "zz"), nil)
			req.URL.RawPath = path
			req.Header.Set("Authorization", "Bearer "+root)
			rec := httptest.NewRecorder()
			env.srv.Handler().ServeHTTP(rec, req)
			var body struct{ Message string }
			_ = json.Unmarshal(rec.Body.Bytes(), &body)
			named := r.Method == http.MethodHead || strings.Contains(body.Message, "path parameter "+name+" ") // HEAD answers no body
			if rec.Code != http.StatusBadRequest || !named {
				t.Errorf("%s %s with %s: got %d %.200s, want a 400 naming %s", r.Method, r.Path, path, rec.Code, rec.Body, name)
			}
			checked++
		}
	}
	if checked < 40 {
		t.Fatalf("only %d route parameters checked: the route table was not read", checked)
	}
	t.Logf("%d route parameters checked", checked)
}
