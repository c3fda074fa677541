package clustertest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	serviceCIDR = "10.96.0.0/16"
	serviceIP   = "10.96.0.1" // the kubernetes Service, in the serving certificate
)

// apiserver is the cluster's kube-apiserver on one loopback port, kept
// across restarts.
type apiserver struct {
	proc   *process
	url    string
	token  string // admin, for /readyz
	client *http.Client
}

// user is a static token identity of the API server (--token-auth-file).
type user struct {
	name   string
	groups []string
	token  string
}

func writeTokenFile(path string, users []user) error {
	var b strings.Builder
	for _, u := range users {
		// token,user,uid,"group1,group2"
		fmt.Fprintf(&b, "%s,%s,%s,%q\n", u.token, u.name, u.name, strings.Join(u.groups, ","))
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// startAPIServer starts kube-apiserver with extra flags after the standard
// ones and waits for /readyz; meanwhile is called before each readiness
// check, to use the API while it comes up.
func startAPIServer(bin, dir, etcdURL string, p *pki, tokenFile, adminToken string, extra []string, budget time.Duration, meanwhile func(*apiserver)) (*apiserver, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caPEM)
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true},
	}
	deadline := time.Now().Add(budget)
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		a := &apiserver{
			url:    fmt.Sprintf("https://127.0.0.1:%d", ports[0]),
			token:  adminToken,
			client: client,
			proc: newProcess("kube-apiserver", bin, filepath.Join(dir, "kube-apiserver.log"), append([]string{
				"--etcd-servers=" + etcdURL,
				"--bind-address=127.0.0.1",
				"--advertise-address=127.0.0.1",
				fmt.Sprintf("--secure-port=%d", ports[0]),
				"--tls-cert-file=" + p.servingCert,
				"--tls-private-key-file=" + p.servingKey,
				"--token-auth-file=" + tokenFile,
				"--authorization-mode=Node,RBAC",
				"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
				"--service-account-key-file=" + p.saPub,
				"--service-account-signing-key-file=" + p.saKey,
				"--service-cluster-ip-range=" + serviceCIDR,
				"--allow-privileged=true",
				// Pods are admitted without a "default" ServiceAccount, so a
				// test can create them in a fresh namespace with no
				// controller running; nothing mounts tokens here.
				"--disable-admission-plugins=ServiceAccount",
				// The kubernetes Service would get a loopback endpoint,
				// which validation rejects; nothing here needs it.
				"--endpoint-reconciler-type=none",
				"--profiling=false",
				// On SIGTERM, end open watches at once instead of waiting
				// for the HTTP server's timeout (a minute with informers).
				"--shutdown-watch-termination-grace-period=1s",
			}, extra...)),
		}
		if err := a.proc.start(); err != nil {
			return nil, err
		}
		err = poll(deadline, a.proc, func() bool {
			meanwhile(a)
			return a.ready()
		})
		if err == nil {
			return a, nil
		}
		a.proc.stop(syscall.SIGKILL, time.Second)
		if a.proc.exitedWithBindError() && attempt < 5 {
			continue
		}
		return nil, fmt.Errorf("kube-apiserver not ready: %w\n%s", err, a.proc.tail(30))
	}
}

// ready reports whether /readyz answers 200 (every post-start hook done).
func (a *apiserver) ready() bool {
	status, err := a.request(context.Background(), http.MethodGet, "/readyz", nil)
	return err == nil && status == http.StatusOK
}

// request sends one request as AdminUser, without client-go's retries, and
// returns the status code.
func (a *apiserver) request(ctx context.Context, method, path string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, a.url+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// RestartAPIServer stops kube-apiserver (SIGTERM, waiting for it to exit)
// and starts it again on the same port with the same etcd, keys and flags,
// returning once /readyz answers. Clients keep working: their connections
// drop and they reconnect to the same address; watches end and informers
// re-list or resume.
func (c *Cluster) RestartAPIServer(t testing.TB) {
	t.Helper()
	start := time.Now()
	c.StopAPIServer(t)
	c.StartAPIServer(t)
	t.Logf("kube-apiserver restarted in %v", time.Since(start).Round(time.Millisecond))
}

// StopAPIServer stops kube-apiserver (SIGTERM, waiting for it to exit),
// leaving etcd running: the cluster is down for its clients until
// StartAPIServer.
func (c *Cluster) StopAPIServer(t testing.TB) {
	t.Helper()
	c.apiserver.proc.stop(syscall.SIGTERM, 30*time.Second)
}

// StartAPIServer starts a stopped kube-apiserver again on the same port
// with the same etcd, keys and flags, returning once /readyz answers.
func (c *Cluster) StartAPIServer(t testing.TB) {
	t.Helper()
	a := c.apiserver
	// A restart fills the watch cache from etcd while the clients that were
	// cut off list again: with a large fleet that takes longer than a start.
	deadline := time.Now().Add(3 * startBudget)
	for {
		if err := a.proc.start(); err != nil {
			t.Fatalf("restart kube-apiserver: %v", err)
		}
		err := poll(deadline, a.proc, a.ready)
		if err == nil {
			break
		}
		// The old listener can linger for a moment after the exit; the
		// port stays ours, so try again until the deadline.
		if a.proc.exitedWithBindError() && time.Now().Before(deadline) {
			continue
		}
		a.proc.stop(syscall.SIGKILL, time.Second)
		t.Fatalf("restart kube-apiserver: %v\n%s", err, a.proc.tail(30))
	}
	if err := c.primeAllCRDs(t.Context()); err != nil {
		t.Fatalf("restart kube-apiserver: %v", err)
	}
}
