package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/hanzoai/deploy/auth/authtest"
	"github.com/hanzoai/deploy/cluster/clustertest"
)

// drainStream is one applications stream read to its end.
type drainStream struct {
	live  chan struct{} // closed at its first event id (the burst's end)
	done  chan struct{} // closed when it ended
	ended time.Time
	last  string // the last line received
}

// openStream opens GET /v1/deploy/stream/applications and reads it to its
// end in its own goroutine; it returns the status, and the stream when 200.
func openStream(t *testing.T, client *http.Client, base, token string) (int, *drainStream) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/v1/deploy/stream/applications", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	s := &drainStream{live: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		live := false
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				continue
			}
			s.last = line
			if !live && strings.HasPrefix(line, "id:") {
				live = true
				close(s.live)
			}
		}
		s.ended = time.Now()
	}()
	return resp.StatusCode, s
}

// drainingDeployd is the built binary serving a real API server that holds
// three Apps, with the drain's timing set, and a SuperAdmin's token.
type drainingDeployd struct {
	t       *testing.T
	cmd     *exec.Cmd
	base    string
	token   string
	logs    *authtest.LogBuffer
	exited  chan struct{} // closed when the process exited
	exitErr error         // its Wait's error, once exited is closed
}

func startDrainingDeployd(t *testing.T, delay, spread time.Duration) *drainingDeployd {
	t.Helper()
	c := clustertest.Start(t)
	c.Apply(t, clustertest.Object(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: hanzo}\n"))
	for _, name := range []string{"web", "api", "worker"} {
		c.Apply(t, clustertest.Object(t, fmt.Sprintf(
			"apiVersion: hanzo.ai/v1\nkind: App\nmetadata: {name: %s, namespace: hanzo}\nspec: {image: {repository: ghcr.io/hanzoai/%s, tag: v1.0.0}}\n", name, name)))
	}
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	bin := buildDeployd(t)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	d := &drainingDeployd{t: t, base: "http://" + addr, logs: &authtest.LogBuffer{}, exited: make(chan struct{})}
	d.cmd = exec.Command(bin, "serve", "--listen", addr, "--metrics-listen=", "--kubeconfig", c.Kubeconfig)
	d.cmd.Env = append(os.Environ(), "LOG_LEVEL=info", "DEPLOY_PUBLIC_URL="+d.base, "DEPLOY_ENGINE_ENABLED=false",
		"IAM_ENDPOINT="+m.Issuer(), "DEPLOY_IAM_CLIENT_ID="+m.ClientID, "DEPLOY_IAM_CLIENT_SECRET="+m.ClientSecret,
		"DEPLOYD_DRAIN_DELAY="+delay.String(), "DEPLOYD_DRAIN_SPREAD="+spread.String())
	d.cmd.Stdout, d.cmd.Stderr = d.logs, d.logs
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.exitErr = d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
		if t.Failed() {
			t.Logf("deployd's log:\n%s", d.logs.String())
		}
	})
	waitHealthy(t, d.base, 2*time.Minute)
	if d.token, err = authtest.IDToken(m, admin, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := d.get("/v1/deploy/applications")
		if code == http.StatusOK && strings.Count(body, `"namespace":"hanzo"`) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the list never held the three Apps: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return d
}

// get is a GET of path, with the token but for the health probe.
func (d *drainingDeployd) get(path string) (int, string) {
	d.t.Helper()
	req, _ := http.NewRequestWithContext(d.t.Context(), http.MethodGet, d.base+path, nil)
	if path != "/v1/deploy/health" {
		req.Header.Set("Authorization", "Bearer "+d.token)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		d.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// openLive opens n applications streams and waits for each one's burst.
func (d *drainingDeployd) openLive(client *http.Client, n int) []*drainStream {
	d.t.Helper()
	var open []*drainStream
	for range n {
		code, s := openStream(d.t, client, d.base, d.token)
		if code != http.StatusOK {
			d.t.Fatalf("stream: %d", code)
		}
		open = append(open, s)
	}
	for i, s := range open {
		select {
		case <-s.live:
		case <-s.done:
			d.t.Fatalf("stream %d ended before its burst (last line %q)", i, s.last)
		case <-time.After(30 * time.Second):
			d.t.Fatalf("stream %d: no burst in 30 s", i)
		}
	}
	return open
}

// waitExit waits for the process to exit 0 within limit of since.
func (d *drainingDeployd) waitExit(since time.Time, limit time.Duration) time.Duration {
	d.t.Helper()
	select {
	case <-d.exited:
		if d.exitErr != nil {
			d.t.Errorf("deployd exited with %v, want 0", d.exitErr)
		}
	case <-time.After(time.Until(since.Add(limit))):
		d.t.Fatalf("deployd still running %v after SIGTERM", limit)
	}
	return time.Since(since)
}

// TestDrainOnSIGTERM runs the built binary against a real API server with
// DEPLOYD_DRAIN_DELAY=1s and DEPLOYD_DRAIN_SPREAD=2s, holds 20 applications
// streams of a SuperAdmin, and sends SIGTERM: the health probe answers 503
// at once while lists and new streams are still served during the delay;
// then new streams are refused and the open ones end one by one across the
// spread, each with the drain's comment last, none before the delay; and
// the process exits 0 in time.
func TestDrainOnSIGTERM(t *testing.T) {
	const (
		delay   = time.Second
		spread  = 2 * time.Second
		streams = 20
	)
	d := startDrainingDeployd(t, delay, spread)
	base, token, get := d.base, d.token, d.get
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()
	open := d.openLive(client, streams)

	sigAt := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Readiness fails at once; liveness (the port answers) holds.
	for {
		code, body := get("/v1/deploy/health")
		if code == http.StatusServiceUnavailable {
			if !strings.Contains(body, drainingReason) {
				t.Errorf("health while draining: %s, want the reason %q", body, drainingReason)
			}
			break
		}
		if time.Since(sigAt) > time.Second {
			t.Fatalf("health still answers %d %s a second after SIGTERM", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Everything else is served during the delay, new streams included.
	if code, body := get("/v1/deploy/applications"); code != http.StatusOK {
		t.Errorf("list during the delay: %d %s", code, body)
	}
	code, late := openStream(t, client, base, token)
	if code != http.StatusOK {
		t.Errorf("a new stream during the delay: %d, want 200", code)
	} else {
		open = append(open, late)
	}
	if d := time.Since(sigAt); d >= delay {
		t.Fatalf("the checks of the delay ran until %v after SIGTERM, past the delay %v", d, delay)
	}
	// During the spread, new streams are refused.
	time.Sleep(time.Until(sigAt.Add(delay + spread/4)))
	if code, s := openStream(t, client, base, token); code != http.StatusServiceUnavailable {
		t.Errorf("a new stream during the spread: %d, want 503", code)
		if s != nil {
			<-s.done
		}
	}

	exitAt := d.waitExit(sigAt, delay+spread+5*time.Second)

	var first, last time.Duration
	for i, s := range open {
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			t.Fatalf("stream %d still open after the process exited", i)
		}
		at := s.ended.Sub(sigAt)
		if at < delay {
			t.Errorf("stream %d ended %v after SIGTERM, within the delay %v", i, at, delay)
		}
		if s.last != ": drain" {
			t.Errorf("stream %d ended after %q, want the drain's comment last", i, s.last)
		}
		if i == 0 || at < first {
			first = at
		}
		last = max(last, at)
	}
	t.Logf("%d streams ended from %v to %v after SIGTERM; the process exited after %v", len(open), first, last, exitAt)
	if last-first < spread/2 {
		t.Errorf("the streams ended within %v of each other, want them spread over %v", last-first, spread)
	}
	if last > delay+spread+time.Second {
		t.Errorf("the last stream ended %v after SIGTERM, past the delay and the spread (%v)", last, delay+spread)
	}
	if !strings.Contains(d.logs.String(), "drained: every stream ended") {
		t.Errorf("the log does not say the drain completed")
	}
}

// TestDrainSecondSignal: a second SIGTERM during the drain's delay ends it
// at once: the streams are cut off and the process exits 0 long before
// the delay and the spread are over.
func TestDrainSecondSignal(t *testing.T) {
	const delay, spread = 20 * time.Second, 20 * time.Second
	d := startDrainingDeployd(t, delay, spread)
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()
	open := d.openLive(client, 5)
	sigAt := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for {
		if code, _ := d.get("/v1/deploy/health"); code == http.StatusServiceUnavailable {
			break
		}
		if time.Since(sigAt) > time.Second {
			t.Fatal("health still answers 200 a second after SIGTERM")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exitAt := d.waitExit(sigAt, 5*time.Second)
	for i, s := range open {
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			t.Fatalf("stream %d still open after the process exited", i)
		}
	}
	t.Logf("the process exited %v after the first SIGTERM", exitAt)
	if !strings.Contains(d.logs.String(), "drain cut short by a second signal") {
		t.Errorf("the log does not say the drain was cut short")
	}
}
