package web

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strings"
	"testing"
)

func staticFS(t *testing.T) fs.FS {
	t.Helper()
	root, err := fs.Sub(files, "static")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func read(t *testing.T, root fs.FS, name string) string {
	t.Helper()
	b, err := fs.ReadFile(root, name)
	if err != nil {
		t.Fatalf("embedded %s: %v", name, err)
	}
	return string(b)
}

// TestEmbeddedFiles: the page's files are embedded.
func TestEmbeddedFiles(t *testing.T) {
	root := staticFS(t)
	for _, name := range []string{"index.html", "favicon.svg", "css/app.css", "js/main.js", "js/api.js", "js/fleet.js",
		"js/list.js", "js/detail.js", "js/tree.js", "js/stream.js", "js/board.js"} {
		if fi, err := fs.Stat(root, name); err != nil || fi.Size() == 0 {
			t.Errorf("embedded %s: %v (want a non-empty file)", name, err)
		}
	}
}

var (
	refAttr     = regexp.MustCompile(`(?i)\s(?:src|href)\s*=\s*"([^"]*)"`)
	scriptTag   = regexp.MustCompile(`(?is)<script\b([^>]*)>(.*?)</script>`)
	jsImport    = regexp.MustCompile(`(?m)(?:^import\s[^;]*?from\s*|^import\s*|import\()\s*'([^']+)'`)
	cssURL      = regexp.MustCompile(`url\(\s*['"]?([^'")]+)`)
	unsafeSinks = regexp.MustCompile(`\.innerHTML\b|\.outerHTML\b|insertAdjacentHTML|document\.write|\beval\(|new Function\b`)
)

// local reports whether a reference stays on this origin and names an
// embedded file (a path from the root; the page's own link to "/" is the
// page).
func local(t *testing.T, root fs.FS, from, ref string) {
	t.Helper()
	if strings.Contains(ref, "//") || strings.Contains(ref, ":") {
		t.Errorf("%s references %q: only files of this origin are allowed (no CDN, no scheme)", from, ref)
		return
	}
	if ref == "/" || strings.HasPrefix(ref, "#") {
		return
	}
	if !strings.HasPrefix(ref, "/") {
		ref = path.Join(path.Dir("/"+from), ref)
	}
	name := strings.TrimPrefix(ref, "/")
	if _, err := fs.Stat(root, name); err != nil {
		t.Errorf("%s references %q, which is not embedded", from, ref)
	}
}

// TestIndexReferencesOnlyLocalFiles: index.html, the modules it loads and
// the stylesheet reference embedded files only, and nothing is inline (the
// CSP allows no inline script or style).
func TestIndexReferencesOnlyLocalFiles(t *testing.T) {
	root := staticFS(t)
	index := read(t, root, "index.html")
	refs := refAttr.FindAllStringSubmatch(index, -1)
	if len(refs) < 3 {
		t.Fatalf("index.html references %d files, want the stylesheet, the script and the icon", len(refs))
	}
	for _, m := range refs {
		local(t, root, "index.html", m[1])
	}
	for _, m := range scriptTag.FindAllStringSubmatch(index, -1) {
		if strings.TrimSpace(m[2]) != "" || !strings.Contains(m[1], "src=") {
			t.Errorf("index.html has an inline script: %s", m[0])
		}
	}
	if strings.Contains(strings.ToLower(index), "<style") || regexp.MustCompile(`(?i)\sstyle\s*=`).MatchString(index) {
		t.Error("index.html has an inline style")
	}
	if regexp.MustCompile(`(?i)\son[a-z]+\s*=`).MatchString(index) {
		t.Error("index.html has an inline event handler")
	}

	// Every module import resolves to an embedded module.
	err := fs.WalkDir(root, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch path.Ext(name) {
		case ".js":
			src := read(t, root, name)
			for _, m := range jsImport.FindAllStringSubmatch(src, -1) {
				local(t, root, name, m[1])
			}
			if loc := unsafeSinks.FindString(src); loc != "" {
				t.Errorf("%s uses %s: build elements with the DOM API", name, loc)
			}
		case ".css":
			for _, m := range cssURL.FindAllStringSubmatch(read(t, root, name), -1) {
				if !strings.HasPrefix(m[1], "data:") {
					local(t, root, name, m[1])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestHandler: files are served with their types and the CSP; any other
// path (an app's page) gets index.html.
func TestHandler(t *testing.T) {
	h := Handler()
	for _, tc := range []struct{ path, typ, contains string }{
		{"/", "text/html", `src="/js/main.js"`},
		{"/js/main.js", "text/javascript", "import"},
		{"/css/app.css", "text/css", ":root"},
		{"/some/app/page", "text/html", `src="/js/main.js"`},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		body, _ := io.ReadAll(rec.Result().Body)
		if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), tc.typ) || !strings.Contains(string(body), tc.contains) {
			t.Errorf("GET %s: %d %q, want 200 %s containing %q", tc.path, rec.Code, rec.Header().Get("Content-Type"), tc.typ, tc.contains)
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", tc.path, csp)
		}
	}
}
