package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/cluster"
	"github.com/hanzoai/deploy/cluster/release"
	"github.com/hanzoai/deploy/engine"
	"github.com/hanzoai/deploy/handlers"
	"github.com/hanzoai/deploy/projection"
)

// runServe serves the fleet of the configured cluster. Configuration comes
// from flags, then the environment:
//
//	--listen        DEPLOYD_LISTEN           address to serve on (:8080)
//	--metrics-listen DEPLOYD_METRICS_LISTEN  address to serve /metrics on (:9090; empty: none)
//	--kubeconfig    KUBECONFIG               kubeconfig; else in-cluster
//	--context                                kubeconfig context
//	--namespaces    DEPLOY_NAMESPACES        namespace map, e.g. hanzo=main,hanzo-testnet=test,tenant-*=main
//	                DEPLOY_CLUSTER_NAME      the cluster's name (in-cluster; [a-z0-9-])
//	                DEPLOY_CLUSTERS_FILE     more clusters to read (clusters.go)
//	                DEPLOY_SOURCE_REPO, DEPLOY_SOURCE_PATH, DEPLOY_SOURCE_REVISION
//	                                         display values of spec.source
//	                DEPLOY_PUBLIC_URL, IAM_ENDPOINT, DEPLOY_IAM_CLIENT_ID, … (sign-in, see auth)
//	                DEPLOY_RELEASE_SOURCE    the drift board's release source: none (default), registry, github, registry,github
//	                DEPLOY_REGISTRY_AUTH_FILE  Docker config file with registry credentials (anonymous without)
//	                DEPLOY_GITHUB_API        GitHub REST API base URL (https://api.github.com/; GHE or Gitea-compatible)
//	                DEPLOY_GITHUB_TOKEN_FILE file holding the GitHub token (anonymous without)
//	                DEPLOY_RELEASE_REFRESH   period of each repository's refresh (10m)
//	                DEPLOY_ENGINE_*          the git → cluster engine (off; see engineFromEnv)
//	                DEPLOY_PEERS             the replicas' base URLs, the only places the engine's requests are forwarded to
//	                DEPLOY_PPROF             true: /debug/pprof/ on the metrics listener (false)
//	                DEPLOYD_DRAIN_DELAY      on SIGTERM, how long to serve on once readiness fails (5s)
//	                DEPLOYD_DRAIN_SPREAD     then, the window the streams are ended over (10s; see shutdown.go)
//	                LOG_LEVEL                debug, info, warn, error (info)
//	                OTEL_EXPORTER_OTLP_ENDPOINT  export a span per request
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", envOr("DEPLOYD_LISTEN", ":8080"), "address to serve on")
	metricsListen := fs.String("metrics-listen", envSetOr("DEPLOYD_METRICS_LISTEN", ":9090"), "address to serve /metrics on, never the public one (empty: none)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default $KUBECONFIG, then in-cluster)")
	kubeContext := fs.String("context", "", "kubeconfig context")
	namespaces := fs.String("namespaces", os.Getenv("DEPLOY_NAMESPACES"), "namespace map: ns=env,…,tenant-*=env")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve takes no arguments, got %q", fs.Args())
	}
	logOut := newLogOutput(stderr, accessFlushEvery, accessHeldMax)
	defer logOut.Flush()
	log, err := newLogger(logOut, os.Getenv("LOG_LEVEL"))
	if err != nil {
		return err
	}
	accessLog, _ := newLogger(logOut.Batched(), os.Getenv("LOG_LEVEL"))
	setMemoryLimit(log, cgroupMemoryMax)
	withPprof, err := envBool(os.Getenv, "DEPLOY_PPROF", false)
	if err != nil {
		return err
	}
	drain, err := drainFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	pcfg, err := projectionConfig(*namespaces)
	if err != nil {
		return err
	}
	firstName, others, err := clustersFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	pcfg.ClusterName = firstName
	authCfg, err := auth.ConfigFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	relCfg, err := release.ConfigFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	engEnv, err := engineFromEnv(os.Getenv, pcfg.Namespaces)
	if err != nil {
		return err
	}
	// Apps the engine applied show its source as spec.source, and
	// GET /v1/deploy/gitops names it even while the engine is disabled.
	src := engEnv.Config.Source()
	pcfg.Engine, pcfg.EngineInstance = &src, engEnv.Config.Instance
	shutdownTracing, err := setupTracing(ctx, log)
	if err != nil {
		return err
	}
	defer shutdownTracing()

	restCfg, where, err := cluster.RESTConfig(cluster.Source{Kubeconfig: *kubeconfig, Context: *kubeContext})
	reason := ""
	if err != nil {
		reason = err.Error()
		log.Warn("serving without a cluster", "reason", reason)
	} else {
		log.Info("cluster configuration", "from", where, "host", restCfg.Host)
	}
	feed := cluster.NewFeed()
	// Once the first cluster's initial fold is done, the heap is held
	// nearer what is live (the others' folds grow it less); once every
	// cluster is ready and the rows are encoded, the start's garbage goes
	// back to the OS (OnSynced below).
	serving := func() { servingGC() }
	w, err := cluster.NewWatcher(restCfg, reason, feed, cluster.Options{Namespaces: pcfg.Namespaces, Log: log, OnReady: serving, Discovery: cluster.FleetDiscovery(1 + len(others))})
	if err != nil {
		return err
	}
	otherClusters, err := newOtherWatchers(others, &pcfg, engEnv, feed, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *listen, err)
	}
	mln, err := listenMetrics(*metricsListen, ln)
	if err != nil {
		return err
	}
	if withPprof && mln == nil {
		ln.Close()
		return fmt.Errorf("DEPLOY_PPROF=true serves the profiles on the metrics listener: set DEPLOYD_METRICS_LISTEN to an address")
	}
	closeAll := func() {
		ln.Close()
		if mln != nil {
			mln.Close()
		}
	}
	var lease *engine.LeaseConfig // one identity for every cluster's engine
	if engEnv.Enabled || slices.ContainsFunc(others, func(e cluster.Entry) bool { return e.Engine != nil }) {
		if lease, err = engEnv.lease(os.Getenv, ln.Addr()); err != nil {
			closeAll()
			return err
		}
	}
	clusterEngines, err := newClusterEngines(otherClusters, engEnv, lease, pcfg, log)
	if err != nil {
		closeAll()
		return err
	}
	var peering *auth.Peering
	var peers *auth.PeerSet
	clusterSecrets := map[string][]byte{}
	if lease != nil {
		if peering, peers, err = peeringFromEnv(os.Getenv, authCfg.CookieKey, lease, log); err != nil {
			closeAll()
			return err
		}
		if clusterSecrets, err = clusterWebhookSecrets(others); err != nil {
			closeAll()
			return err
		}
	} else if peers, err = auth.ParsePeers(os.Getenv("DEPLOY_PEERS")); err != nil {
		closeAll()
		return fmt.Errorf("DEPLOY_PEERS: %w", err)
	} else if peers != nil {
		// No engine: the peers are asked only for the positions of the
		// compact ids of a stream that moved between replicas.
		if peering, err = auth.NewPeering(authCfg.CookieKey, engine.NewIdentity(), nil); err != nil {
			closeAll()
			return err
		}
	}
	var eng handlers.Engine // nil, not a nil *engine.Engine, when disabled
	if engEnv.Enabled {
		if restCfg == nil {
			closeAll()
			return fmt.Errorf("DEPLOY_ENGINE_ENABLED=true needs a cluster to write to: %s", reason)
		}
		engEnv.Config.Lease = lease
		e, err := engine.New(engEnv.Config, restCfg, log)
		if err != nil {
			closeAll()
			return engineConfigError(err)
		}
		if len(engEnv.WebhookSecret) == 0 {
			log.Warn("the engine's webhook is refused: DEPLOY_ENGINE_WEBHOOK_SECRET is not set")
		}
		c := e.Config()
		log.Info("engine enabled", "repo", c.Repo, "ref", c.Ref, "path", c.Path, "instance", c.Instance,
			"prune", c.Prune, "interval", c.Interval.String(), "credentials", len(c.Auth) > 0,
			"lease", c.Lease.Namespace+"/"+c.Lease.Name, "identity", c.Lease.Identity, "advertise", c.Lease.URL)
		eng = e
	}
	p := newPlane(ctx, planeConfig{
		History: true,
		Log:     log, AccessLog: accessLog, Projection: pcfg, Watcher: w, Others: watchersOf(otherClusters), Feed: feed, Auth: authCfg,
		ClusterName: firstName,
		Releases:    relCfg, Metrics: mln, Pprof: withPprof,
		Engine: eng, ClusterEngines: clusterEngines, EngineWebhookSecret: engEnv.WebhookSecret,
		ClusterWebhookSecrets: clusterSecrets, Peering: peering, Peers: peers,
		Drain:    drain,
		OnSynced: func() { settleMemory(log) },
	})
	attrs := []any{"addr", ln.Addr().String(), "signin", p.auth.Status().Reason, "releaseSource", relCfg.Sources()}
	if mln != nil {
		attrs = append(attrs, "metrics", mln.Addr().String(), "pprof", withPprof)
	}
	log.Info("serving", attrs...)
	return p.run(ctx, ln)
}

// projectionConfig is the store's configuration from the environment.
func projectionConfig(namespaces string) (projection.Config, error) {
	cfg := projection.DefaultConfig()
	if namespaces != "" {
		ns, err := projection.ParseNamespaces(namespaces)
		if err != nil {
			return cfg, fmt.Errorf("DEPLOY_NAMESPACES: %w", err)
		}
		if ns.TenantPrefix != "" && ns.TenantPrefix != auth.TenantNamespacePrefix {
			return cfg, fmt.Errorf("DEPLOY_NAMESPACES: tenant namespaces are %s<org>; write %s*=<env>", auth.TenantNamespacePrefix, auth.TenantNamespacePrefix)
		}
		cfg.Namespaces = ns
	}
	if v := os.Getenv("DEPLOY_SOURCE_REPO"); v != "" {
		cfg.Source.RepoURL = v
	}
	if v := os.Getenv("DEPLOY_SOURCE_PATH"); v != "" {
		cfg.Source.Path = v
	}
	if v := os.Getenv("DEPLOY_SOURCE_REVISION"); v != "" {
		cfg.Source.TargetRevision = v
	}
	// Revisions start at the start time in microseconds, so an event id of
	// an earlier process is always older.
	cfg.BaseRevision = uint64(time.Now().UnixMicro())
	return cfg, nil
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if level != "" {
		if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
			return nil, fmt.Errorf("LOG_LEVEL %q: want debug, info, warn or error", level)
		}
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// listenMetrics opens the metrics listener; "" is none. It closes public
// when it fails, so the caller has nothing to clean up.
func listenMetrics(addr string, public net.Listener) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		public.Close()
		return nil, fmt.Errorf("listen for metrics on %s (DEPLOYD_METRICS_LISTEN; empty turns it off): %w", addr, err)
	}
	return ln, nil
}

// envSetOr is the variable's value when it is set, even to "", else def.
func envSetOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
