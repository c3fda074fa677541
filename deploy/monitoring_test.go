package deploy_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/yaml"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/metrics"
	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/stream"
)

const (
	rulesFile     = "monitoring/prometheusrule.yaml"
	rulesTestFile = "monitoring/rules_test.yaml"
	dashboardFile = "monitoring/dashboard.json"
	runbookFile   = "monitoring/README.md"
)

// promRule is a PrometheusRule as far as the checks read it.
type promRule struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata"`
	Spec       struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Record      string            `json:"record"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

func readRules(t *testing.T) promRule {
	t.Helper()
	var r promRule
	readYAML(t, rulesFile, &r)
	if r.Kind != "PrometheusRule" || r.APIVersion != "monitoring.coreos.com/v1" {
		t.Fatalf("%s is %s %s, want a monitoring.coreos.com/v1 PrometheusRule", rulesFile, r.APIVersion, r.Kind)
	}
	return r
}

// ruleDir writes the PrometheusRule's groups as a Prometheus rule file
// (rules.yaml) beside a copy of the unit tests, and returns the folder.
func ruleDir(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Spec struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(map[string]any{"groups": doc.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestAlertRulesPromtool: promtool check rules accepts the rules, and
// promtool test rules passes each alert's unit test.
func TestAlertRulesPromtool(t *testing.T) {
	promtool := tool(t, "promtool")
	dir := ruleDir(t)
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "rules_test.yaml"}} {
		cmd := exec.CommandContext(t.Context(), promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestAlertsDocumented: every alert has a summary, a severity, a runbook
// URL pointing at its section of the README, and a unit test.
func TestAlertsDocumented(t *testing.T) {
	r := readRules(t)
	readme, err := os.ReadFile(runbookFile)
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"DeploydAppDegraded", "DeploydAppOutOfSync", "DeploydNotReady", "DeploydSlowClientCutOffs", "DeploydEngineFailing", "DeploydReleaseSourceStale"}
	seen := map[string]bool{}
	for _, g := range r.Spec.Groups {
		for _, rule := range g.Rules {
			if rule.Alert == "" {
				continue
			}
			seen[rule.Alert] = true
			if rule.Annotations["summary"] == "" || rule.Labels["severity"] == "" || rule.For == "" {
				t.Errorf("%s: want a summary, a severity and a for duration", rule.Alert)
			}
			if !strings.HasSuffix(rule.Annotations["runbook_url"], "deploy/monitoring/README.md#"+strings.ToLower(rule.Alert)) {
				t.Errorf("%s: runbook_url %q does not point at its README section", rule.Alert, rule.Annotations["runbook_url"])
			}
			if !strings.Contains(string(readme), "\n### "+rule.Alert+"\n") {
				t.Errorf("%s: no runbook section (### %s) in %s", rule.Alert, rule.Alert, runbookFile)
			}
			if !strings.Contains(string(tests), "alertname: "+rule.Alert+"\n") {
				t.Errorf("%s: no unit test in %s", rule.Alert, rulesTestFile)
			}
		}
	}
	for _, a := range want {
		if !seen[a] {
			t.Errorf("alert %s is missing", a)
		}
	}
}

// exportedMetrics are the series names deployd's registry exposes once
// every kind of event happened (histograms with their _bucket, _sum and
// _count).
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	store := projection.NewStore(projection.DefaultConfig())
	m := metrics.New(metrics.Sources{
		Snapshot: store.Snapshot,
		Cluster: func() metrics.Cluster {
			return metrics.Cluster{Kinds: []metrics.Kind{{Name: "App"}}}
		},
		Hub:        func() stream.Stats { return stream.Stats{} },
		TokenCache: func() auth.CacheStats { return auth.CacheStats{} },
		Engine:     func() (gitops.EngineStatus, bool) { return gitops.EngineStatus{Enabled: true}, true },
	})
	m.Request("GET", "/", 200, time.Millisecond)
	m.SignIn("ok")
	m.Refusal("no_org")
	m.Batch(1, time.Millisecond, time.Millisecond)
	m.EngineRun(&gitops.ReconcileReport{Results: []gitops.ReconcileResult{{Resource: "hanzo.ai/v1/App/hanzo/iam", Status: "Synced"}}}, nil, time.Second, time.Now())
	m.ReleaseRefresh(nil, time.Now())
	mfs, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[mf.GetName()+s] = true
			}
		}
	}
	// argocd_app_info is per App: none in an empty store.
	names["argocd_app_info"] = true
	return names
}

// promqlWords are the identifiers of PromQL that are not metric names.
var promqlWords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true,
}

var (
	promqlStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promqlMatchers  = regexp.MustCompile(`\{[^{}]*\}`)
	promqlGrouping  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promqlRanges    = regexp.MustCompile(`\[[^\]]*\]`)
	promqlIdent     = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	grafanaVariable = regexp.MustCompile(`\$\{?[A-Za-z_]+\}?`)
)

// metricNames returns the metric names a PromQL expression reads.
func metricNames(expr string) []string {
	e := grafanaVariable.ReplaceAllString(expr, "1m")
	e = promqlStrings.ReplaceAllString(e, `""`)
	e = promqlMatchers.ReplaceAllString(e, " ")
	e = promqlGrouping.ReplaceAllString(e, " ")
	e = promqlRanges.ReplaceAllString(e, " ")
	var out []string
	for _, loc := range promqlIdent.FindAllStringIndex(e, -1) {
		word := e[loc[0]:loc[1]]
		rest := strings.TrimLeft(e[loc[1]:], " \t\n")
		if promqlWords[strings.ToLower(word)] || strings.HasPrefix(rest, "(") {
			continue // a keyword or a function
		}
		if loc[0] > 0 && (e[loc[0]-1] >= '0' && e[loc[0]-1] <= '9' || e[loc[0]-1] == '.') {
			continue // a number's exponent or a duration's unit
		}
		out = append(out, word)
	}
	return out
}

// TestQueriesNameExportedMetrics: the dashboard parses, has the panels the
// operator needs, and every query of the dashboard and the rules names only
// metrics deployd exports.
func TestQueriesNameExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	check := func(where, expr string) {
		t.Helper()
		names := metricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: %q names no metric", where, expr)
		}
		for _, n := range names {
			if !exported[n] {
				t.Errorf("%s: %q reads %s, which deployd does not export", where, expr, n)
			}
		}
	}
	for _, g := range readRules(t).Spec.Groups {
		for _, r := range g.Rules {
			check("rule "+r.Alert+r.Record, r.Expr)
		}
	}

	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	titles := map[string]bool{}
	queries := 0
	for _, p := range dash.Panels {
		titles[p.Title] = true
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			check("panel "+p.Title, tg.Expr)
			queries++
		}
	}
	for _, want := range []string{"Fleet health over time", "Fleet sync over time", "Apps by health", "Stream clients", "Fold latency", "Request latency by route", "Engine runs"} {
		if !titles[want] {
			t.Errorf("the dashboard has no panel %q", want)
		}
	}
	if queries < 20 {
		t.Errorf("the dashboard has %d queries, want the whole set", queries)
	}
	if got := metricNames(`sum by (le, route) (rate(x_bucket{route!~".*stream.*"}[5m])) / on (job) group_left y > 1e3`); strings.Join(got, ",") != "x_bucket,y" {
		t.Errorf("metricNames reads %v, want x_bucket and y", got)
	}
}
