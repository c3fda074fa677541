package main

import (
	"net/http"
	"net/http/pprof"

	"github.com/hanzoai/deploy/metrics"
)

// metricsHandler is what the metrics listener serves: /metrics, and with
// withPprof the runtime's profiles under /debug/pprof/ (heap, goroutine,
// profile, trace, …) for `go tool pprof`. The profiles are registered on
// this listener's own mux, never on http.DefaultServeMux nor on the public
// handler: a profile names the process's internals and costs CPU, so it is
// for whoever reaches the metrics port, and only when DEPLOY_PPROF=true.
func metricsHandler(m *metrics.Metrics, withPprof bool) http.Handler {
	if !withPprof {
		return m.Handler()
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /debug/pprof/", pprof.Index) // and every named profile: /debug/pprof/heap, …
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}
