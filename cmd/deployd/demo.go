package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/cluster"
	"github.com/hanzoai/deploy/demo"
	"github.com/hanzoai/deploy/demo/gitrepo"
	"github.com/hanzoai/deploy/engine"
	"github.com/hanzoai/deploy/fleet"
	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/handlers"
	"github.com/hanzoai/deploy/projection"
)

// runDemo serves a simulated fleet with demo sign-in: the real server (the
// same handlers, projection, hub and auth code as serve) against an
// in-process simulated cluster watched through the same cluster code, and an
// in-process identity provider with demo users. It listens on loopback only.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8080", "loopback address to serve on")
	metricsListen := fs.String("metrics-listen", "127.0.0.1:9090", "loopback address to serve /metrics on (empty: none)")
	seed := fs.Int64("seed", 1, "seed of the simulated fleet")
	apps := fs.Int("apps", 30, "number of simulated Apps")
	pace := fs.Duration("pace", demo.DefaultPace, "time between two simulator steps")
	gitListen := fs.String("git-listen", "127.0.0.1:8081", "loopback address to serve the demo's manifest repository on (empty: no repository, no engine)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := newLogger(stderr, os.Getenv("LOG_LEVEL"))
	if err != nil {
		return err
	}
	d, err := startDemo(ctx, demoOptions{Listen: *listen, MetricsListen: *metricsListen, GitListen: *gitListen, Seed: *seed, Apps: *apps, Pace: *pace, Log: log})
	if err != nil {
		return err
	}
	defer d.close()
	d.banner(stdout, *apps)
	return d.run(ctx)
}

// banner is what the demo prints when it is ready: where to open it, where
// to clone its repository, who to sign in as.
func (d *demoServer) banner(w io.Writer, apps int) {
	fmt.Fprintf(w, "\ndeployd demo — a simulated fleet of %d apps, with demo sign-in (not real accounts)\n\n", apps)
	fmt.Fprintf(w, "  open   %s/\n", d.URL)
	if d.MetricsURL != "" {
		fmt.Fprintf(w, "  scrape %s\n", d.MetricsURL)
	}
	if d.repo != nil {
		fmt.Fprintf(w, "  git    git clone %s   (change a tag, push: the engine applies it)\n", d.repo.URL)
	} else if d.gitOff != "" {
		fmt.Fprintf(w, "  git    %s\n", d.gitOff)
	}
	fmt.Fprintf(w, "\n  sign in as one of:\n")
	for _, u := range d.env.IdP.Users() {
		fmt.Fprintf(w, "    %-6s %s\n", u.Username, u.Role)
	}
	fmt.Fprintln(w, "\n  Ctrl-C stops it.")
}

// demoOptions configure a demo server.
type demoOptions struct {
	Listen string // loopback host:port (port 0: any free one)
	// MetricsListen is the loopback host:port /metrics is served on; ""
	// serves none.
	MetricsListen string
	Seed          int64
	Apps          int
	// Pace is the time between simulator steps; 0 leaves the stepping to
	// the caller (env.Sim.Step), as tests do.
	Pace time.Duration
	Log  *slog.Logger
	// PublicURL is the URL browsers reach the demo at when something (a
	// proxy) stands in front of the listener; it becomes URL and the
	// sign-in's public URL (redirect URI, Origin check). Default: the
	// listener's own http://host:port.
	PublicURL string
	// GitListen is the loopback host:port the demo's manifest repository
	// is served on; the engine then drives the simulated fleet from it.
	// "" (or Engine set): no repository.
	GitListen string
	// Engine stands in for the git → cluster engine (tests); nil: the
	// demo's own when GitListen is set, else disabled.
	Engine handlers.Engine
}

// demoServer is a demo ready to run: listener bound, fleet loaded, plane
// built.
type demoServer struct {
	URL string
	// MetricsURL is where /metrics is served, "" when it is not.
	MetricsURL string
	env        *demo.Env
	plane      *plane
	ln         net.Listener
	pace       time.Duration
	// repo is the manifest repository the engine reads (nil without one);
	// gitOff says why there is none when one was asked for.
	repo   *gitrepo.Repo
	gitOff string
}

func startDemo(ctx context.Context, o demoOptions) (*demoServer, error) {
	if err := loopbackOnly("--listen", o.Listen); err != nil {
		return nil, err
	}
	if o.MetricsListen != "" {
		if err := loopbackOnly("--metrics-listen", o.MetricsListen); err != nil {
			return nil, err
		}
	}
	if o.Apps < 6 || o.Apps > 5000 {
		return nil, fmt.Errorf("--apps %d: choose from 6 to 5000", o.Apps)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", o.Listen, err)
	}
	mln, err := listenMetrics(o.MetricsListen, ln)
	if err != nil {
		return nil, fmt.Errorf("%w (or choose another with --metrics-listen)", err)
	}
	d := &demoServer{URL: "http://" + ln.Addr().String(), ln: ln, pace: o.Pace}
	if mln != nil {
		d.MetricsURL = "http://" + mln.Addr().String() + "/metrics"
	}
	if o.PublicURL != "" {
		d.URL = strings.TrimSuffix(o.PublicURL, "/")
	}
	d.env, err = demo.Start(ctx, demo.Options{Seed: o.Seed, Apps: o.Apps, Pace: max(o.Pace, time.Millisecond), Log: o.Log})
	if err != nil {
		ln.Close()
		if mln != nil {
			mln.Close()
		}
		return nil, err
	}
	pcfg := projection.DefaultConfig()
	pcfg.BaseRevision = uint64(time.Now().UnixMicro())
	if o.Engine == nil && o.GitListen != "" {
		eng, err := d.startEngine(ctx, o, pcfg)
		switch {
		case errors.Is(err, gitrepo.ErrNoGit):
			d.gitOff = "no manifest repository and no engine: " + err.Error()
			o.Log.Warn("the demo runs without its engine", "reason", err.Error())
		case err != nil:
			d.close()
			ln.Close()
			if mln != nil {
				mln.Close()
			}
			return nil, err
		default:
			o.Engine = eng
			pcfg.Engine, pcfg.EngineInstance = &projection.EngineSource{Repo: d.repo.URL, Ref: gitrepo.Branch, Path: demoRepoPath}, eng.Instance()
		}
	}
	feed := cluster.NewFeed()
	w := cluster.NewWatcherForClients(d.env.Cluster.Dynamic(), d.env.Cluster.Discovery(), nil, feed,
		cluster.Options{Namespaces: pcfg.Namespaces, Log: o.Log})
	d.plane = newPlane(ctx, planeConfig{
		Log: o.Log, Projection: pcfg, Watcher: w, Feed: feed, ClusterName: "demo",
		Auth: d.env.IdP.AuthConfig(d.URL), Logs: demoLogs{}, Engine: o.Engine, Metrics: mln,
		LoopbackHostOnly: true,
	})
	o.Log.Warn("DEMO MODE: a simulated fleet and demo identities; nothing here is a real cluster or a real account")
	return d, nil
}

// loopbackOnly refuses an address that is not on loopback.
func loopbackOnly(flag, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: %w", flag, addr, err)
	}
	if !auth.IsLoopbackHost(host) {
		return fmt.Errorf("%s %q: the demo serves on loopback only (127.0.0.1, ::1 or localhost)", flag, addr)
	}
	return nil
}

// run serves until ctx ends, stepping the simulator at its pace.
func (d *demoServer) run(ctx context.Context) error {
	simCtx, stopSim := context.WithCancel(ctx)
	simDone := make(chan struct{})
	go func() {
		defer close(simDone)
		if d.pace > 0 {
			d.env.Run(simCtx)
		}
	}()
	err := d.plane.run(ctx, d.ln)
	stopSim()
	<-simDone
	return err
}

func (d *demoServer) close() {
	if d.repo != nil {
		_ = d.repo.Close()
	}
	_ = d.env.Close()
}

// demoRepoPath is the folder of the demo's repository the engine reads.
const demoRepoPath = "apps"

// The demo's release pipeline and the author of the repository's first
// commit.
const (
	demoReleaserName  = "release pipeline"
	demoReleaserEmail = "release@demo.example.com"
)

// startEngine serves the demo's manifest repository, holding the fleet's
// Apps one file each, and builds the engine that drives the simulated
// cluster from it: a push runs it (as a webhook would), it prunes (with its
// fuse) and heals every 30 s, rollbacks and releases are commits, and the
// simulator's releases are commits by the release pipeline.
func (d *demoServer) startEngine(ctx context.Context, o demoOptions, pcfg projection.Config) (*engine.Engine, error) {
	files := map[string][]byte{}
	for _, app := range d.env.Sim.Apps() {
		u, ok := fleet.Manifest(app)
		if !ok {
			continue
		}
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return nil, err
		}
		files[path.Join(demoRepoPath, app.Namespace, app.Name+".yaml")] = b
	}
	var eng atomic.Pointer[engine.Engine]
	repo, err := gitrepo.Start(ctx, gitrepo.Options{
		Listen: o.GitListen, Files: files,
		AuthorName: demoReleaserName, AuthorEmail: demoReleaserEmail,
		Message: "The demo fleet",
		OnPush: func() {
			if e := eng.Load(); e != nil {
				e.Trigger(gitops.TriggerWebhook)
			}
		},
		Log: o.Log.With("component", "demo-git"),
	})
	if err != nil {
		if errors.Is(err, gitrepo.ErrNoGit) {
			return nil, err
		}
		return nil, fmt.Errorf("the demo's manifest repository: %w (or choose another address with --git-listen, or none)", err)
	}
	cfg := engine.Defaults()
	cfg.Repo, cfg.Ref, cfg.Path = repo.URL, gitrepo.Branch, demoRepoPath
	cfg.Instance, cfg.Namespaces = "demo", pcfg.Namespaces
	cfg.Prune, cfg.Push, cfg.Interval = true, true, 30*time.Second
	cfg.CacheDir = filepath.Join(repo.Dir, "engine-cache")
	e, err := engine.NewForClients(cfg, d.env.Cluster.Dynamic(), nil, o.Log.With("component", "engine"))
	if err != nil {
		repo.Close()
		return nil, fmt.Errorf("the demo's engine: %w", err)
	}
	eng.Store(e)
	d.repo = repo
	d.env.Sim.DeclareReleasesWith(func(ctx context.Context, namespace, name, tag string) error {
		_, err := e.WriteTag(ctx, engine.TagWrite{Namespace: namespace, Name: name, Tag: tag, Verb: "release",
			AuthorName: demoReleaserName, AuthorEmail: demoReleaserEmail})
		return err
	})
	return e, nil
}

// demoLogs answers pod logs of the simulated fleet, marked as simulated.
type demoLogs struct{}

func (demoLogs) Logs(_ context.Context, r handlers.LogRequest) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader(demo.PodLog(r.Pod, r.Container, int(r.TailLines), time.Now()))), nil
}
