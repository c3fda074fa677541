package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
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
		lq, err := parseListQuery(q, nil)
		if err != nil {
			var ae *apiError
			if !asAPIError(err, &ae) || ae.Code != http.StatusBadRequest {
				t.Fatalf("parseListQuery(%q, nil): %v, want a 400", raw, err)
			}
			return
		}
		lq2, err := parseListQuery(q, nil)
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

// FuzzDecodedParams: any value of a path parameter, sent percent-encoded
// once, reaches the handler as that value: no panic, never a 5xx, always
// the JSON error shape when refused; a name that is no DNS-1123 label is a
// 400, and a value decoded twice is never taken for the plain one.
func FuzzDecodedParams(f *testing.F) {
	for _, s := range []string{"web", "iam", "%69am", "%2540", "a/b", "v3.2.1", "v3.1.0@sha256:4f2b", ":Service:hanzo:iam",
		"apps:Deployment:tenant-acme:web", "..", "%", "%zz", "\x00", "WEB", strings.Repeat("a", 70)} {
		f.Add(s)
	}
	env := newServerEnv(f)
	root := env.token(f, userRoot, time.Hour)
	h := env.srv.Handler()
	f.Fuzz(func(t *testing.T, v string) {
		if d, err := decodeParam("name", url.PathEscape(v)); err != nil || d != v {
			t.Fatalf("decodeParam(PathEscape(%q)) = %q, %v", v, d, err)
		}
		if _, err := decodeParam("name", v); err != nil {
			var ae *apiError
			if !asAPIError(err, &ae) || ae.Code != http.StatusBadRequest || !strings.Contains(ae.Message, "name") {
				t.Fatalf("decodeParam(%q): %v, want a 400 naming the parameter", v, err)
			}
		}
		for _, format := range []string{"/v1/deploy/applications/%s", "/v1/deploy/%s/tree", "/v1/paas/apps/%s?env=main",
			"/v1/deploy/web/resource/%s", "/v1/deploy/applications/web/revisions/%s/metadata"} {
			req := httptest.NewRequest(http.MethodGet, fmt.Sprintf(format, url.PathEscape(v)), nil)
			req.Header.Set("Authorization", "Bearer "+root)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Fatalf("GET %s: %d %s", req.URL, rec.Code, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("GET %s: Content-Type %q", req.URL, ct)
			}
			if rec.Code >= 400 {
				var b errorBody
				if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || b.Code != rec.Code || b.Message == "" {
					t.Fatalf("GET %s: error body %s", req.URL, rec.Body)
				}
			}
			if strings.HasPrefix(format, "/v1/deploy/applications/%s") && rec.Code == http.StatusOK && len(validation.IsDNS1123Label(v)) > 0 {
				t.Fatalf("GET %s: the name %q is no DNS-1123 label, yet answered 200", req.URL, v)
			}
		}
		// Decoded once only: "%77eb" sent escaped is the literal "%77eb".
		if strings.Contains(v, "%") {
			req := httptest.NewRequest(http.MethodGet, "/v1/deploy/applications/"+url.PathEscape(v), nil)
			req.Header.Set("Authorization", "Bearer "+root)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code == http.StatusOK {
				t.Fatalf("GET %s: a name holding %% answered 200: decoded twice", req.URL)
			}
		}
	})
}

// FuzzWebhook: verifying and parsing any delivery never panics; a delivery
// verifies only when every signature it carries is the body's HMAC (an
// arbitrary signature never does); whatever is refused is a 401 or 400; a
// parsed push has a bounded, non-empty ref.
func FuzzWebhook(f *testing.F) {
	push := `{"ref":"refs/heads/main","after":"3f1c9a7e"}`
	f.Add([]byte(push), githubSignature(push), "", "push", true)
	f.Add([]byte(push), "", giteaSignature(push), "push", true)
	f.Add([]byte(push), "sha256=00", "", "push", false)
	f.Add([]byte(`{"ref":`), githubSignature(`{"ref":`), "", "", true)
	f.Add([]byte(`{"zen":"x"}`), "", "", "ping", false)
	f.Add([]byte(`null`), "sha256=", "zz", "PUSH", false)
	f.Fuzz(func(t *testing.T, body []byte, github, gitea, event string, sign bool) {
		h := http.Header{}
		if sign {
			// Sign correctly, in one header or both.
			github, gitea = githubSignature(string(body)), ""
			if len(body)%2 == 1 {
				gitea = giteaSignature(string(body))
			}
		}
		if github != "" {
			h.Set(headerGitHubSignature, github)
		}
		if gitea != "" {
			h.Set(headerGiteaSignature, gitea)
		}
		if event != "" {
			h.Set(headerGitHubEvent, event)
		}
		err := verifyWebhook([]byte(testWebhookSecret), h, body)
		var ae *apiError
		switch {
		case sign && err != nil:
			t.Fatalf("a correctly signed delivery was refused: %v", err)
		case err != nil && (!asAPIError(err, &ae) || ae.Code != http.StatusUnauthorized):
			t.Fatalf("refusal %v, want a 401", err)
		case err == nil && !sign:
			want := giteaSignature(string(body))
			if (github != "" && !strings.EqualFold(strings.TrimSpace(github), "sha256="+want)) ||
				(gitea != "" && !strings.EqualFold(strings.TrimSpace(gitea), want)) || (github == "" && gitea == "") {
				t.Fatalf("github %q gitea %q verified a body they do not sign", github, gitea)
			}
		}
		_ = webhookEvent(h)
		p, err := parsePush(body)
		if err != nil {
			if !asAPIError(err, &ae) || ae.Code != http.StatusBadRequest {
				t.Fatalf("parse refusal %v, want a 400", err)
			}
			return
		}
		if p.Ref == "" || len(p.Ref) > maxRefLen {
			t.Fatalf("parsed ref %q", p.Ref)
		}
	})
}
