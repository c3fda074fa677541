package handlers

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hanzoai/deploy/auth/authtest"
	"github.com/hanzoai/deploy/fleet"
	"github.com/hanzoai/deploy/projection"
)

// benchStore holds 10,000 Apps (about 200,000 objects): buckets of 500
// Apps, the first four platform namespaces, the rest one tenant each.
func benchStore(b *testing.B) *projection.Store {
	b.Helper()
	var apps []fleet.App
	for i, a := range fleet.Generate(1, 10_000) {
		if a.Kind != fleet.KindApp {
			continue
		}
		switch bucket := i / 500; {
		case bucket < 4:
			a.Namespace, a.Org = []string{"hanzo", "hanzo-testnet"}[bucket%2], ""
		default:
			a.Org = fmt.Sprintf("org%02d", bucket)
			a.Namespace = "tenant-" + a.Org
		}
		a.Name = fmt.Sprintf("%s-%05d", a.Name, i)
		apps = append(apps, a)
	}
	s := projection.NewStore(projection.DefaultConfig())
	objs := fleet.RenderAll(apps)
	for i := 0; i < len(objs); i += 4096 {
		var batch []projection.Change
		for _, u := range objs[i:min(i+4096, len(objs))] {
			o, err := projection.Decode(u.Object)
			if err != nil {
				b.Fatal(err)
			}
			batch = append(batch, projection.Change{Op: projection.Upsert, Object: o})
		}
		if _, err := s.Apply(batch...); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("fleet: %d apps, %d objects", s.Snapshot().Len(), len(objs))
	return s
}

// BenchmarkListRoute measures GET /v1/deploy/applications through the whole
// handler stack (authentication, scope, filters, assembly, cache): the full
// list of a SuperAdmin and the 500-app list of a tenant member, plain and
// gzipped, cached (same revision) and cold (a new revision before every
// request, so the response is assembled again; only the one changed App is
// encoded again).
func BenchmarkListRoute(b *testing.B) {
	env := newServerEnv(&testing.T{})
	env.store = benchStore(b)
	env.srv.d.Snapshots = env.store
	h := env.srv.Handler()
	tokens := map[string]string{
		"full":   env.token(&testing.T{}, userRoot, time.Hour),
		"tenant": env.token(&testing.T{}, authtest.User{Subject: "u-t", Extra: map[string]any{"owner": "org05"}}, time.Hour),
	}
	toggle := 0
	bump := func() {
		toggle++
		o := &projection.Object{Kind: projection.KindConfigMap, Namespace: "hanzo", Name: "bench-bump", UID: "bench-bump",
			ResourceVersion: fmt.Sprint(toggle)}
		app := &projection.Object{Kind: projection.KindApp, Namespace: "hanzo", Name: "bench-bump", UID: "bench-bump-app",
			ResourceVersion: fmt.Sprint(toggle), Spec: &projection.AppSpec{Repository: "r", Tag: fmt.Sprintf("v1.0.%d", toggle), Replicas: 1}}
		if _, err := env.store.Apply(projection.Change{Op: projection.Upsert, Object: o}, projection.Change{Op: projection.Upsert, Object: app}); err != nil {
			b.Fatal(err)
		}
	}
	for _, who := range []string{"full", "tenant", "full-gzip", "tenant-gzip"} {
		for _, mode := range []string{"cached", "cold"} {
			b.Run(who+"/"+mode, func(b *testing.B) {
				req := httptest.NewRequest(http.MethodGet, "/v1/deploy/applications", nil)
				req.Header.Set("Authorization", "Bearer "+tokens[strings.TrimSuffix(who, "-gzip")])
				if strings.HasSuffix(who, "-gzip") {
					req.Header.Set("Accept-Encoding", "gzip")
				}
				serve := func() int {
					w := &countingWriter{header: http.Header{}}
					h.ServeHTTP(w, req)
					if w.code != http.StatusOK {
						b.Fatalf("status %d", w.code)
					}
					return w.n
				}
				size := serve() // encode every row once
				lat := make([]time.Duration, 0, b.N)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if mode == "cold" {
						b.StopTimer()
						bump()
						b.StartTimer()
					}
					start := time.Now()
					serve()
					lat = append(lat, time.Since(start))
				}
				b.StopTimer()
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
				b.ReportMetric(float64(size)/1e6, "MB/response")
			})
		}
	}
}

// BenchmarkAppRoute measures GET /api/v1/applications/<name> through the
// whole handler stack, as a member of the App's org asks for it (Argo CD's
// App page): authentication, scope, the lookup and the cached body.
func BenchmarkAppRoute(b *testing.B) {
	env := newServerEnv(&testing.T{})
	env.store = benchStore(b)
	env.srv.d.Snapshots = env.store
	h := env.srv.Handler()
	token := env.token(&testing.T{}, authtest.User{Subject: "u-t", Extra: map[string]any{"owner": "org05"}}, time.Hour)
	var app *projection.App
	for a := range env.store.Snapshot().Apps() {
		if a.Namespace == "tenant-org05" {
			app = a
			break
		}
	}
	if app == nil {
		b.Fatal("no App in tenant-org05")
	}
	req := httptest.NewRequest(http.MethodGet, "/api/v1/applications/"+app.Name+"?appNamespace="+app.Namespace, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	serve := func() {
		w := &countingWriter{header: http.Header{}}
		h.ServeHTTP(w, req)
		if w.code != http.StatusOK {
			b.Fatalf("status %d", w.code)
		}
	}
	serve()
	b.ReportAllocs()
	for b.Loop() {
		serve()
	}
}

// countingWriter is a ResponseWriter that keeps the status and counts the
// body, as a socket would take it, without storing it.
type countingWriter struct {
	header http.Header
	code   int
	n      int
}

func (w *countingWriter) Header() http.Header { return w.header }
func (w *countingWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.n += len(b)
	return len(b), nil
}
func (w *countingWriter) WriteHeader(code int) { w.code = code }
