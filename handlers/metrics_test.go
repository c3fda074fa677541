package handlers

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// family returns the gathered metric family called name, nil when absent.
func family(t *testing.T, env *serverEnv, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := env.metrics.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	return nil
}

// labelValues are the distinct values of label across a family's series.
func labelValues(mf *dto.MetricFamily, label string) []string {
	seen := map[string]bool{}
	for _, m := range mf.GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == label {
				seen[lp.GetValue()] = true
			}
		}
	}
	var out []string
	for v := range seen {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// counterValue is the value of the series of mf whose labels include want.
func counterValue(mf *dto.MetricFamily, want map[string]string) float64 {
	if mf == nil {
		return 0
	}
	total := 0.0
series:
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue series
			}
		}
		total += m.GetCounter().GetValue()
	}
	return total
}

// TestRandomPathsAddNoSeries: 10,000 requests to distinct random paths (and
// made-up methods) add no label value beyond the route templates and
// "unmatched": HTTP metrics never take a value from the request.
func TestRandomPathsAddNoSeries(t *testing.T) {
	env := newServerEnv(t)
	root := env.token(t, userRoot, time.Hour)
	// Every route answered once, so the series before the flood are the
	// ones routes make.
	for _, p := range []string{"/v1/deploy/health", "/v1/deploy/applications", "/v1/deploy/applications/web", "/nothing-here"} {
		env.get(t, p, root)
	}
	before := family(t, env, "deployd_http_requests_total")
	routesBefore := labelValues(before, "route")
	seriesBefore := len(before.GetMetric())

	rng := rand.New(rand.NewPCG(1, 2))
	word := func() string { return fmt.Sprintf("%x", rng.Uint64()) }
	prefixes := []string{"/", "/v1/", "/v1/deploy/", "/v1/deploy/applications/", "/api/v1/", "/v1/paas/apps/", "/metrics/"}
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for i := range 10000 {
		path := prefixes[i%len(prefixes)] + word() + "/" + word()
		method := http.MethodGet
		if i%10 == 0 {
			method = "X" + strings.ToUpper(word()[:6])
		}
		req, err := http.NewRequest(method, env.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+root)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		resp.Body.Close()
		if strings.HasPrefix(path, "/metrics/") && resp.StatusCode < 400 {
			t.Fatalf("%s %s: got %d, want a refusal", method, path, resp.StatusCode)
		}
	}

	after := family(t, env, "deployd_http_requests_total")
	for _, label := range []string{"route", "method", "code"} {
		if n := len(labelValues(after, label)); n > 40 {
			t.Errorf("label %s has %d values after the flood, want a handful: %v", label, n, labelValues(after, label))
		}
	}
	templates := map[string]bool{"unmatched": true}
	for _, r := range env.srv.Echo().Routes() {
		templates[r.Path] = true
	}
	for _, v := range labelValues(after, "route") {
		if !templates[v] {
			t.Errorf("route label %q is not a route template", v)
		}
	}
	for _, v := range labelValues(after, "method") {
		if v == "other" {
			continue
		}
		if v != strings.ToUpper(v) || len(v) > 7 || strings.HasPrefix(v, "X") {
			t.Errorf("method label %q came from a request", v)
		}
	}
	// The flood adds at most the few series of its (route, method, code)
	// combinations: never one per path.
	if added := len(after.GetMetric()) - seriesBefore; added > 30 {
		t.Errorf("the flood added %d series (before %d, routes before %v, after %v)", added, seriesBefore, routesBefore, labelValues(after, "route"))
	}
	if got := counterValue(after, nil); got < 10000 {
		t.Errorf("counted %v requests, want at least 10000", got)
	}
}

// TestMetricsNotOnPublicPort: /metrics (and below it) on the public server
// is a JSON 404 for every method, never the page and never the exposition.
func TestMetricsNotOnPublicPort(t *testing.T) {
	env := newServerEnv(t)
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost} {
		if r := env.do(t, m, "/metrics/", "", nil); r.code != http.StatusNotFound {
			t.Fatalf("%s /metrics/: got %d, want 404", m, r.code)
		}
		r := env.do(t, m, "/metrics", "", nil)
		if r.code != http.StatusNotFound {
			t.Fatalf("%s /metrics: got %d, want 404", m, r.code)
		}
		if m == http.MethodGet && (!strings.Contains(errorMessage(t, r), "DEPLOYD_METRICS_LISTEN") || strings.Contains(r.body, "# HELP")) {
			t.Errorf("GET /metrics: got %s, want a JSON 404 naming the metrics listener", r.body)
		}
	}
}

// TestRefusalsAndSyncsCounted: refusals count by reason (every SuperAdmin
// gate's alike), and a sync made
// through deployd counts in argocd_app_sync_total with Argo CD's labels.
func TestRefusalsAndSyncsCounted(t *testing.T) {
	env, _ := newWriteEnv(t)
	alice := env.token(t, userAlice, time.Hour)
	root := env.token(t, userRoot, time.Hour)
	env.get(t, "/v1/deploy/applications", "")
	env.get(t, "/v1/deploy/applications", "not-a-token")
	// A member at each SuperAdmin gate: a write, the engine's, an admin read.
	env.post(t, "/v1/deploy/applications/web/sync", alice, "{}")
	env.post(t, "/v1/deploy/reconcile", alice, "")
	env.post(t, "/v1/deploy/gitops/suspend", alice, "")
	env.get(t, "/v1/deploy/gitops", alice)
	refusals := family(t, env, "deployd_auth_refusals_total")
	for reason, want := range map[string]float64{"signin_required": 1, "bearer_refused": 1, "not_superadmin": 4} {
		if got := counterValue(refusals, map[string]string{"reason": reason}); got != want {
			t.Errorf("refusals %s: got %v, want %v", reason, got, want)
		}
	}
	r := env.post(t, "/v1/deploy/applications/web/sync", root, "{}")
	if r.code != http.StatusOK {
		t.Fatalf("sync: %d %s", r.code, r.body)
	}
	syncs := family(t, env, "argocd_app_sync_total")
	if got := counterValue(syncs, map[string]string{"name": "web", "namespace": "tenant-acme", "project": "storefront", "dest_server": "https://kubernetes.default.svc", "phase": "Succeeded"}); got != 1 {
		t.Errorf("argocd_app_sync_total for tenant-acme/web Succeeded: got %v, want 1 (%v)", got, syncs)
	}
}
