package clustertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SnapshotsEnv names the folder snapshots are kept in (see SnapshotDir).
const SnapshotsEnv = "DEPLOYD_SNAPSHOTS"

// SnapshotDir is where snapshots live: $DEPLOYD_SNAPSHOTS, else
// <ToolsDir()>/../snapshots (beside the tools, ~/.cache/deployd/snapshots).
func SnapshotDir() string {
	if d := os.Getenv(SnapshotsEnv); d != "" {
		return d
	}
	return filepath.Join(filepath.Dir(filepath.Clean(ToolsDir())), "snapshots")
}

// WithSnapshot starts the cluster from a cached copy of etcd's data for key, or,
// when none is cached, starts it empty, calls load, and caches etcd's data under key
// before returning. key must be a safe file name; callers put the fleet's size and
// the fleet generator's version in it.
//
// The key is the whole identity of a snapshot: nothing else is compared, so
// a key must change whenever what load creates changes (a hash of what it
// renders, as FleetSnapshot does) — a stale snapshot is otherwise reused.
// A key is 1 to 128 letters, digits, '.', '_' or '-', not starting with
// '.' or '-'. The snapshot holds the CRDs installed before load ran; Start
// updates them to deploy/crds as usual, and refuses WithoutCRDs with a
// snapshot. load runs before WithControllers starts the controllers; a load
// that fails the test (t.FailNow, t.Error) or panics leaves nothing cached.
// See the package documentation (Snapshots) for how the copy is made.
func WithSnapshot(key string, load func(t testing.TB, c *Cluster)) Option {
	return func(o *options) {
		o.snapshot = &snapshotOption{key: func(testing.TB) string { return key }, load: load}
	}
}

// snapshotOption is what WithSnapshot asked for; key is computed in Start
// (FleetSnapshot's key needs the test, to find deploy/crds).
type snapshotOption struct {
	key  func(t testing.TB) string
	load func(t testing.TB, c *Cluster)
}

var keyPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)

// checkKey reports whether key is usable as a snapshot's folder name.
func checkKey(key string) error {
	if !keyPattern.MatchString(key) {
		return fmt.Errorf("snapshot key %q: use 1 to 128 letters, digits, '.', '_' or '-', not starting with '.' or '-'", key)
	}
	return nil
}

// Layout of SnapshotDir: <key>/etcd is a complete etcd data folder and
// <key>/snapshot.json its metadata; .tmp/ holds snapshots being written;
// .locks/<key> is held (flock) by the run loading key.
const (
	snapshotMeta = "snapshot.json"
	tmpFolder    = ".tmp"
	locksFolder  = ".locks"
)

// snapshotMetadata is <key>/snapshot.json, written before the rename that
// publishes a snapshot.
type snapshotMetadata struct {
	Key      string    `json:"key"`
	Created  time.Time `json:"created"`
	Load     string    `json:"load"`     // how long load took
	Revision int64     `json:"revision"` // etcd's revision when taken
	Keys     int64     `json:"keys"`     // etcd keys under /registry/
	Bytes    int64     `json:"bytes"`    // size of the etcd data
	EtcdURL  string    `json:"etcdURL"`  // the client URL it was written through
}

// snapshotPlan is what Start does about a snapshot: copy seed (a cached etcd
// data folder) or, with seed empty, load and save under lock.
type snapshotPlan struct {
	key    string
	dir    string // SnapshotDir()/key
	seed   string // dir/etcd when cached
	meta   snapshotMetadata
	unlock func()
}

// planSnapshot finds the snapshot for o's key, or takes the key's lock so
// this run loads it. A run that finds the lock taken waits for its holder:
// concurrent first runs load once, and the others start from its snapshot.
// The lock is an flock, so a holder that dies releases it.
func planSnapshot(t testing.TB, o *snapshotOption) *snapshotPlan {
	t.Helper()
	key := o.key(t)
	if err := checkKey(key); err != nil {
		t.Fatal(err)
	}
	root := SnapshotDir()
	p := &snapshotPlan{key: key, dir: filepath.Join(root, key), unlock: func() {}}
	if p.find(t) {
		return p
	}
	if err := os.MkdirAll(filepath.Join(root, locksFolder), 0o755); err != nil {
		t.Fatalf("snapshot %s: %v", key, err)
	}
	lock, err := os.OpenFile(filepath.Join(root, locksFolder, key), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("snapshot %s: lock: %v", key, err)
	}
	unlocked := false
	p.unlock = func() {
		if !unlocked {
			unlocked = true
			lock.Close() // releases the flock
		}
	}
	t.Cleanup(p.unlock)
	if err := acquire(t.Context(), lock, func() { t.Logf("snapshot %s: another run is loading it; waiting for it", key) }); err != nil {
		t.Fatalf("snapshot %s: lock: %v", key, err)
	}
	if p.find(t) { // the run we waited for saved it
		p.unlock()
		return p
	}
	// Whatever is left in .tmp for this key was written by a holder of this
	// lock that died: never trusted, removed.
	stale, _ := filepath.Glob(filepath.Join(root, tmpFolder, key+".*"))
	for _, s := range stale {
		if err := os.RemoveAll(s); err != nil {
			t.Fatalf("snapshot %s: remove an unfinished snapshot: %v", key, err)
		}
	}
	return p
}

// find reports whether the snapshot is cached, reading its metadata.
func (p *snapshotPlan) find(t testing.TB) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(p.dir, snapshotMeta))
	if errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(p.dir); err == nil {
			t.Fatalf("snapshot %s: %s has no %s, so it was not written by WithSnapshot; remove it", p.key, p.dir, snapshotMeta)
		}
		return false
	}
	if err == nil {
		err = json.Unmarshal(b, &p.meta)
	}
	if err != nil {
		t.Fatalf("snapshot %s: %v (remove %s to load it again)", p.key, err, p.dir)
	}
	p.seed = filepath.Join(p.dir, "etcd")
	return true
}

// acquire takes an exclusive flock on f, calling waiting once if it must
// wait; it gives up when ctx ends.
func acquire(ctx context.Context, f *os.File, waiting func()) error {
	for first := true; ; first = false {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		if first {
			waiting()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// loadAndSave runs the plan's load and saves etcd's data under its key,
// unless the test failed; a panic or FailNow in load skips the save.
func (c *Cluster) loadAndSave(t testing.TB, p *snapshotPlan, load func(testing.TB, *Cluster)) {
	t.Helper()
	start := time.Now()
	load(t, c)
	took := time.Since(start)
	if t.Failed() {
		t.Fatalf("snapshot %s: not saved, the test failed while loading it", p.key)
	}
	c.saveSnapshot(t, p, took)
	p.unlock()
}

// saveSnapshot compacts and defragments etcd, stops it cleanly, copies its
// data to a folder in .tmp and renames that to the key's, then starts etcd
// again on the same ports with the same data and waits until the running
// API server lists through it again.
func (c *Cluster) saveSnapshot(t testing.TB, p *snapshotPlan, loadTook time.Duration) {
	t.Helper()
	ctx := t.Context()
	began := time.Now()
	namespaces, err := c.clientset.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("snapshot %s: list namespaces: %v", p.key, err)
	}
	// The same steps and budgets whatever the fleet's size: the small
	// fleet under make test takes this path as the 10,000-App one does.
	rev, err := c.etcd.compact(ctx)
	if err != nil {
		t.Fatalf("snapshot %s: %v", p.key, err)
	}
	if err := c.etcd.defragment(ctx, rev); err != nil {
		t.Fatalf("snapshot %s: %v", p.key, err)
	}
	keys, err := c.etcd.countKeys(ctx, "/registry/")
	if err != nil {
		t.Fatalf("snapshot %s: %v", p.key, err)
	}

	if err := c.etcd.stopCleanly(); err != nil {
		t.Fatalf("snapshot %s: %v", p.key, err)
	}
	tmpRoot := filepath.Join(SnapshotDir(), tmpFolder)
	if err := os.MkdirAll(tmpRoot, 0o755); err != nil {
		t.Fatalf("snapshot %s: %v", p.key, err)
	}
	tmp := filepath.Join(tmpRoot, p.key+"."+randomSuffix())
	published := false
	defer func() {
		if !published {
			os.RemoveAll(tmp)
		}
	}()
	copied, err := copyTree(filepath.Join(c.Dir, "etcd"), filepath.Join(tmp, "etcd"), true)
	if err != nil {
		t.Fatalf("snapshot %s: copy etcd data: %v", p.key, err)
	}
	p.meta = snapshotMetadata{Key: p.key, Created: time.Now().UTC(), Load: loadTook.Round(time.Millisecond).String(),
		Revision: rev, Keys: keys, Bytes: copied.bytes, EtcdURL: c.etcd.url}
	if err := writeSynced(filepath.Join(tmp, snapshotMeta), p.meta); err != nil {
		t.Fatalf("snapshot %s: %v", p.key, err)
	}
	if err := syncDir(tmp); err != nil {
		t.Fatalf("snapshot %s: %v", p.key, err)
	}
	// The lock makes this run the only writer of key; the rename publishes
	// the complete folder at once. It never replaces a folder: should one
	// be there all the same (written without the lock), the first stays.
	if err := os.Rename(tmp, p.dir); err == nil {
		published = true
	} else if _, serr := os.Stat(filepath.Join(p.dir, snapshotMeta)); serr == nil {
		t.Logf("snapshot %s: another run saved it first; keeping that one", p.key)
	} else {
		t.Fatalf("snapshot %s: publish: %v", p.key, err)
	}
	if err := syncDir(filepath.Dir(p.dir)); err != nil {
		t.Fatalf("snapshot %s: %v", p.key, err)
	}

	if err := c.etcd.restart(startBudget); err != nil {
		t.Fatalf("snapshot %s: %v", p.key, err)
	}
	// The API server's etcd client reconnects by itself; a quorum list
	// goes through etcd, so it answering with the same namespaces shows
	// the API server is back.
	c.WaitFor(t, startBudget, func() (bool, error) {
		list, err := c.clientset.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		if len(list.Items) != len(namespaces.Items) {
			return false, fmt.Errorf("snapshot %s: %d namespaces after etcd restarted, want %d", p.key, len(list.Items), len(namespaces.Items))
		}
		return true, nil
	})
	t.Logf("snapshot %s: loaded in %v; saved %d etcd keys (revision %d), %s in %d files by %s, in %v (etcd stopped, copied, restarted, API server listing again)",
		p.key, loadTook.Round(time.Second), keys, rev, mib(copied.bytes), copied.files, copied.method,
		time.Since(began).Round(time.Millisecond))
}

func mib(n int64) string { return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB" }

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func writeSynced(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}
