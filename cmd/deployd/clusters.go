package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"

	"github.com/hanzoai/deploy/cluster"
	"github.com/hanzoai/deploy/engine"
	"github.com/hanzoai/deploy/handlers"
	"github.com/hanzoai/deploy/metrics"
	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/stream"
)

// The clusters serve reads (ADR 0012):
//
//	DEPLOY_CLUSTER_NAME   the name of the cluster deployd runs in (or that
//	                      --kubeconfig/--context reach): in-cluster
//	DEPLOY_CLUSTERS_FILE  a YAML file adding more (cluster.ParseClusters):
//	                      clusters: [{name, kubeconfig, context, namespaces, engine}]
//
// Each cluster has its own watcher, all feeding the one projection; the
// other clusters' namespaces are qualified with their names.

// clustersFromEnv reads the first cluster's name and the clusters file.
// An error names the variable, the cluster and the field.
func clustersFromEnv(getenv func(string) string) (string, []cluster.Entry, error) {
	first := getenv("DEPLOY_CLUSTER_NAME")
	if first == "" {
		first = cluster.DefaultName
	}
	if err := cluster.CheckName(first); err != nil {
		return "", nil, fmt.Errorf("DEPLOY_CLUSTER_NAME %w", err)
	}
	path := getenv("DEPLOY_CLUSTERS_FILE")
	if path == "" {
		return first, nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("DEPLOY_CLUSTERS_FILE %s cannot be read: %w", path, errors.Unwrap(err))
	}
	entries, err := cluster.ParseClusters(data, first)
	if err != nil {
		return "", nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return first, entries, nil
}

// clusterSet is the clusters a plane reads: the first, then the others in the
// order of projection.Config.Clusters.
type clusterSet struct {
	names    []string
	servers  []string
	watchers []*cluster.Watcher
	// ready latches once every cluster that answers has synced.
	ready atomic.Bool

	// last is the status last worked out, at and in how long: a look
	// at hundreds of clusters costs milliseconds, so an answer is reused
	// for ten times as long as it took, at most statusReuse (status).
	mu       sync.Mutex
	last     handlers.ClusterStatus
	lastAt   time.Time
	lastCost time.Duration
}

func newClusterSet(pcfg projection.Config, first *cluster.Watcher, others []*cluster.Watcher) *clusterSet {
	f := &clusterSet{watchers: append([]*cluster.Watcher{first}, others...)}
	for i, w := range f.watchers {
		name, server := pcfg.Cluster(i)
		f.names, f.servers = append(f.names, name), append(f.servers, server)
		if len(f.watchers) > 1 {
			// A cluster that first answers once the plane is ready (and
			// serves streams) is folded at once, not kind by kind.
			w.HoldLate(f.ready.Load, projection.Change{Op: projection.Unreachable, Cluster: i})
		}
	}
	return f
}

// several reports whether there is more than one cluster.
func (f *clusterSet) several() bool { return len(f.watchers) > 1 }

// entries are the clusters' states, for GET /api/v1/clusters.
func (f *clusterSet) entries() []handlers.ClusterEntry {
	out := make([]handlers.ClusterEntry, len(f.watchers))
	for i, w := range f.watchers {
		out[i] = handlers.ClusterEntry{Name: f.names[i], Server: f.servers[i], Status: clusterStatus(w)()}
	}
	return out
}

// status is the clusters' state as one: ready once every cluster that
// answers has synced and at least one has (a cluster that does not
// answer is reported, not waited for); it stays ready after.
func (f *clusterSet) status() handlers.ClusterStatus {
	if !f.several() {
		return clusterStatus(f.watchers[0])()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := time.Now(); !f.lastAt.IsZero() && now.Sub(f.lastAt) < min(10*f.lastCost, statusReuse) {
		return f.last
	}
	began := time.Now()
	f.last = f.look()
	f.lastAt, f.lastCost = time.Now(), time.Since(began)
	return f.last
}

// statusReuse bounds how long a status is reused: what readiness and the
// health route may lag behind the clusters.
const statusReuse = 200 * time.Millisecond

// look works the status of every cluster out.
func (f *clusterSet) look() handlers.ClusterStatus {
	var out handlers.ClusterStatus
	synced, waiting := 0, ""
	for i, w := range f.watchers {
		st := w.Status()
		if i == 0 {
			out.ServerVersion, out.CheckedAt = w.ServerVersion(), st.CheckedAt
		}
		out.Configured = out.Configured || st.Configured
		out.Reachable = out.Reachable || st.Reachable
		out.AppCRD = out.AppCRD || st.AppCRD
		out.CDCRD = out.CDCRD || st.CDCRD
		switch {
		case st.Ready():
			synced++
		case !st.Configured || (!st.CheckedAt.IsZero() && !st.Reachable):
			// reported, not waited for
		case waiting == "":
			waiting = "cluster " + f.names[i] + ": " + st.Reason
			out.Progress = st.Progress
		}
	}
	if !f.ready.Load() && waiting == "" && synced > 0 {
		f.ready.Store(true)
	}
	out.Ready = f.ready.Load()
	switch {
	case out.Ready:
		out.Progress = ""
	case waiting != "":
		out.Reason = waiting
	default:
		out.Reason = "no cluster answers"
	}
	return out
}

// listedAt is the position the initial lists reached: each synced
// cluster's newest listed resourceVersion, 0 for one not synced.
func (f *clusterSet) listedAt(names []string) projection.Position {
	p := projection.ZeroPosition(names)
	for i, w := range f.watchers {
		if w.Status().Ready() {
			p = p.With(i, w.ListedAt())
		}
	}
	return p
}

// otherMetrics reads the other clusters' states for the metrics; nil with
// one cluster.
func (f *clusterSet) otherMetrics(feed *cluster.Feed) func() []metrics.Cluster {
	if !f.several() {
		return nil
	}
	return func() []metrics.Cluster {
		out := make([]metrics.Cluster, 0, len(f.watchers)-1)
		for i, w := range f.watchers[1:] {
			cl := clusterMetrics(w, feed)()
			cl.Server, cl.Name = f.servers[i+1], f.names[i+1]
			out = append(out, cl)
		}
		return out
	}
}

// reportUnreachable tells the projection, through the feed, when a
// cluster's API server stops or starts answering again (looked at each
// second): the cluster's Apps carry a condition while it does not.
func (f *clusterSet) reportUnreachable(ctx context.Context, feed *cluster.Feed) {
	last := make([]int64, len(f.watchers))
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for i, w := range f.watchers {
			var since int64
			if at := w.Status().FailedSince; !at.IsZero() {
				since = at.Unix()
			}
			if since != last[i] {
				last[i] = since
				feed.Push(projection.Change{Op: projection.Unreachable, Cluster: i, Since: since})
			}
		}
	}
}

// watcher is the watcher of a qualified namespace's cluster and the
// namespace as that cluster names it.
func (f *clusterSet) watcher(q string) (*cluster.Watcher, string, error) {
	ns, name := projection.SplitNamespace(q)
	if name == "" {
		return f.watchers[0], ns, nil
	}
	for i := 1; i < len(f.names); i++ {
		if f.names[i] == name {
			return f.watchers[i], ns, nil
		}
	}
	return nil, "", fmt.Errorf("namespace %q names no cluster deployd reads", q)
}

// fleetReader sends the routes' live reads and writes to the cluster the
// namespace names (handlers.LiveReader, Writer, LogReader, EventReader).
type fleetReader struct{ f *clusterSet }

func (r fleetReader) Get(ctx context.Context, kind projection.Kind, namespace, name string) (map[string]any, error) {
	w, ns, err := r.f.watcher(namespace)
	if err != nil {
		return nil, err
	}
	return w.Get(ctx, kind, ns, name)
}

func (r fleetReader) MergePatch(ctx context.Context, kind projection.Kind, namespace, name string, patch []byte) (map[string]any, error) {
	w, ns, err := r.f.watcher(namespace)
	if err != nil {
		return nil, err
	}
	return w.MergePatch(ctx, kind, ns, name, patch)
}

func (r fleetReader) Events(ctx context.Context, namespace, uid string) ([]map[string]any, error) {
	w, ns, err := r.f.watcher(namespace)
	if err != nil {
		return nil, err
	}
	return w.Events(ctx, ns, uid)
}

func (r fleetReader) Logs(ctx context.Context, q handlers.LogRequest) (io.ReadCloser, error) {
	w, ns, err := r.f.watcher(q.Namespace)
	if err != nil {
		return nil, err
	}
	return w.PodLogs(ctx, ns, q.Pod, q.Container, q.TailLines, q.LimitBytes, q.Follow, q.Timestamps)
}

// fleetHistory answers the stream hub's History from every cluster's API
// server: each cluster's row objects at its part of the position.
type fleetHistory struct {
	f     *clusterSet
	store *projection.Store
}

func (h fleetHistory) RowsAt(ctx context.Context, pos projection.Position) (*stream.PastRows, error) {
	var objs []*projection.Object
	for i, w := range h.f.watchers {
		rv := pos.Of(i)
		if rv == 0 {
			continue // the client held nothing of this cluster
		}
		part, err := w.RootsAt(ctx, rv)
		if errors.Is(err, cluster.ErrHistoryGone) {
			return nil, fmt.Errorf("%w: cluster %s: %w", stream.ErrHistoryGone, h.f.names[i], err)
		}
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", h.f.names[i], err)
		}
		objs = append(objs, part...)
	}
	return &stream.PastRows{Rows: h.store.PastRows(objs)}, nil
}

// otherCluster is a cluster of the clusters file, as serve reads it.
type otherCluster struct {
	entry   cluster.Entry
	rc      *rest.Config
	watcher *cluster.Watcher
}

// newOtherWatchers makes a watcher for each cluster of the clusters file,
// feeding feed, and adds each to pcfg.Clusters (with the source of its
// engine, when it names one: engEnv). A kubeconfig that cannot be read
// stops serve, naming the cluster; a cluster that does not answer does
// not.
func newOtherWatchers(entries []cluster.Entry, pcfg *projection.Config, engEnv engineEnv, feed *cluster.Feed, log *slog.Logger) ([]otherCluster, error) {
	var out []otherCluster
	for _, e := range entries {
		rc, where, err := cluster.RESTConfig(e.Source())
		if err != nil {
			return nil, fmt.Errorf("%w: cluster %q: kubeconfig: %v", cluster.ErrClustersFile, e.Name, err)
		}
		ns := e.NamespaceMap(pcfg.Namespaces)
		clog := log.With("cluster", e.Name)
		clog.Info("cluster configuration", "from", where, "host", rc.Host)
		w, err := cluster.NewWatcher(rc, "", feed, cluster.Options{Namespaces: ns, Cluster: e.Name, Log: clog, Discovery: cluster.FleetDiscovery(1 + len(entries))})
		if err != nil {
			return nil, fmt.Errorf("cluster %q: %w", e.Name, err)
		}
		ref := projection.ClusterRef{Name: e.Name, Server: rc.Host, Namespaces: ns}
		if e.Engine != nil {
			cfg, err := clusterEngineConfig(engEnv.Config, e, ns)
			if err != nil {
				return nil, err
			}
			src := cfg.Source()
			ref.Engine, ref.EngineInstance = &src, cfg.Instance
		}
		pcfg.Clusters = append(pcfg.Clusters, ref)
		out = append(out, otherCluster{entry: e, rc: rc, watcher: w})
	}
	return out, nil
}

// watchers are the clusters' watchers.
func watchersOf(others []otherCluster) []*cluster.Watcher {
	out := make([]*cluster.Watcher, len(others))
	for i, o := range others {
		out[i] = o.watcher
	}
	return out
}

// clusterEngineConfig is the configuration of the engine a cluster's entry
// names: the DEPLOY_ENGINE_* settings (first, the first cluster's) with
// the entry's repository, ref and path (the settings' when it leaves one
// out) and the cluster's namespace map. Its fetched repository has a
// folder of its own. An error names the cluster and the field.
func clusterEngineConfig(base engine.Config, e cluster.Entry, ns projection.Namespaces) (engine.Config, error) {
	cfg := base
	cfg.Repo = e.Engine.Repo
	if e.Engine.Ref != "" {
		cfg.Ref = e.Engine.Ref
	}
	if e.Engine.Path != "" {
		cfg.Path = e.Engine.Path
	}
	cfg.Namespaces = ns
	if cfg.CacheDir == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		cfg.CacheDir = filepath.Join(dir, "deployd", "engine", cfg.Instance)
	}
	cfg.CacheDir += "@" + e.Name
	cfg.Lease = nil
	if err := cfg.Validate(); err != nil {
		var ce *engine.ConfigError
		if errors.As(err, &ce) {
			field := map[string]string{"Repo": "engine.repo", "Ref": "engine.ref", "Path": "engine.path", "Namespace": "DEPLOY_ENGINE_NAMESPACE (not in the cluster's namespaces)"}[ce.Field]
			if field == "" {
				return cfg, fmt.Errorf("cluster %q: engine: %w", e.Name, engineConfigError(err))
			}
			return cfg, fmt.Errorf("%w: cluster %q: %s: %s", cluster.ErrClustersFile, e.Name, field, ce.Msg)
		}
		return cfg, fmt.Errorf("%w: cluster %q: engine: %v", cluster.ErrClustersFile, e.Name, err)
	}
	return cfg, nil
}

// newClusterEngines builds the engine of each cluster whose entry names
// one, writing to that cluster: its Lease and state ConfigMap are that
// cluster's (in the namespace the first cluster's engine uses, which must
// exist there), so one cluster's engine leads, runs and fails on its own.
func newClusterEngines(others []otherCluster, engEnv engineEnv, lease *engine.LeaseConfig, pcfg projection.Config, log *slog.Logger) (map[string]handlers.Engine, error) {
	out := map[string]handlers.Engine{}
	for _, o := range others {
		if o.entry.Engine == nil {
			continue
		}
		cfg, err := clusterEngineConfig(engEnv.Config, o.entry, o.entry.NamespaceMap(pcfg.Namespaces))
		if err != nil {
			return nil, err
		}
		if lease != nil {
			l := *lease
			cfg.Lease = &l
		}
		clog := log.With("cluster", o.entry.Name)
		e, err := engine.New(cfg, o.rc, clog)
		if err != nil {
			return nil, fmt.Errorf("cluster %q: engine: %w", o.entry.Name, engineConfigError(err))
		}
		clog.Info("engine enabled", "repo", cfg.Repo, "ref", cfg.Ref, "path", cfg.Path, "instance", cfg.Instance,
			"prune", cfg.Prune, "interval", cfg.Interval.String(), "credentials", len(cfg.Auth) > 0)
		out[o.entry.Name] = e
	}
	return out, nil
}
