package demo

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hanzoai/deploy/demo/idp"
	"github.com/hanzoai/deploy/demo/sim"
	"github.com/hanzoai/deploy/fleet"
)

// DefaultPace is how often the demo's simulator steps.
const DefaultPace = 2 * time.Second

// Options configure the demo environment.
type Options struct {
	// Seed chooses the fleet (default 1); Apps its size (default
	// fleet.DefaultSize).
	Seed int64
	Apps int
	// Pace is the time between two simulator steps (default DefaultPace).
	Pace time.Duration
	Log  *slog.Logger
}

// Env is a running demo environment.
type Env struct {
	// Cluster is the fake API server holding the simulated fleet.
	Cluster *sim.FakeCluster
	// Sim is the simulator acting on it.
	Sim *sim.Simulator
	// IdP is the demo identity provider.
	IdP *idp.IdP

	pace time.Duration
}

// Start loads a simulated fleet into a fresh fake cluster and starts the
// demo identity provider. The simulator does not step until Run.
func Start(ctx context.Context, opts Options) (*Env, error) {
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	if opts.Apps <= 0 {
		opts.Apps = fleet.DefaultSize
	}
	if opts.Pace <= 0 {
		opts.Pace = DefaultPace
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	fc := sim.NewFakeCluster(nil)
	s, err := sim.New(ctx, fc.Dynamic(), sim.Options{
		Seed: opts.Seed, Apps: opts.Apps, Log: opts.Log.With("component", "simulator"),
		CrashEvery: sim.DefaultCrashEvery, ReleaseEvery: sim.DefaultReleaseEvery,
	})
	if err != nil {
		return nil, fmt.Errorf("simulated fleet: %w", err)
	}
	p, err := idp.Start(ctx, opts.Log.With("component", "demo-idp"))
	if err != nil {
		return nil, fmt.Errorf("demo identity provider: %w", err)
	}
	return &Env{Cluster: fc, Sim: s, IdP: p, pace: opts.Pace}, nil
}

// Run steps the simulator at the configured pace until ctx ends.
func (e *Env) Run(ctx context.Context) { e.Sim.Run(ctx, e.pace) }

// Close stops the identity provider. Idempotent.
func (e *Env) Close() error { return e.IdP.Close() }
