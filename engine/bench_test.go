package engine

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/engine/enginetest"
	"github.com/hanzoai/deploy/gitops"
)

// benchFleet writes n App manifests (two namespaces) as files of the
// repository's crs folder.
func benchFleet(n int, nsA, nsB, tag0 string) map[string]string {
	files := make(map[string]string, n)
	for i := range n {
		ns := nsA
		if i%2 == 1 {
			ns = nsB
		}
		tag := "v1.0.0"
		if i == 0 {
			tag = tag0
		}
		files[fmt.Sprintf("crs/bench-%04d.yaml", i)] = appYAML(fmt.Sprintf("bench-%04d", i), ns, tag)
	}
	return files
}

// engineVsKubectl is one side-by-side round: n Apps from the git server
// into the API server by the engine, cold (all created) then warm (one tag
// changed), and the same files by kubectl apply --server-side -f <dir> into
// two other namespaces, cold then warm. kubectl is skipped when it is not
// built (and fails the caller when the tools are required).
type engineVsKubectl struct {
	engineCold, engineWarm, kubectlCold, kubectlWarm time.Duration
	kubectl                                          bool
}

func runEngineVsKubectl(tb testing.TB, c *clustertest.Cluster, srv *enginetest.Server, n int, prefix string) engineVsKubectl {
	tb.Helper()
	var out engineVsKubectl
	repo := srv.NewRepo(tb, prefix+"bench")
	repo.Commit(tb, "fleet", benchFleet(n, "hanzo", "hanzo-devnet", "v1.0.0"))
	e, err := New(func() Config {
		cfg := Defaults()
		cfg.Repo, cfg.Path, cfg.Instance, cfg.Interval = repo.URL, "crs", prefix+"bench", 0
		cfg.CacheDir = filepath.Join(tb.TempDir(), "cache")
		return cfg
	}(), c.Config, nil)
	if err != nil {
		tb.Fatal(err)
	}
	start := time.Now()
	rep, err := e.Reconcile(tb.Context(), gitops.TriggerRequest, false)
	out.engineCold = time.Since(start)
	if err != nil || rep.Synced != n {
		tb.Fatalf("cold run: %v, %d synced of %d", err, rep.Synced, n)
	}
	repo.Commit(tb, "bump one", map[string]string{"crs/bench-0000.yaml": appYAML("bench-0000", "hanzo", "v1.0.1")})
	start = time.Now()
	rep, err = e.Reconcile(tb.Context(), gitops.TriggerRequest, false)
	out.engineWarm = time.Since(start)
	if err != nil || resultOf(rep, "hanzo.ai/v1/App/hanzo/bench-0000").Message != "configured" || changedCount(rep) != 1 {
		tb.Fatalf("warm run: %v, %d changed", err, changedCount(rep))
	}

	kubectl := filepath.Join(clustertest.ToolsDir(), "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		if os.Getenv(clustertest.RequireEnv) == "1" {
			tb.Fatalf("kubectl not found at %s (%s=1): run make tools", kubectl, clustertest.RequireEnv)
		}
		tb.Logf("kubectl not found at %s: the engine's side only", kubectl)
		return out
	}
	out.kubectl = true
	dir := tb.TempDir()
	write := func(files map[string]string) {
		for p, content := range files {
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(p)), []byte(content), 0o644); err != nil {
				tb.Fatal(err)
			}
		}
	}
	apply := func() time.Duration {
		cmd := exec.Command(kubectl, "--kubeconfig", c.Kubeconfig, "--cache-dir", filepath.Join(dir, ".kube-cache"),
			"apply", "--server-side", "--field-manager", "kubectl-bench", "-f", dir)
		cmd.Env = append(os.Environ(), "HOME="+dir)
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = nil, &stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			tb.Fatalf("kubectl apply: %v: %s", err, stderr.String())
		}
		return time.Since(start)
	}
	write(benchFleet(n, "hanzo-mainnet", "hanzo-testnet", "v1.0.0"))
	out.kubectlCold = apply()
	write(map[string]string{"crs/bench-0000.yaml": appYAML("bench-0000", "hanzo-mainnet", "v1.0.1")})
	out.kubectlWarm = apply()
	return out
}

// BenchmarkEngineVsKubectl (make bench-engine): 1,000 Apps, cold and warm,
// the engine and kubectl apply --server-side side by side against one real
// API server. DEPLOYD_BENCH_APPS changes the count.
func BenchmarkEngineVsKubectl(b *testing.B) {
	n := 1000
	if v := os.Getenv("DEPLOYD_BENCH_APPS"); v != "" {
		fmt.Sscan(v, &n)
	}
	c := clustertest.Start(b)
	srv := enginetest.NewServer(b)
	createNamespaces(b, c, "hanzo", "hanzo-devnet", "hanzo-mainnet", "hanzo-testnet")
	b.ResetTimer()
	for i := range b.N {
		r := runEngineVsKubectl(b, c, srv, n, fmt.Sprintf("r%d-", i))
		b.ReportMetric(r.engineCold.Seconds(), "engine-cold-s")
		b.ReportMetric(r.engineWarm.Seconds(), "engine-warm-s")
		if r.kubectl {
			b.ReportMetric(r.kubectlCold.Seconds(), "kubectl-cold-s")
			b.ReportMetric(r.kubectlWarm.Seconds(), "kubectl-warm-s")
			b.ReportMetric(r.kubectlCold.Seconds()/r.engineCold.Seconds(), "cold-kubectl/engine")
			b.ReportMetric(r.kubectlWarm.Seconds()/r.engineWarm.Seconds(), "warm-kubectl/engine")
		}
		b.Logf("%d Apps: engine cold %v warm %v; kubectl cold %v warm %v", n, r.engineCold.Round(time.Millisecond), r.engineWarm.Round(time.Millisecond),
			r.kubectlCold.Round(time.Millisecond), r.kubectlWarm.Round(time.Millisecond))
	}
}
