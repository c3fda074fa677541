package demo_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hanzoai/deploy/demo"
	"github.com/hanzoai/deploy/demo/demotest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The environment comes up with its fleet watched through deployd's read
// path, the simulator steps at its pace and stops with its context, and the
// identity provider answers discovery.
func TestEnvironment(t *testing.T) {
	env, err := demo.Start(t.Context(), demo.Options{Apps: 12, Pace: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	rs := demotest.WatchClients(t, env.Cluster.Dynamic(), env.Cluster.Discovery())
	rs.WaitConverged(t, env.Cluster.Dynamic(), 20*time.Second)
	if n := rs.Store.Snapshot().Len(); n != 13 {
		t.Fatalf("%d rows, want 12 Apps and the site", n)
	}

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); env.Run(ctx) }()
	demotest.WaitFor(t, 10*time.Second, "the simulator steps", func() (bool, string) { return env.Sim.StepCount() >= 3, "" })
	cancel()
	wg.Wait()

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(env.IdP.Issuer() + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("discovery: %d", resp.StatusCode)
	}
}
