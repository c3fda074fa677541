package clustertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// etcd is the cluster's single etcd member on two loopback ports (client and
// peer), its data under dir/etcd.
type etcd struct {
	proc *process
	url  string // client URL, http://127.0.0.1:PORT
}

// startEtcd starts etcd with its data in dir/etcd: a new member when fresh
// (the folder is emptied first), else the member whose data is already
// there (a snapshot's copy; it keeps its identity and contents, and takes
// the new ports: a single member never dials its recorded peer URL).
func startEtcd(bin, dir string, fresh bool, budget time.Duration) (*etcd, error) {
	data := filepath.Join(dir, "etcd")
	deadline := time.Now().Add(budget)
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(2)
		if err != nil {
			return nil, err
		}
		if fresh {
			if err := os.RemoveAll(data); err != nil {
				return nil, err
			}
		}
		client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		e := &etcd{url: client, proc: newProcess("etcd", bin, filepath.Join(dir, "etcd.log"), []string{
			"--name=default",
			"--data-dir=" + data,
			"--listen-client-urls=" + client,
			"--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=default=" + peer,
			"--initial-cluster-state=new",
			// Data is thrown away with the test; a snapshot is taken
			// from a clean stop and flushed by the copy.
			"--unsafe-no-fsync=true",
			"--enable-grpc-gateway=true",
			// A single member has no peer to wait for: short ticks make it
			// leader in ~0.1 s instead of up to a second.
			"--heartbeat-interval=10",
			"--election-timeout=100",
		})}
		if err := e.proc.start(); err != nil {
			return nil, err
		}
		err = poll(deadline, e.proc, e.healthy)
		if err == nil {
			return e, nil
		}
		e.proc.stop(syscall.SIGKILL, time.Second)
		if e.proc.exitedWithBindError() && attempt < 5 {
			continue
		}
		return nil, fmt.Errorf("etcd not healthy: %w\n%s", err, e.proc.tail(20))
	}
}

func (e *etcd) healthy() bool {
	var h struct {
		Health string `json:"health"`
	}
	if err := e.call(context.Background(), http.MethodGet, "/health", nil, &h); err != nil {
		return false
	}
	return h.Health == "true"
}

// call talks to etcd's HTTP gateway (the v3 API as JSON; int64s are strings).
func (e *etcd) call(ctx context.Context, method, path string, in, out any) error {
	return e.callWithin(ctx, 5*time.Second, method, path, in, out)
}

// callWithin is call with a timeout other than 5 s (a defragmentation of a
// large database takes longer).
func (e *etcd) callWithin(ctx context.Context, timeout time.Duration, method, path string, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.url+path, body)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", path, resp.Status, bytes.TrimSpace(b))
	}
	return json.Unmarshal(b, out)
}

// revision is etcd's current store revision.
func (e *etcd) revision(ctx context.Context) (int64, error) {
	var r struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	// Any key will do: every answer carries the store's revision.
	if err := e.call(ctx, http.MethodPost, "/v3/kv/range", map[string]any{"key": "AA==", "count_only": true}, &r); err != nil {
		return 0, fmt.Errorf("read etcd revision: %w", err)
	}
	return strconv.ParseInt(r.Header.Revision, 10, 64)
}

// EtcdURL is the client URL of the cluster's etcd (plain http on loopback,
// no authentication). The v3 API is also served as JSON at EtcdURL()+"/v3/...".
func (c *Cluster) EtcdURL() string { return c.etcd.url }

// CompactEtcd compacts etcd's history up to its current revision
// (physically, as the API server's own compactor does every five minutes)
// and returns that revision; etcd then refuses reads at older revisions.
// kube-apiserver answers most reads from its watch cache, which keeps its
// own window: watches, exact-revision lists and continue tokens from inside
// that window keep working after a compaction. The cache starts afresh at
// the current revision when the API server starts, so CompactEtcd followed
// by RestartAPIServer makes every older resourceVersion 410 Gone for good,
// which is how a test forces an informer to relist from scratch.
//
// The compaction gets maintenanceBudget(revision): a physical compaction
// of a 10,000-App fleet's history takes minutes, not seconds.
func (c *Cluster) CompactEtcd(t testing.TB) int64 {
	t.Helper()
	rev, err := c.etcd.compact(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// maintenanceBudget is how long a compaction or a defragmentation of a
// store at revision rev may take: five minutes, and another minute for
// every 25,000 revisions past the first 100,000 (a 10,000-App fleet is at
// about 350,000: 15 minutes). Both steps rewrite the whole database, and
// on a two-core machine they take about as long as each other.
func maintenanceBudget(rev int64) time.Duration {
	d := 5 * time.Minute
	if extra := rev - 100_000; extra > 0 {
		d += time.Duration((extra+24_999)/25_000) * time.Minute
	}
	return d
}

// maintain runs one maintenance step (a POST to path) within budget; a
// failure names the step and how long it ran.
func (e *etcd) maintain(ctx context.Context, step, path string, in any, budget time.Duration) error {
	start := time.Now()
	err := e.callWithin(ctx, budget, http.MethodPost, path, in, &struct{}{})
	if err != nil {
		return fmt.Errorf("%s: failed after %s (budget %s): %w", step, time.Since(start).Round(time.Millisecond), budget, err)
	}
	return nil
}

// compact compacts etcd's history up to its current revision, physically,
// within maintenanceBudget, and returns the revision. Compacting at a
// revision already compacted is not an error.
func (e *etcd) compact(ctx context.Context) (int64, error) {
	rev, err := e.revision(ctx)
	if err != nil {
		return 0, fmt.Errorf("compact etcd: %w", err)
	}
	req := map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true}
	err = e.maintain(ctx, fmt.Sprintf("compact etcd at revision %d", rev), "/v3/kv/compaction", req, maintenanceBudget(rev))
	if err != nil && !strings.Contains(err.Error(), "required revision has been compacted") {
		return rev, err
	}
	return rev, nil
}

// defragment rewrites etcd's database without the space compaction freed,
// within the budget of a store at revision rev.
func (e *etcd) defragment(ctx context.Context, rev int64) error {
	return e.maintain(ctx, "defragment etcd", "/v3/maintenance/defragment", struct{}{}, maintenanceBudget(rev))
}

// poll calls ready until it says yes, the process exits (errExited) or the
// deadline passes. The interval starts short, so a fast start is seen fast.
func poll(deadline time.Time, p *process, ready func() bool) error {
	interval := 10 * time.Millisecond
	for {
		if ready() {
			return nil
		}
		if p.exited() {
			return errExited
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready by the deadline", p.name)
		}
		time.Sleep(interval)
		if interval < 100*time.Millisecond {
			interval += 10 * time.Millisecond
		}
	}
}

// countKeys counts etcd's keys under prefix.
func (e *etcd) countKeys(ctx context.Context, prefix string) (int64, error) {
	var r struct {
		Count string `json:"count"`
	}
	req := map[string]any{"key": []byte(prefix), "range_end": prefixEnd([]byte(prefix)), "count_only": true}
	if err := e.call(ctx, http.MethodPost, "/v3/kv/range", req, &r); err != nil {
		return 0, fmt.Errorf("count etcd keys under %s: %w", prefix, err)
	}
	if r.Count == "" {
		return 0, nil
	}
	return strconv.ParseInt(r.Count, 10, 64)
}

// prefixEnd is the end of the key range holding every key with prefix.
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return []byte{0}
}

// stopCleanly stops etcd with SIGTERM and waits for it to exit by itself,
// which leaves a consistent data folder (its database closed, its WAL
// synced); a stop that needed SIGKILL is an error.
func (e *etcd) stopCleanly() error {
	e.proc.stop(syscall.SIGTERM, 2*time.Minute)
	cmd, _ := e.proc.current()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		return fmt.Errorf("etcd did not stop on SIGTERM within 2 minutes; killed\n%s", e.proc.tail(20))
	}
	return nil
}

// restart starts the stopped etcd again with the same flags (ports, data)
// and waits until it is healthy. The old listeners can linger a moment
// after the exit; the ports stay ours, so a bind error is retried.
func (e *etcd) restart(budget time.Duration) error {
	deadline := time.Now().Add(budget)
	for {
		if err := e.proc.start(); err != nil {
			return fmt.Errorf("restart etcd: %w", err)
		}
		err := poll(deadline, e.proc, e.healthy)
		if err == nil {
			return nil
		}
		if e.proc.exitedWithBindError() && time.Now().Before(deadline) {
			continue
		}
		e.proc.stop(syscall.SIGKILL, time.Second)
		return fmt.Errorf("restart etcd: %w\n%s", err, e.proc.tail(20))
	}
}
