package load

import (
	"bytes"
	"context"
	"fmt"
	"github.com/hanzoai/deploy/cmd/deployd/internal/deploydbin"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/hanzoai/deploy/auth/authtest"
	"github.com/hanzoai/deploy/cluster/clustertest"
)

// The callers: a SuperAdmin (sees the whole fleet) and a member of the acme
// org (its namespace, tenant-acme, holds about a twentieth of the fleet).
var (
	superAdmin = authtest.User{Subject: "u-root", Extra: map[string]any{"preferred_username": "root", "owner": "admin"}}
	acmeMember = authtest.User{Subject: "u-alice", Extra: map[string]any{"preferred_username": "alice", "owner": "acme"}}
)

// snapshotFrom is the smallest fleet worth a snapshot: below it loading
// is quicker than saving etcd's data (a stop, a copy and a restart).
const snapshotFrom = 1000

// fleetCluster starts a real API server holding the fleet of apps Apps with
// replicas pods each (seed 1, as BenchmarkColdStart loads it). A large
// fleet is loaded once and kept (clustertest.FleetSnapshot): later runs
// start from a copy of etcd's data in seconds.
func fleetCluster(tb testing.TB, apps, replicas int) *clustertest.Cluster {
	tb.Helper()
	if apps >= snapshotFrom {
		return clustertest.Start(tb, clustertest.FleetSnapshot(apps, replicas))
	}
	c := clustertest.Start(tb)
	clustertest.LoadFleet(tb, c, apps, replicas)
	return c
}

// identity is an in-process OIDC provider whose tokens deployd verifies.
type identity struct{ m *mockoidc.MockOIDC }

func startIdentity(tb testing.TB) *identity {
	tb.Helper()
	m, err := mockoidc.Run()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = m.Shutdown() })
	return &identity{m: m}
}

// token returns an ID token of u valid for ttl.
func (id *identity) token(tb testing.TB, u authtest.User, ttl time.Duration) string {
	tb.Helper()
	tok, err := authtest.IDToken(id.m, u, time.Now(), ttl)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// buildDeployd is the binary built the way the image does, once per test
// process (deploydbin).
func buildDeployd(tb testing.TB) string { return deploydbin.Path(tb) }

// deployd is the built binary serving against a cluster, on one address
// for its whole life: kill and start again, and clients find it where it was.
type deployd struct {
	tb         testing.TB
	bin, kcfg  string
	env        []string
	extraEnv   []string // the env given to startDeployd
	addr, Base string
	// Peer is where the other replicas reach it (its
	// DEPLOYD_ADVERTISE_URL), "" when it is Base.
	Peer   string
	log    *processLog // stdout and stderr of every run, for panics and 5xx lines
	cmd    *exec.Cmd
	exited chan struct{}
}

// startDeployd runs `deployd serve` against kubeconfig with the identity
// provider id, plus env (KEY=value), and waits until it is ready.
func startDeployd(tb testing.TB, bin, kubeconfig string, id *identity, env ...string) *deployd {
	tb.Helper()
	return startDeploydAt(tb, freeAddr(tb), bin, kubeconfig, id, env...)
}

// freeAddr is a loopback address no one listens on now.
func freeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startDeploydAt is startDeployd serving on addr.
func startDeploydAt(tb testing.TB, addr, bin, kubeconfig string, id *identity, env ...string) *deployd {
	tb.Helper()
	d := &deployd{tb: tb, bin: bin, kcfg: kubeconfig, addr: addr, Base: "http://" + addr, log: newProcessLog(tb)}
	// LOG_LEVEL is deployd's default, info: every request writes its
	// access line, as in production.
	d.env = append(os.Environ(), "LOG_LEVEL=info", "DEPLOY_PUBLIC_URL="+d.Base,
		"IAM_ENDPOINT="+id.m.Issuer(), "DEPLOY_IAM_CLIENT_ID="+id.m.ClientID, "DEPLOY_IAM_CLIENT_SECRET="+id.m.ClientSecret)
	d.env = append(d.env, env...)
	d.extraEnv = env
	tb.Cleanup(d.stop)
	d.start()
	return d
}

// start runs the process and waits (up to 5 minutes) for it to be ready.
func (d *deployd) start() {
	d.tb.Helper()
	d.cmd = exec.Command(d.bin, "serve", "--listen", d.addr, "--metrics-listen="+d.metricsAddr(), "--kubeconfig", d.kcfg)
	d.cmd.Env = d.env
	d.cmd.Stdout = d.log.f
	d.cmd.Stderr = d.log.f
	if err := d.cmd.Start(); err != nil {
		d.tb.Fatal(err)
	}
	d.exited = make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) { _ = c.Wait(); close(done) }(d.cmd, d.exited)
	d.waitReady(5 * time.Minute)
}

// metricsAddr is the metrics listener's address: the last
// DEPLOYD_METRICS_LISTEN of the env given to startDeployd (withMetrics
// makes one), else "" (none).
func (d *deployd) metricsAddr() string {
	addr := ""
	for _, kv := range d.extraEnv {
		if v, ok := strings.CutPrefix(kv, "DEPLOYD_METRICS_LISTEN="); ok {
			addr = v
		}
	}
	return addr
}

// waitReady waits for /v1/deploy/health to answer 200.
func (d *deployd) waitReady(timeout time.Duration) {
	d.tb.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-d.exited:
			d.tb.Fatalf("deployd exited before it was ready:\n%s", tail(d.log.String(), 20))
		default:
		}
		resp, err := client.Get(d.Base + "/v1/deploy/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			d.tb.Fatalf("deployd was not ready in %s: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill ends the process with SIGKILL and waits for it.
func (d *deployd) kill() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	_ = d.cmd.Process.Kill()
	<-d.exited
}

// stop ends the process with SIGTERM (SIGKILL after 10 s) and waits.
func (d *deployd) stop() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		d.kill()
	}
}

// PID is the running process's id.
func (d *deployd) PID() int { return d.cmd.Process.Pid }

// panics reports whether the process's log holds a panic or a fatal error.
func (d *deployd) panics() bool {
	s := d.log.String()
	return strings.Contains(s, "panic:") || strings.Contains(s, "fatal error:")
}

// processLog is a process's stdout and stderr in a file the process writes
// itself, as a container runtime keeps a container's: no goroutine of the
// harness wakes for a line, so an access line costs the server what it
// costs in production and nothing here.
type processLog struct{ f *os.File }

func newProcessLog(tb testing.TB) *processLog {
	tb.Helper()
	f, err := os.OpenFile(filepath.Join(tb.TempDir(), "process.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_TRUNC, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	return &processLog{f: f}
}

// String is everything written so far.
func (l *processLog) String() string {
	b, err := os.ReadFile(l.f.Name())
	if err != nil {
		return fmt.Sprintf("(the log is unreadable: %v)", err)
	}
	return string(b)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat's times (100 on Linux
// everywhere that matters).
const clockTick = 100

// procCPU is the CPU time (user + system) the process has used so far.
func procCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// The command name (field 2) may hold spaces: fields count from its ')'.
	rest := raw[bytes.LastIndexByte(raw, ')')+2:]
	f := strings.Fields(string(rest))
	// utime and stime are fields 14 and 15; rest starts at field 3.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		tb.Fatalf("/proc/%d/stat: %q", pid, raw)
	}
	return time.Duration(ut+st) * time.Second / clockTick
}

// raiseOpenFiles lifts this process's open-file limit to its hard limit:
// thousands of clients need as many sockets.
func raiseOpenFiles(tb testing.TB) uint64 {
	tb.Helper()
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		tb.Fatal(err)
	}
	l.Cur = l.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		tb.Fatal(err)
	}
	return l.Cur
}

// waitFor polls cond every 20 ms until it holds or ctx ends.
func waitFor(ctx context.Context, cond func() bool) bool {
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return true
}
