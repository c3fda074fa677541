package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/hanzoai/deploy/cluster"
	"github.com/hanzoai/deploy/demo"
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
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := newLogger(stderr, os.Getenv("LOG_LEVEL"))
	if err != nil {
		return err
	}
	d, err := startDemo(ctx, demoOptions{Listen: *listen, MetricsListen: *metricsListen, Seed: *seed, Apps: *apps, Pace: *pace, Log: log})
	if err != nil {
		return err
	}
	defer d.close()
	fmt.Fprintf(stdout, "\ndeployd demo — a simulated fleet of %d apps, with demo sign-in (not real accounts)\n\n", *apps)
	fmt.Fprintf(stdout, "  open   %s/\n", d.URL)
	if d.MetricsURL != "" {
		fmt.Fprintf(stdout, "  scrape %s\n", d.MetricsURL)
	}
	fmt.Fprintf(stdout, "\n  sign in as one of:\n")
	for _, u := range d.env.IdP.Users() {
		fmt.Fprintf(stdout, "    %-6s %s\n", u.Username, u.Role)
	}
	fmt.Fprintln(stdout, "\n  Ctrl-C stops it.")
	return d.run(ctx)
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
	// Engine stands in for the git → cluster engine (tests); nil: disabled.
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
	feed := cluster.NewFeed()
	w := cluster.NewWatcherForClients(d.env.Cluster.Dynamic(), d.env.Cluster.Discovery(), nil, feed,
		cluster.Options{Namespaces: pcfg.Namespaces, Log: o.Log})
	d.plane = newPlane(ctx, planeConfig{
		Log: o.Log, Projection: pcfg, Watcher: w, Feed: feed, ClusterName: "demo",
		Auth: d.env.IdP.AuthConfig(d.URL), Logs: demoLogs{}, Engine: o.Engine, Metrics: mln,
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
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
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

func (d *demoServer) close() { _ = d.env.Close() }

// demoLogs answers pod logs of the simulated fleet, marked as simulated.
type demoLogs struct{}

func (demoLogs) Logs(_ context.Context, r handlers.LogRequest) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader(demo.PodLog(r.Pod, r.Container, int(r.TailLines), time.Now()))), nil
}
