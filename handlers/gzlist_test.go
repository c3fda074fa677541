package handlers

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hanzoai/deploy/projection"
)

func TestCRC32Combine(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 2000 {
		a := make([]byte, r.IntN(300))
		b := make([]byte, r.IntN(300))
		if i%50 == 0 {
			b = make([]byte, 70_000+r.IntN(70_000)) // lengths past 16 bits
		}
		for j := range a {
			a[j] = byte(r.Uint32())
		}
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		want := crc32.ChecksumIEEE(append(append([]byte{}, a...), b...))
		if got := crc32Combine(crc32.ChecksumIEEE(a), crc32.ChecksumIEEE(b), int64(len(b))); got != want {
			t.Fatalf("len(a)=%d len(b)=%d: combined %08x, want %08x", len(a), len(b), got, want)
		}
	}
}

// getGzipList fetches path taking gzip, checks it is one gzip member whose
// checksum and length hold, and returns the decoded body.
func getGzipList(t *testing.T, env *serverEnv, path, token string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, env.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("%s: %d, Content-Encoding %q", path, resp.StatusCode, resp.Header.Get("Content-Encoding"))
	}
	raw, _ := io.ReadAll(resp.Body)
	if resp.ContentLength != int64(len(raw)) {
		t.Fatalf("%s: Content-Length %d for a body of %d bytes", path, resp.ContentLength, len(raw))
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	zr.Multistream(false)
	plain, err := io.ReadAll(zr) // fails on a bad checksum or length
	if err != nil {
		t.Fatalf("%s: decoding: %v", path, err)
	}
	if rest, _ := io.ReadAll(zr); len(rest) != 0 {
		t.Fatalf("%s: more than one gzip member", path)
	}
	return string(plain)
}

// gzipRuns is each compressed run the cached gzip lists hold, by list and
// run name.
func gzipRuns(env *serverEnv) map[string]*gzRun {
	runs := map[string]*gzRun{}
	for _, k := range env.srv.cache.lru.Keys() {
		if cb, ok := env.srv.cache.lru.Peek(k); ok && cb.list != nil {
			for name, at := range cb.list.runs {
				runs[k+"|"+name] = at.run
			}
		}
	}
	return runs
}

// recompressed counts the runs of after that are not before's: compressed
// since.
func recompressed(before, after map[string]*gzRun) int {
	n := 0
	for k, r := range after {
		if before[k] != r {
			n++
		}
	}
	return n
}

// TestGzipListIsSplicedFromRuns: every scope and filter decodes to exactly
// the plain list, and a change in one namespace compresses that namespace's
// run again and no other.
func TestGzipListIsSplicedFromRuns(t *testing.T) {
	env := newServerEnv(t)
	callers := map[string]string{
		"superadmin":      env.token(t, userRoot, time.Hour),
		"acme-member":     env.token(t, userAlice, time.Hour),
		"globex-orgadmin": env.token(t, userGlobexAdmin, time.Hour),
	}
	queries := []string{"", "?appNamespace=tenant-acme", "?name=web", "?projects=default", "?selector=app.kubernetes.io%2Fpart-of%3Dshop"}
	check := func() {
		t.Helper()
		for who, tok := range callers {
			for _, q := range queries {
				plain := env.get(t, "/v1/deploy/applications"+q, tok)
				if plain.code != http.StatusOK {
					t.Fatalf("%s %s: %d %s", who, q, plain.code, plain.body)
				}
				if got := getGzipList(t, env, "/v1/deploy/applications"+q, tok); got != plain.body {
					t.Fatalf("%s %s: the gzip list decodes to\n%s\nwant\n%s", who, q, got, plain.body)
				}
			}
		}
	}
	check()
	nss := env.store.Snapshot().Namespaces()
	if len(nss) < 3 {
		t.Fatalf("the fixture has %d namespaces; the test needs several", len(nss))
	}
	// The superadmin's unfiltered list: one run per namespace, plus the CD
	// Applications.
	root := callers["superadmin"]
	before := gzipRuns(env)
	getGzipList(t, env, "/v1/deploy/applications", root)
	if n := recompressed(before, gzipRuns(env)); n != 0 {
		t.Fatalf("a second request compressed %d runs again", n)
	}
	o, _ := projection.Decode(map[string]any{"apiVersion": "hanzo.ai/v1", "kind": "App",
		"metadata": map[string]any{"name": "gz-new", "namespace": nss[0].Namespace, "uid": "u-gz-new"},
		"spec":     map[string]any{"image": map[string]any{"repository": "ghcr.io/hanzoai/gz", "tag": "v1.0.0"}}})
	if _, err := env.store.Apply(projection.Change{Op: projection.Upsert, Object: o}); err != nil {
		t.Fatal(err)
	}
	before = gzipRuns(env)
	body := getGzipList(t, env, "/v1/deploy/applications", root)
	if !strings.Contains(body, `"name":"gz-new"`) {
		t.Fatal("the new App is missing from the gzip list")
	}
	after := gzipRuns(env)
	if n := recompressed(before, after); n != 1 {
		t.Fatalf("a change in namespace %s compressed %d runs, want 1", nss[0].Namespace, n)
	}
	if len(after) != len(before) {
		t.Fatalf("the cache holds %d runs after the change, %d before: a run's new version replaces its old one", len(after), len(before))
	}
	check()
}

// TestGzipListAssemblyIsKeptPerRevision: a second request at the same
// revision is written from the list assembled for the first: it looks up
// no run and combines no checksum.
func TestGzipListAssemblyIsKeptPerRevision(t *testing.T) {
	env := newServerEnv(t)
	root := env.token(t, userRoot, time.Hour)
	first := getGzipList(t, env, "/v1/deploy/applications", root)
	lists := map[string]*gzList{}
	for _, k := range env.srv.cache.lru.Keys() {
		if cb, ok := env.srv.cache.lru.Peek(k); ok && cb.list != nil {
			lists[k] = cb.list
		}
	}
	if len(lists) != 1 {
		t.Fatalf("the first request cached %d gzip lists, want 1", len(lists))
	}
	if got := getGzipList(t, env, "/v1/deploy/applications", root); got != first {
		t.Fatalf("the second list decodes to\n%s\nwant\n%s", got, first)
	}
	for k, l := range lists {
		if cb, ok := env.srv.cache.lru.Peek(k); !ok || cb.list != l {
			t.Fatal("a second request at the same revision assembled the list again")
		}
	}
}

// TestGzipListOfManyNamespaces: a fleet of more namespaces than the
// response cache has entries (500 clusters hold thousands) still
// compresses only the run of the namespace that changed.
func TestGzipListOfManyNamespaces(t *testing.T) {
	env := newServerEnv(t)
	root := env.token(t, userRoot, time.Hour)
	const namespaces = 400
	for i := range namespaces {
		ns := fmt.Sprintf("tenant-gz%03d", i)
		o, err := projection.Decode(map[string]any{"apiVersion": "hanzo.ai/v1", "kind": "App",
			"metadata": map[string]any{"name": "web", "namespace": ns, "uid": "u-" + ns},
			"spec":     map[string]any{"image": map[string]any{"repository": "ghcr.io/hanzoai/gz", "tag": "v1.0.0"}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := env.store.Apply(projection.Change{Op: projection.Upsert, Object: o}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(env.store.Snapshot().Namespaces()); n <= 256 {
		t.Fatalf("the fleet has %d namespaces; the test needs more than the cache's 256 entries", n)
	}
	getGzipList(t, env, "/v1/deploy/applications", root)
	before := gzipRuns(env)
	o, err := projection.Decode(map[string]any{"apiVersion": "hanzo.ai/v1", "kind": "App",
		"metadata": map[string]any{"name": "api", "namespace": "tenant-gz007", "uid": "u-gz007-api"},
		"spec":     map[string]any{"image": map[string]any{"repository": "ghcr.io/hanzoai/gz", "tag": "v1.0.0"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.store.Apply(projection.Change{Op: projection.Upsert, Object: o}); err != nil {
		t.Fatal(err)
	}
	got := getGzipList(t, env, "/v1/deploy/applications", root)
	if plain := env.get(t, "/v1/deploy/applications", root); got != plain.body {
		t.Fatal("the gzip list does not decode to the plain list")
	}
	after := gzipRuns(env)
	if n := recompressed(before, after); n != 1 {
		t.Fatalf("a change in one of %d namespaces compressed %d runs, want 1", len(after), n)
	}
}
