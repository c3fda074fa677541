package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/projection"
)

// scrapeMetrics reads the metrics listener and parses the exposition.
func scrapeMetrics(t *testing.T, env *planeEnv) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Get(env.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", env.MetricsURL, resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse the exposition: %v", err)
	}
	return fams
}

type healthSync struct{ Health, Sync string }

// appInfo is argocd_app_info as namespace/name → health and sync; a second
// series for one App fails the test.
func appInfo(t *testing.T, fams map[string]*dto.MetricFamily) map[string]healthSync {
	t.Helper()
	out := map[string]healthSync{}
	for _, s := range fams["argocd_app_info"].GetMetric() {
		l := map[string]string{}
		for _, lp := range s.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		key := l["namespace"] + "/" + l["name"]
		if _, dup := out[key]; dup {
			t.Errorf("argocd_app_info has two series for %s", key)
		}
		out[key] = healthSync{l["health_status"], l["sync_status"]}
	}
	return out
}

// listed is GET /v1/deploy/applications as a SuperAdmin, as namespace/name
// → health and sync.
func listed(t *testing.T, env *planeEnv, token string) map[string]healthSync {
	t.Helper()
	r := env.send(t, nil, http.MethodGet, "/v1/deploy/applications", token, "")
	if r.code != http.StatusOK {
		t.Fatalf("list: %d %s", r.code, r.body)
	}
	var list struct {
		Items []projection.Application `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.body), &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]healthSync{}
	for _, a := range list.Items {
		out[a.Metadata.Namespace+"/"+a.Metadata.Name] = healthSync{string(a.Status.Health.Status), string(a.Status.Sync.Status)}
	}
	return out
}

// TestMetricsAgainstAPIServer: against the real API server with the
// scenario fleet, argocd_app_info scraped from the metrics listener has one
// series per App with the health and sync GET /v1/deploy/applications
// answers a SuperAdmin, and follows a change of an App; the public listener
// answers 404 for /metrics and the metrics listener serves nothing else.
func TestMetricsAgainstAPIServer(t *testing.T) {
	c := clustertest.Start(t)
	c.ApplyFleet(t, clustertest.Manifests(t, fleetFixture))
	env := startPlane(t, c.Config)
	env.waitReady(t, 30*time.Second)
	root := env.token(t, admin, time.Hour)

	fams := scrapeMetrics(t, env)
	want := listed(t, env, root)
	if len(want) < 5 {
		t.Fatalf("the fleet lists %d applications", len(want))
	}
	if diff := cmp.Diff(want, appInfo(t, fams)); diff != "" {
		t.Fatalf("argocd_app_info (-list +metrics):\n%s", diff)
	}
	if v := fams["deployd_ready"].GetMetric()[0].GetGauge().GetValue(); v != 1 {
		t.Errorf("deployd_ready = %v while health answers 200", v)
	}
	if ci := fams["argocd_cluster_info"].GetMetric(); len(ci) != 1 || !strings.HasPrefix(labelOf(ci[0], "k8s_version"), "v1.") {
		t.Errorf("argocd_cluster_info = %v, want one series with the API server's version", ci)
	}
	if objs := fams["argocd_cluster_api_resource_objects"].GetMetric(); len(objs) != 1 || objs[0].GetGauge().GetValue() < float64(len(want)) {
		t.Errorf("argocd_cluster_api_resource_objects = %v, want at least the %d apps", objs, len(want))
	}
	// The ready line follows readiness within the watcher's poll.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(env.logs.String(), "msg=ready apps="); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no ready line with the fleet's size in the log")
		}
	}

	// Declare a release nobody runs: web goes OutOfSync.
	before := want["tenant-acme/web"]
	if _, err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace("tenant-acme").Patch(t.Context(), "web",
		types.MergePatchType, []byte(`{"spec":{"image":{"tag":"v9.9.9"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for listed(t, env, root)["tenant-acme/web"] == before {
		if time.Now().After(deadline) {
			t.Fatal("the list never showed the change")
		}
		time.Sleep(50 * time.Millisecond)
	}
	after := appInfo(t, scrapeMetrics(t, env))
	if got := after["tenant-acme/web"]; got.Sync != "OutOfSync" || got == before {
		t.Errorf("after the change argocd_app_info says %+v for tenant-acme/web (before %+v), want OutOfSync", got, before)
	}
	if diff := cmp.Diff(listed(t, env, root), after); diff != "" {
		t.Errorf("argocd_app_info after the change (-list +metrics):\n%s", diff)
	}

	// The public listener never serves /metrics; the metrics listener
	// serves nothing else.
	if r := env.send(t, nil, http.MethodGet, "/metrics", "", ""); r.code != http.StatusNotFound || strings.Contains(r.body, "argocd_app_info") {
		t.Errorf("public GET /metrics: %d, want 404", r.code)
	}
	if r := env.send(t, nil, http.MethodGet, "/metrics", root, ""); r.code != http.StatusNotFound || strings.Contains(r.body, "argocd_app_info") {
		t.Errorf("public GET /metrics as a SuperAdmin: %d, want 404", r.code)
	}
	base := strings.TrimSuffix(env.MetricsURL, "/metrics")
	for _, p := range []string{"/", "/v1/deploy/health", "/v1/deploy/applications", "/metrics/extra"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("metrics listener GET %s: %d, want 404", p, resp.StatusCode)
		}
	}
}

func labelOf(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}
