package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/cluster"
	"github.com/hanzoai/deploy/cluster/release"
	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/handlers"
	"github.com/hanzoai/deploy/metrics"
	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/stream"
	"github.com/hanzoai/deploy/web"
)

// planeConfig is what serve and demo each decide; the plane is the same.
type planeConfig struct {
	Log *slog.Logger
	// AccessLog writes the access lines (nil: Log); serve's holds them
	// and writes them in batches (logoutput.go).
	AccessLog  *slog.Logger
	Projection projection.Config
	Watcher    *cluster.Watcher
	// Others are the watchers of the other clusters, in the order of
	// Projection.Clusters, feeding Feed too; none with one cluster.
	Others []*cluster.Watcher
	Feed   *cluster.Feed
	// OnSynced, when set, is called once, when the clusters are first
	// ready and every row is encoded (markSynced).
	OnSynced func()
	// History: a stream resuming from a position older than this process
	// catches up from the API server's history (a real cluster; the
	// demo's simulated one keeps none).
	History bool
	Auth    auth.Config
	// Logs overrides where pod logs come from (the demo's simulated ones);
	// nil reads them through the watcher.
	Logs        handlers.LogReader
	ClusterName string
	// Releases configures the drift board's release source (none when
	// no source is enabled).
	Releases release.Config
	// Engine is the (first) cluster's git → cluster engine; nil when
	// disabled.
	Engine handlers.Engine
	// ClusterEngines are the other clusters' engines, by cluster name.
	ClusterEngines      map[string]handlers.Engine
	EngineWebhookSecret []byte
	// ClusterWebhookSecrets are the other clusters' engines' own webhook
	// secrets, by cluster name.
	ClusterWebhookSecrets map[string][]byte
	// Peering and Peers forward the engine's requests between replicas
	// (handlers/leader.go); nil refuses every forward.
	Peering *auth.Peering
	Peers   *auth.PeerSet
	// Metrics is the listener /metrics is served on; nil serves none.
	Metrics net.Listener
	// Pprof serves net/http/pprof's profiles under /debug/pprof/ on the
	// metrics listener (never the public one); off unless asked for.
	Pprof bool
	// Drain times the shutdown (shutdown.go); zero ends at once.
	Drain drainConfig
	// LoopbackHostOnly refuses a request whose Host is not loopback (the
	// demo: auth.LoopbackHostOnly).
	LoopbackHostOnly bool
}

// plane is the running read plane: watcher → feed → store → HTTP.
type plane struct {
	cfg    planeConfig
	store  *projection.Store
	hub    *stream.Hub
	auth   *auth.Authenticator
	server *handlers.Server
	// releases is the drift board's release source; nil when none is
	// configured. Its Stats are the refresh and failure counts.
	releases *release.Source
	metrics  *metrics.Metrics
	// draining: the shutdown began; the health probes answer 503.
	draining atomic.Bool
	// clusters are the clusters read: the first (Watcher), then Others.
	clusters *clusterSet
}

func newPlane(ctx context.Context, cfg planeConfig) *plane {
	p := &plane{cfg: cfg, store: projection.NewStore(cfg.Projection), clusters: newClusterSet(cfg.Projection, cfg.Watcher, cfg.Others)}
	// cfg.Releases was checked when it was read (release.ConfigFromEnv);
	// New fails only if its auth file went away since.
	rs, err := release.New(cfg.Releases, release.Options{
		Repositories: release.SnapshotRepositories(p.store.Snapshot),
		Logger:       cfg.Log,
		OnRefresh: func(ok bool, at time.Time) {
			if ok {
				p.metrics.ReleaseRefresh(nil, at)
			} else {
				p.metrics.ReleaseRefresh(errReleaseRefresh, at)
			}
		},
	})
	if err != nil {
		cfg.Log.Error("release source disabled: the drift board shows no release flags", "err", err)
		rs = nil
	}
	p.releases = rs
	hopts := stream.Options{Logger: cfg.Log, Positions: p.store.Positions()}
	if cfg.History {
		hopts.History = fleetHistory{f: p.clusters, store: p.store}
	}
	p.hub = stream.NewHub(p.store, hopts)
	p.auth = auth.New(ctx, cfg.Auth, cfg.Log)
	p.metrics = metrics.New(metrics.Sources{
		Snapshot:      p.store.Snapshot,
		Cluster:       clusterMetrics(cfg.Watcher, cfg.Feed),
		Hub:           p.hub.Stats,
		TokenCache:    p.auth.CacheStats,
		ClusterServer: cfg.Projection.ClusterServer,
		ClusterName:   cfg.ClusterName,
		Engine:        engineGauges(cfg.Engine),
		Others:        p.clusters.otherMetrics(cfg.Feed),
	})
	cfg.Feed.OnBatch = func(b cluster.Batch) { p.metrics.Batch(b.Size, b.Fold, b.Wait) }
	if hook, ok := cfg.Engine.(interface {
		OnRun(func(*gitops.ReconcileReport, error, time.Duration, time.Time))
	}); ok {
		hook.OnRun(p.metrics.EngineRun) // every finished run, whatever its trigger
	}
	logs := cfg.Logs
	if logs == nil {
		logs = watcherLogs{cfg.Watcher}
	}
	deps := handlers.Deps{
		Log:         cfg.Log,
		AccessLog:   cfg.AccessLog,
		Snapshots:   p.store,
		Projection:  cfg.Projection,
		Cluster:     p.clusters.status,
		Live:        cfg.Watcher,
		Logs:        logs,
		Events:      cfg.Watcher,
		Writer:      cfg.Watcher,
		Hub:         p.hub,
		Positions:   p.store.Positions(),
		Auth:        p.auth,
		PublicURL:   cfg.Auth.PublicURL,
		ClusterName: cfg.ClusterName,
		Version:     handlers.Version{Version: version, BuildDate: buildDate, GitCommit: commit},
		Web:         web.Handler(),
		Metrics:     p.metrics,

		Engine:                cfg.Engine,
		ClusterEngines:        cfg.ClusterEngines,
		EngineWebhookSecret:   cfg.EngineWebhookSecret,
		ClusterWebhookSecrets: cfg.ClusterWebhookSecrets,
		Peering:               cfg.Peering,
		Peers:                 cfg.Peers,
	}
	if rs != nil {
		deps.Releases, deps.ReleaseChanges = rs.Release, rs.Changes
	}
	if p.clusters.several() {
		route := fleetReader{p.clusters}
		deps.Live, deps.Events, deps.Writer, deps.Clusters = route, route, route, p.clusters.entries
		if cfg.Logs == nil {
			deps.Logs = route
		}
	}
	p.server = handlers.New(deps)
	return p
}

// run starts the watcher and the writer and serves on ln until ctx ends,
// then drains (shutdown.go) and shuts down gracefully. Everything keeps
// running while it drains: the plane's own context ends after.
func (p *plane) run(ctx context.Context, ln net.Listener) error {
	signalled := ctx
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(3)
	if loop, ok := p.cfg.Engine.(interface{ Run(context.Context) }); ok {
		wg.Go(func() { loop.Run(ctx) }) // the engine's self-heal loop and webhook runs
	}
	for _, e := range p.cfg.ClusterEngines {
		if loop, ok := e.(interface{ Run(context.Context) }); ok {
			wg.Go(func() { loop.Run(ctx) }) // each cluster's engine runs on its own
		}
	}
	go func() { defer wg.Done(); p.hub.Run(ctx) }()
	if p.releases != nil {
		wg.Add(1)
		go func() { defer wg.Done(); p.releases.Run(ctx) }()
	}
	go func() { defer wg.Done(); p.cfg.Watcher.Run(ctx) }()
	for _, w := range p.cfg.Others {
		wg.Go(func() { w.Run(ctx) })
	}
	if p.clusters.several() {
		wg.Go(func() { p.clusters.reportUnreachable(ctx, p.cfg.Feed) })
	}
	go func() { defer wg.Done(); p.cfg.Feed.Run(ctx, p.store, p.publish, p.cfg.Log) }()
	wg.Go(func() { p.markSynced(ctx) })

	handler := p.handler()
	if p.cfg.LoopbackHostOnly {
		handler = auth.LoopbackHostOnly(handler)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(p.cfg.Log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 2)
	go func() { served <- srv.Serve(ln) }()
	var msrv *http.Server
	if p.cfg.Metrics != nil {
		msrv = &http.Server{
			Handler:           metricsHandler(p.metrics, p.cfg.Pprof),
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(p.cfg.Log.Handler(), slog.LevelWarn),
		}
		go func() { served <- msrv.Serve(p.cfg.Metrics) }()
	}
	var err error
	select {
	case <-signalled.Done():
		// From now on every answer closes its connection (and idle ones
		// close): a client's next request, its stream's reconnection
		// included, opens a new one, which the Service sends to a replica
		// that is not going away.
		srv.SetKeepAlivesEnabled(false)
		p.drain()
	case err = <-served:
	}
	shutdown, stop := context.WithTimeout(context.Background(), shutdownTimeout)
	defer stop()
	_ = srv.Shutdown(shutdown)
	if msrv != nil {
		_ = msrv.Shutdown(shutdown)
	}
	cancel()
	wg.Wait()
	p.auth.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// engineGauges reads the engine's state for the metrics; nil when the
// engine is disabled.
func engineGauges(e handlers.Engine) func() (gitops.EngineStatus, bool) {
	if e == nil {
		return nil
	}
	return func() (gitops.EngineStatus, bool) {
		_, self, _ := e.Leader()
		return e.Status(), self
	}
}

// publish hands the writer's deltas to the stream hub.
func (p *plane) publish(deltas []projection.Delta) { p.hub.Publish(deltas) }

// clusterStatus adapts the watcher's state for the handlers.
func clusterStatus(w *cluster.Watcher) func() handlers.ClusterStatus {
	return func() handlers.ClusterStatus {
		st := w.Status()
		return handlers.ClusterStatus{
			Configured: st.Configured, Reachable: st.Reachable, AppCRD: st.AppCRD, CDCRD: st.CDCRD,
			Ready: st.Ready(), Reason: st.Reason, Progress: st.Progress,
			ServerVersion: w.ServerVersion(), CheckedAt: st.CheckedAt, FailedSince: st.FailedSince,
		}
	}
}

// errReleaseRefresh marks a release refresh in which a source failed (the
// release source logs why).
var errReleaseRefresh = errors.New("a release source failed")

// clusterMetrics adapts the watcher's and the feed's counters for the
// metrics, read at scrape time.
func clusterMetrics(w *cluster.Watcher, f *cluster.Feed) func() metrics.Cluster {
	return func() metrics.Cluster {
		st := w.Status()
		out := metrics.Cluster{
			Ready: st.Ready(), KindsListed: st.KindsListed, KindsServed: st.KindsServed,
			Folded: f.Applied(), Queued: f.Len(), K8sVersion: w.ServerVersion(),
		}
		for _, kc := range w.Counters() {
			out.Kinds = append(out.Kinds, metrics.Kind{
				Name: kc.Kind.String(), Changes: f.Changes(kc.Kind),
				Relists: kc.Relists, WatchRestarts: kc.WatchRestarts, Objects: kc.Objects,
			})
		}
		return out
	}
}

// watcherLogs reads pod logs through the watcher's clientset.
type watcherLogs struct{ w *cluster.Watcher }

func (l watcherLogs) Logs(ctx context.Context, r handlers.LogRequest) (io.ReadCloser, error) {
	return l.w.PodLogs(ctx, r.Namespace, r.Pod, r.Container, r.TailLines, r.LimitBytes, r.Follow, r.Timestamps)
}

// markSynced tells the hub, once the watcher is ready (the fold holds what
// the initial lists returned, and its deltas were published), the position
// from which its ring holds every change.
func (p *plane) markSynced(ctx context.Context) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !p.clusters.status().Ready {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	p.hub.Synced(p.clusters.listedAt(p.cfg.Projection.ClusterNames()))
	// Every row is encoded now, not by the first full list: at 50,000
	// rows that list would take a second more than the next and leave
	// 500 MB of garbage behind it.
	began := time.Now()
	n := p.store.Snapshot().Encode(runtime.GOMAXPROCS(0))
	p.cfg.Log.Info("rows encoded", "rows", n, "seconds", float64(time.Since(began).Milliseconds())/1000)
	if p.cfg.OnSynced != nil {
		p.cfg.OnSynced()
	}
}
