package metrics

import (
	"bytes"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/stream"
)

// argoFamilies are Argo CD's application-controller metrics deployd
// exports: name, type and label names as Argo CD v2.14 has them
// (docs/operator-manual/metrics.md for the names and types;
// controller/metrics/metrics.go and clustercollector.go for the labels).
var argoFamilies = map[string]struct {
	typ    dto.MetricType
	labels []string
}{
	"argocd_app_info":                     {dto.MetricType_GAUGE, []string{"autosync_enabled", "dest_namespace", "dest_server", "health_status", "name", "namespace", "operation", "project", "repo", "sync_status"}},
	"argocd_app_sync_total":               {dto.MetricType_COUNTER, []string{"dest_server", "name", "namespace", "phase", "project"}},
	"argocd_app_reconcile":                {dto.MetricType_HISTOGRAM, []string{"dest_server", "namespace"}},
	"argocd_cluster_info":                 {dto.MetricType_GAUGE, []string{"k8s_version", "name", "server"}},
	"argocd_cluster_api_resource_objects": {dto.MetricType_GAUGE, []string{"name", "server"}},
	"argocd_cluster_api_resources":        {dto.MetricType_GAUGE, []string{"name", "server"}},
}

// fleetStore folds the projection's golden fleet.
func fleetStore(t testing.TB) *projection.Store {
	t.Helper()
	raw, err := os.ReadFile("../projection/testdata/fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	store := projection.NewStore(projection.DefaultConfig())
	var batch []projection.Change
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatal(err)
		}
		if m == nil {
			continue
		}
		o, err := projection.Decode(m)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, projection.Change{Op: projection.Upsert, Object: o})
	}
	if _, err := store.Apply(batch...); err != nil {
		t.Fatal(err)
	}
	return store
}

func newFleetMetrics(t testing.TB) (*Metrics, *projection.Store) {
	store := fleetStore(t)
	m := New(Sources{
		Snapshot: store.Snapshot,
		Cluster: func() Cluster {
			return Cluster{Ready: true, KindsListed: 2, KindsServed: 2, Folded: 40, K8sVersion: "v1.37.2",
				Kinds: []Kind{{Name: "App", Changes: 7, Objects: 7}, {Name: "Pod", Changes: 30, Relists: 1, WatchRestarts: 2, Objects: 20}}}
		},
		Hub:           func() stream.Stats { return stream.Stats{Subscribers: 3, Events: 10, Encodings: 12} },
		TokenCache:    func() auth.CacheStats { return auth.CacheStats{Hits: 5, Misses: 2} },
		ClusterServer: "https://kubernetes.default.svc", ClusterName: "in-cluster",
	})
	return m, store
}

// scrape serves the registry over HTTP and parses the exposition.
func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// TestArgoCDFamilyPinned: every Argo CD metric deployd exports has Argo CD's
// name, type and label names.
func TestArgoCDFamilyPinned(t *testing.T) {
	m, store := newFleetMetrics(t)
	var app *projection.App
	for a := range store.Snapshot().Apps() {
		if a.Row == projection.RowApp {
			app = a
			break
		}
	}
	m.AppSync(app, PhaseSucceeded)
	ki := projection.KindApp.Info()
	m.EngineRun(&gitops.ReconcileReport{Declared: 1, Synced: 1, Results: []gitops.ReconcileResult{
		{Resource: ki.Group + "/" + ki.Version + "/App/" + app.Namespace + "/" + app.Name, Status: "Synced"},
	}}, nil, 2*time.Second, time.Now())
	fams := scrape(t, m)
	for name, want := range argoFamilies {
		mf := fams[name]
		if mf == nil {
			t.Errorf("%s: not exported", name)
			continue
		}
		if mf.GetType() != want.typ {
			t.Errorf("%s: type %v, want %v", name, mf.GetType(), want.typ)
		}
		for _, s := range mf.GetMetric() {
			var got []string
			for _, lp := range s.GetLabel() {
				if lp.GetName() != "le" {
					got = append(got, lp.GetName())
				}
			}
			sort.Strings(got)
			if diff := cmp.Diff(want.labels, got); diff != "" {
				t.Errorf("%s: labels (-want +got):\n%s", name, diff)
			}
		}
	}
}

// TestAppInfoIsTheSnapshot: argocd_app_info has one series per row of the
// snapshot, CD Applications included, each with the health and sync the
// Application answer has; a new snapshot moves it at the next scrape.
func TestAppInfoIsTheSnapshot(t *testing.T) {
	m, store := newFleetMetrics(t)
	check := func() {
		t.Helper()
		snap := store.Snapshot()
		want := map[string][2]string{}
		for a := range snap.Apps() {
			app := a.Application()
			want[a.Namespace+"/"+a.Name] = [2]string{string(app.Status.Health.Status), string(app.Status.Sync.Status)}
		}
		for _, a := range snap.CDApplications() {
			app := a.Application()
			want[a.Namespace+"/"+a.Name] = [2]string{string(app.Status.Health.Status), string(app.Status.Sync.Status)}
		}
		got := map[string][2]string{}
		for _, s := range scrape(t, m)["argocd_app_info"].GetMetric() {
			l := labelMap(s)
			key := l["namespace"] + "/" + l["name"]
			if _, dup := got[key]; dup {
				t.Errorf("two series for %s", key)
			}
			got[key] = [2]string{l["health_status"], l["sync_status"]}
			if s.GetGauge().GetValue() != 1 {
				t.Errorf("%s: value %v, want 1", key, s.GetGauge().GetValue())
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("argocd_app_info (-snapshot +metrics):\n%s", diff)
		}
		if len(got) < 5 {
			t.Fatalf("only %d apps", len(got))
		}
	}
	check()
	// Delete one App: its series goes with it.
	var gone *projection.App
	for a := range store.Snapshot().Apps() {
		if a.Row == projection.RowApp {
			gone = a
		}
	}
	if _, err := store.Apply(projection.Change{Op: projection.Delete, Object: &projection.Object{Kind: projection.KindApp, Namespace: gone.Namespace, Name: gone.Name}}); err != nil {
		t.Fatal(err)
	}
	check()
	for _, s := range scrape(t, m)["argocd_app_info"].GetMetric() {
		if l := labelMap(s); l["namespace"] == gone.Namespace && l["name"] == gone.Name {
			t.Fatalf("%s/%s deleted but still has a series", gone.Namespace, gone.Name)
		}
	}
}

func labelMap(s *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, lp := range s.GetLabel() {
		out[lp.GetName()] = lp.GetValue()
	}
	return out
}

// TestHandlerServesOnlyMetrics: the metrics handler answers /metrics and
// nothing else.
func TestHandlerServesOnlyMetrics(t *testing.T) {
	m, _ := newFleetMetrics(t)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	for _, p := range []string{"/", "/v1/deploy/health", "/v1/deploy/applications", "/metrics/x", "/debug/pprof/"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s on the metrics listener: %d, want 404", p, resp.StatusCode)
		}
	}
}

// TestEngineAndReleaseHooks: runs count by result, the last success time
// moves only on a clean run, and release refreshes count by result.
func TestEngineAndReleaseHooks(t *testing.T) {
	m, _ := newFleetMetrics(t)
	at := time.Unix(1_800_000_000, 0)
	m.EngineRun(&gitops.ReconcileReport{Declared: 2, Synced: 2}, nil, time.Second, at)
	m.EngineRun(&gitops.ReconcileReport{Declared: 2, Synced: 1, Failed: 1}, nil, time.Second, at.Add(time.Minute))
	m.EngineRun(nil, errors.New("fetch failed"), time.Second, at.Add(2*time.Minute))
	m.ReleaseRefresh(nil, at)
	m.ReleaseRefresh(errors.New("unreachable"), at.Add(time.Minute))
	fams := scrape(t, m)
	runs := map[string]float64{}
	for _, s := range fams["deployd_engine_runs_total"].GetMetric() {
		runs[labelMap(s)["result"]] = s.GetCounter().GetValue()
	}
	if diff := cmp.Diff(map[string]float64{RunSucceeded: 1, RunPartial: 1, RunFailed: 1}, runs); diff != "" {
		t.Errorf("engine runs (-want +got):\n%s", diff)
	}
	if got := fams["deployd_engine_last_success_timestamp_seconds"].GetMetric()[0].GetGauge().GetValue(); got != float64(at.Unix()) {
		t.Errorf("last success %v, want %v", got, at.Unix())
	}
	if got := fams["deployd_release_last_refresh_timestamp_seconds"].GetMetric()[0].GetGauge().GetValue(); got != float64(at.Unix()) {
		t.Errorf("last refresh %v, want %v", got, at.Unix())
	}
	refreshes := map[string]float64{}
	for _, s := range fams["deployd_release_refreshes_total"].GetMetric() {
		refreshes[labelMap(s)["result"]] = s.GetCounter().GetValue()
	}
	if diff := cmp.Diff(map[string]float64{"ok": 1, "error": 1}, refreshes); diff != "" {
		t.Errorf("release refreshes (-want +got):\n%s", diff)
	}
	if !slices.ContainsFunc(fams["deployd_stream_subscribers"].GetMetric(), func(s *dto.Metric) bool {
		return labelMap(s)["route"] == "applications" && s.GetGauge().GetValue() == 3
	}) {
		t.Errorf("deployd_stream_subscribers{route=applications} is not 3")
	}
}

// TestNilMetrics: every recording method is a no-op on a nil *Metrics.
func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.SetRoutes([]string{"/"})
	m.Request("GET", "/", 200, time.Millisecond)
	m.SignIn("ok")
	m.Refusal("no_org")
	m.Batch(1, time.Millisecond, time.Millisecond)
	m.AppSync(nil, PhaseSucceeded)
	m.EngineRun(nil, nil, 0, time.Now())
	m.ReleaseRefresh(nil, time.Now())
}

// TestEngineStateGauges: the engine's leadership, suspension and staleness
// are read at scrape time; without an engine there are none.
func TestEngineStateGauges(t *testing.T) {
	since := time.Unix(1_800_000_000, 0)
	st := gitops.EngineStatus{Enabled: true}
	leading := false
	m := New(Sources{Engine: func() (gitops.EngineStatus, bool) { return st, leading }})
	value := func(name string) float64 {
		t.Helper()
		f := scrape(t, m)[name]
		if f == nil || len(f.GetMetric()) != 1 {
			t.Fatalf("%s: %v", name, f)
		}
		return f.GetMetric()[0].GetGauge().GetValue()
	}
	if value("deployd_engine_leader") != 0 || value("deployd_engine_suspended") != 0 || value("deployd_engine_stale_since_timestamp_seconds") != 0 {
		t.Fatal("a follower of a fresh, running engine")
	}
	st.Stale = &gitops.EngineStale{Since: since, Error: "fetch failed"}
	st.Suspended = &gitops.EngineSuspension{By: "ada", At: since}
	leading = true
	if value("deployd_engine_leader") != 1 || value("deployd_engine_suspended") != 1 || value("deployd_engine_stale_since_timestamp_seconds") != float64(since.Unix()) {
		t.Fatal("the leader of a stale, suspended engine")
	}
	if f := scrape(t, New(Sources{}))["deployd_engine_leader"]; f != nil {
		t.Errorf("without an engine: %v", f)
	}
}

// TestClusterSeriesPerCluster: with several clusters, argocd_cluster_info
// has a series for each, labelled with its server and name.
func TestClusterSeriesPerCluster(t *testing.T) {
	m := New(Sources{
		Cluster:       func() Cluster { return Cluster{Ready: true, K8sVersion: "v1.37.2"} },
		ClusterServer: "https://kubernetes.default.svc", ClusterName: "in-cluster",
		Others: func() []Cluster {
			return []Cluster{{K8sVersion: "v1.36.1", Server: "https://staging:6443", Name: "staging", KindsServed: 3,
				Kinds: []Kind{{Name: "App", Objects: 4}}}}
		},
	})
	got := map[string]string{}
	for _, s := range scrape(t, m)["argocd_cluster_info"].GetMetric() {
		labels := map[string]string{}
		for _, lp := range s.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		got[labels["name"]] = labels["server"] + " " + labels["k8s_version"]
	}
	if len(got) != 2 || got["in-cluster"] != "https://kubernetes.default.svc v1.37.2" || got["staging"] != "https://staging:6443 v1.36.1" {
		t.Errorf("argocd_cluster_info: %v", got)
	}
}

// TestClustersSharingAnAddress: two clusters of one API server (the same
// address under two names) each have their series, and the scrape answers.
func TestClustersSharingAnAddress(t *testing.T) {
	m := New(Sources{
		Cluster:       func() Cluster { return Cluster{Ready: true, KindsServed: 2, Kinds: []Kind{{Name: "App", Objects: 1}}} },
		ClusterServer: "https://10.0.0.1:6443", ClusterName: "in-cluster",
		Others: func() []Cluster {
			return []Cluster{
				{Server: "https://10.0.0.1:6443", Name: "alias-1", KindsServed: 3, Kinds: []Kind{{Name: "App", Objects: 4}}},
				{Server: "https://10.0.0.1:6443", Name: "alias-2", KindsServed: 5, Kinds: []Kind{{Name: "App", Objects: 6}}},
			}
		},
	})
	fams := scrape(t, m)
	for family, want := range map[string]map[string]float64{
		"argocd_cluster_api_resource_objects": {"in-cluster": 1, "alias-1": 4, "alias-2": 6},
		"argocd_cluster_api_resources":        {"in-cluster": 2, "alias-1": 3, "alias-2": 5},
	} {
		got := map[string]float64{}
		for _, s := range fams[family].GetMetric() {
			for _, lp := range s.GetLabel() {
				if lp.GetName() == "name" {
					got[lp.GetValue()] = s.GetGauge().GetValue()
				}
			}
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s by name: %v, want %v", family, got, want)
		}
	}
}
