package load

import (
	"net/http"
	"testing"
	"time"

	"github.com/hanzoai/deploy/cluster/clustertest"
)

// TestHarness starts the built binary against a small fleet, reads its
// process figures, kills it and starts it again on the same address.
func TestHarness(t *testing.T) {
	c := fleetCluster(t, 20, 1)
	id := startIdentity(t)
	d := startDeployd(t, buildDeployd(t), c.Kubeconfig, id)
	if cpu := procCPU(t, d.PID()); cpu <= 0 {
		t.Fatalf("cpu %v: a process that started and listed has used some", cpu)
	}
	if rss, hwm := clustertest.ProcMemory(t, d.PID()); rss <= 0 || hwm < rss {
		t.Fatalf("rss %d, peak %d", rss, hwm)
	}
	pid := d.PID()
	d.kill()
	d.start()
	if d.PID() == pid {
		t.Fatal("start after kill reused the process")
	}
	req, _ := http.NewRequest(http.MethodGet, d.Base+"/v1/deploy/applications", nil)
	req.Header.Set("Authorization", "Bearer "+id.token(t, superAdmin, time.Hour))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("list after restart: %d", resp.StatusCode)
	}
	if d.panics() {
		t.Fatalf("log:\n%s", d.log.String())
	}
}

func TestParseListenOverflows(t *testing.T) {
	const netstat = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 3 27 30\nIpExt: InNoRoutes\nIpExt: 0\n"
	if v, ok := parseListenOverflows(netstat); !ok || v != 27 {
		t.Errorf("parseListenOverflows = %d, %v; want 27, true", v, ok)
	}
	if _, ok := parseListenOverflows("IpExt: InNoRoutes\nIpExt: 0\n"); ok {
		t.Error("parseListenOverflows found a value in text without TcpExt")
	}
}
