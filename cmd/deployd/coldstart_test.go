package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/fleet"
	"github.com/hanzoai/deploy/projection"
)

// BenchmarkColdStart measures deployd's cold start against a real API
// server holding a large fleet: the time from the process's start to ready
// (every cache synced, /v1/deploy/health 200) and its memory when ready.
// The fleet is generated and loaded first (not timed):
// DEPLOYD_COLDSTART_APPS Apps (default 10,000), each with
// DEPLOYD_COLDSTART_REPLICAS pods (default 10) — about 200,000 objects.
// Loading takes long (the API server writes every object and its status);
// run it on its own:
//
//	go test -run '^$' -bench ColdStart -benchtime 1x -timeout 2h ./cmd/deployd/
//
// With DEPLOYD_COLDSTART_KUBECONFIG set, it measures against the cluster
// that kubeconfig names, as it is (a real fleet, or one loaded before).
func BenchmarkColdStart(b *testing.B) {
	if kc := os.Getenv("DEPLOYD_COLDSTART_KUBECONFIG"); kc != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kc)
		if err != nil {
			b.Fatal(err)
		}
		objects := countObjects(b, cfg)
		b.Logf("the cluster holds %d objects of the registry's kinds", objects)
		measureColdStart(b, kc, objects)
		return
	}
	kubeconfig, objects := loadFleet(b, clustertest.EnvInt(b, "DEPLOYD_COLDSTART_APPS", 10_000), clustertest.EnvInt(b, "DEPLOYD_COLDSTART_REPLICAS", 10))
	measureColdStart(b, kubeconfig, objects)
}

// loadFleet starts a real API server holding the generated fleet: apps
// Apps, each App with replicas pods (no autoscaler), loaded once and kept
// as a snapshot of etcd's data (clustertest.FleetSnapshot). It returns the
// cluster's kubeconfig and the number of objects in the fleet. The loading
// is not timed.
func loadFleet(b *testing.B, apps, replicas int) (kubeconfig string, objects int) {
	b.Helper()
	c := clustertest.Start(b, clustertest.FleetSnapshot(apps, replicas))
	return c.Kubeconfig, len(fleet.RenderAll(clustertest.FleetApps(apps, replicas)))
}

// measureColdStart builds deployd and starts it b.N times against the
// cluster of kubeconfig, which holds objects objects.
func measureColdStart(b *testing.B, kubeconfig string, objects int) {
	bin := buildDeployd(b)
	b.ResetTimer()
	var readies []time.Duration
	var rsses, hwms []int64
	for i := 0; i < b.N; i++ {
		ready, rss, hwm := coldStart(b, bin, kubeconfig)
		b.Logf("run %d: ready in %s, rss %d MiB, peak %d MiB", i+1, ready.Round(10*time.Millisecond), rss>>20, hwm>>20)
		readies, rsses, hwms = append(readies, ready), append(rsses, rss), append(hwms, hwm)
	}
	// The median run, and the highest peak.
	ready, rss := median(readies), median(rsses)
	b.ReportMetric(ready.Seconds(), "s-to-ready")
	b.ReportMetric(float64(rss)/(1<<20), "MiB-rss-ready")
	b.ReportMetric(float64(slices.Max(hwms))/(1<<20), "MiB-peak-rss")
	b.ReportMetric(float64(rss)/float64(objects), "B-rss/object")
}

func median[T int64 | time.Duration](v []T) T {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// countObjects counts the objects of the registry's kinds the cluster
// holds, by their metadata.
func countObjects(b *testing.B, cfg *rest.Config) int {
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, ki := range projection.Registry() {
		list, err := md.Resource(ki.Kind.GVR()).List(b.Context(), metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			b.Fatal(err)
		}
		n += len(list.Items)
	}
	return n
}

// coldStart runs the binary against the kubeconfig and measures it.
func coldStart(b *testing.B, bin, kubeconfig string) (ready time.Duration, rss, hwm int64) {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--listen", addr, "--metrics-listen=", "--kubeconfig", kubeconfig)
	cmd.Env = append(os.Environ(), "LOG_LEVEL=warn", "DEPLOY_PUBLIC_URL=")
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := start.Add(20 * time.Minute)
	for {
		resp, err := client.Get("http://" + addr + "/v1/deploy/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("deployd was not ready in 20 minutes")
		}
		time.Sleep(10 * time.Millisecond) // a probe's interval: ready is measured to it
	}
	ready = time.Since(start)
	rss, hwm = clustertest.ProcMemory(b, cmd.Process.Pid)
	return ready, rss, hwm
}
