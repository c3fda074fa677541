package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// How serve ends on SIGTERM (or SIGINT), so an upgrade loses no client:
//
//  1. Readiness fails at once: the health probes answer 503 ("draining"),
//     and the Service's endpoints drop the pod. Liveness (a TCP check)
//     holds. Everything else is served as before for DEPLOYD_DRAIN_DELAY,
//     the time the endpoints take to reach every proxy.
//  2. The hub ends its streams spread over DEPLOYD_DRAIN_SPREAD (each after
//     the frames queued to it), and refuses new ones with 503, so browsers
//     resume on the other replicas a few at a time rather than all at
//     once. A stream still open drainOverrun after the window (a client that
//     stopped reading) is cut off.
//  3. The HTTP servers shut down (within shutdownTimeout), then the watcher,
//     the engine (releasing its Lease) and the rest stop.
//
// A second SIGTERM or SIGINT during 1 or 2 skips what is left of them.
// deploy/deployment.yaml's terminationGracePeriodSeconds covers the four
// durations with the defaults; deploy/'s tests read them here.
const (
	defaultDrainDelay  = 5 * time.Second
	defaultDrainSpread = 10 * time.Second
	drainOverrun       = 5 * time.Second
	shutdownTimeout    = 10 * time.Second
)

// drainConfig is the shutdown's timing; the zero value ends at once (the
// demo, the tests' planes).
type drainConfig struct {
	Delay, Spread time.Duration
}

// drainFromEnv reads DEPLOYD_DRAIN_DELAY and DEPLOYD_DRAIN_SPREAD: Go
// durations, 0 or more.
func drainFromEnv(getenv func(string) string) (drainConfig, error) {
	var c drainConfig
	var err error
	if c.Delay, err = envDuration(getenv, "DEPLOYD_DRAIN_DELAY", defaultDrainDelay); err != nil {
		return c, err
	}
	if c.Spread, err = envDuration(getenv, "DEPLOYD_DRAIN_SPREAD", defaultDrainSpread); err != nil {
		return c, err
	}
	return c, nil
}

// envDuration is a variable holding a Go duration (like 5s or 1m30s; 0 is
// none), def when unset.
func envDuration(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return def, fmt.Errorf("%s %q: want a duration like %s, or 0 for none", name, v, def)
	}
	return d, nil
}

// drainingReason is what the health probes say while the plane drains.
const drainingReason = "draining: the process is shutting down"

// drain is the first half of the shutdown, once the plane's context ended:
// readiness fails, everything is served for the delay, then the hub ends
// its streams over the spread. With neither, the hub's streams end when it
// stops, as they always did.
func (p *plane) drain() {
	d := p.cfg.Drain
	if d.Delay <= 0 && d.Spread <= 0 {
		p.draining.Store(true)
		return
	}
	// A second signal hurries: what is left of the delay is skipped and the
	// streams are cut off at once. Listening before readiness fails, a
	// signal sent once the probe says 503 is never missed.
	hurry, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	p.draining.Store(true)
	log := p.cfg.Log
	start := time.Now()
	log.Info("draining: readiness fails; serving on while the endpoints drop this replica",
		"delay", d.Delay.String(), "spread", d.Spread.String())
	wait := time.NewTimer(d.Delay)
	select {
	case <-wait.C:
	case <-hurry.Done():
		wait.Stop()
	}
	ctx, cancel := context.WithTimeout(hurry, d.Spread+drainOverrun)
	defer cancel()
	p.hub.Drain(ctx, d.Spread)
	if hurry.Err() != nil {
		log.Warn("drain cut short by a second signal", "after", time.Since(start).Round(time.Millisecond).String())
		return
	}
	log.Info("drained: every stream ended", "after", time.Since(start).Round(time.Millisecond).String())
}

// handler is the public handler: the routes, except that the health probes
// answer 503 once the plane drains. Every other route is served as before:
// the routes' own readiness (requireReady) is the cluster's, not this.
func (p *plane) handler() http.Handler {
	routes := p.server.Handler()
	services := map[string]string{"/v1/deploy/health": "deploy", "/v1/paas/health": "paas"}
	status := clusterStatus(p.cfg.Watcher)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		service, probe := services[r.URL.Path]
		if !probe || r.Method != http.MethodGet || !p.draining.Load() {
			routes.ServeHTTP(w, r)
			return
		}
		st := status()
		body := struct {
			Service string `json:"service"`
			Status  string `json:"status"`
			K8s     bool   `json:"k8s"`
			CRD     *bool  `json:"crd,omitempty"`
			Reason  string `json:"reason"`
		}{Service: service, Status: "degraded", K8s: st.Configured && st.Reachable, Reason: drainingReason}
		if body.K8s {
			body.CRD = &st.AppCRD
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(body)
	})
}
