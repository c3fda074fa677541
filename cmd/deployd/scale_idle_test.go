package main

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/hanzoai/deploy/cluster/clustertest"
)

// idleFigures are the API servers' load of a deployd that watches and
// does nothing else.
type idleFigures struct {
	window          time.Duration
	base, watched   time.Duration // the servers' CPU (kube-apiserver and etcd) in the window, without deployd and with it
	relists, starts float64       // deployd's relists and watch starts in the window
}

// perAlias is the CPU a watched alias costs its server, in ms a second.
func (f idleFigures) perAlias(clusters int) float64 {
	return float64(f.watched-f.base) / float64(time.Millisecond) / f.window.Seconds() / float64(clusters)
}

// apiCPU is the CPU the servers' kube-apiserver and etcd have used.
func apiCPU(b *testing.B, apis []*clustertest.Cluster) time.Duration {
	b.Helper()
	var sum time.Duration
	for _, c := range apis {
		for name, pid := range c.PIDs() {
			if name == "kube-apiserver" || name == "etcd" {
				sum += procCPU(b, pid)
			}
		}
	}
	return sum
}

// idleLoad measures the servers' CPU over window with no deployd, then
// with one ready and settled over every cluster, and deployd's relists and
// watch starts meanwhile: watching costs one watch per kind per alias and
// no relists, so the cost per alias stays flat as the clusters grow.
func idleLoad(b *testing.B, bin string, setup serveSetup, m *mockoidc.MockOIDC, apis []*clustertest.Cluster, window time.Duration) idleFigures {
	b.Helper()
	f := idleFigures{window: window}
	c0 := apiCPU(b, apis)
	time.Sleep(window) // the servers alone, for the baseline
	f.base = apiCPU(b, apis) - c0
	p := startServe(b, bin, setup, m)
	defer p.stop()
	time.Sleep(10 * time.Second) // past the first bookmarks and the settling
	r0, s0 := metricSum(b, p.metrics, "deployd_informer_relists_total"), metricSum(b, p.metrics, "deployd_watch_restarts_total")
	c0 = apiCPU(b, apis)
	time.Sleep(window)
	f.watched = apiCPU(b, apis) - c0
	f.relists = metricSum(b, p.metrics, "deployd_informer_relists_total") - r0
	f.starts = metricSum(b, p.metrics, "deployd_watch_restarts_total") - s0
	return f
}

// metricSum is the sum of every series of a metric at base/metrics.
func metricSum(b *testing.B, base, name string) float64 {
	b.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}
