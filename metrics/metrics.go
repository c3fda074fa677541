package metrics

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/stream"
)

// Sources are what the scrape-time collectors read. Any may be nil: its
// metrics are then left out.
type Sources struct {
	// Snapshot is the current projection snapshot (argocd_app_info).
	Snapshot func() *projection.Snapshot
	// Cluster is the watcher's and the feed's state.
	Cluster func() Cluster
	// Hub is the stream hub's counters.
	Hub func() stream.Stats
	// TokenCache is the verified-token cache's counters.
	TokenCache func() auth.CacheStats
	// ClusterServer and ClusterName label argocd_cluster_* (the server is
	// the one spec.destination.server names).
	ClusterServer, ClusterName string
	// Others are the other clusters' states, each with its Server and
	// Name (argocd_cluster_* has a series per cluster); nil with one.
	Others func() []Cluster
	// Engine is the engine's state and whether this replica runs it; nil
	// when the engine is disabled.
	Engine func() (st gitops.EngineStatus, leading bool)
}

// Cluster is what the watcher and the feed report, read at scrape time.
type Cluster struct {
	// Ready: the projection reflects the cluster.
	Ready bool
	// KindsListed of KindsServed have finished their initial list;
	// Folded changes have been folded; Queued are waiting for the writer.
	KindsListed, KindsServed int
	Folded                   uint64
	Queued                   int
	// K8sVersion is the API server's version, "" when unknown.
	K8sVersion string
	Kinds      []Kind
	// Server and Name label another cluster's argocd_cluster_* series
	// (Sources.Others); the first's are Sources'.
	Server, Name string
}

// Kind is one registry kind's counters.
type Kind struct {
	Name string // the Kubernetes kind, e.g. "Deployment"
	// Changes counts notifications turned into changes for the fold.
	Changes uint64
	// Relists and WatchRestarts count the informer's lists beyond its
	// first, and watches reopened without a list.
	Relists, WatchRestarts uint64
	// Objects is the number of objects the informer holds.
	Objects int
}

// Metrics holds deployd's collectors and registry.
type Metrics struct {
	reg *prometheus.Registry
	src Sources

	routes atomic.Pointer[map[string]bool]

	requests       *prometheus.CounterVec
	requestSeconds *prometheus.HistogramVec
	signIns        *prometheus.CounterVec
	refusals       *prometheus.CounterVec

	appSync   *prometheus.CounterVec
	reconcile *prometheus.HistogramVec

	batchSize    prometheus.Histogram
	batchSeconds prometheus.Histogram
	foldLag      prometheus.Histogram

	engineRuns        *prometheus.CounterVec
	engineSeconds     prometheus.Histogram
	engineLastSuccess prometheus.Gauge

	releaseRefreshes   *prometheus.CounterVec
	releaseLastSuccess prometheus.Gauge
}

// New builds the registry: the Go and process collectors, the scrape-time
// collectors over src, and the event metrics.
func New(src Sources) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), src: src}
	empty := map[string]bool{}
	m.routes.Store(&empty)
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "deployd_http_requests_total",
		Help: "HTTP requests answered, by route template, method and status code.",
	}, []string{"route", "method", "code"})
	m.requestSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "deployd_http_request_duration_seconds",
		Help:    "Time to answer an HTTP request (a stream: its whole life), by route template and method.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"route", "method"})
	m.signIns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "deployd_signins_total",
		Help: "Completed sign-in callbacks, by result (ok, or why it failed).",
	}, []string{"result"})
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "deployd_auth_refusals_total",
		Help: "Requests refused or demoted to anonymous for their credential or its rights, by reason.",
	}, []string{"reason"})
	m.appSync = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "argocd_app_sync_total",
		Help: "Number of application syncs (syncs, rollbacks and engine runs made through deployd).",
	}, []string{"namespace", "name", "project", "dest_server", "phase"})
	m.reconcile = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "argocd_app_reconcile",
		Help:    "Application reconciliation performance in seconds (engine runs).",
		Buckets: []float64{0.25, .5, 1, 2, 4, 8, 16},
	}, []string{"namespace", "dest_server"})
	m.batchSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "deployd_fold_batch_size",
		Help:    "Changes folded per batch.",
		Buckets: []float64{1, 4, 16, 64, 256, 1024, 4096},
	})
	m.batchSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "deployd_fold_batch_duration_seconds",
		Help:    "Time to fold one batch and publish its deltas.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
	})
	m.foldLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "deployd_fold_lag_seconds",
		Help:    "Time from an informer's notification to the end of its fold (the oldest change of each batch).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	})
	m.engineRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "deployd_engine_runs_total",
		Help: "Engine runs finished, by result (succeeded, partial, failed).",
	}, []string{"result"})
	m.engineSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "deployd_engine_run_duration_seconds",
		Help:    "Duration of engine runs.",
		Buckets: []float64{.25, .5, 1, 2, 5, 10, 30, 60, 120, 300},
	})
	m.engineLastSuccess = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "deployd_engine_last_success_timestamp_seconds",
		Help: "When the last engine run without failures finished (Unix seconds); 0 before one.",
	})
	m.releaseRefreshes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "deployd_release_refreshes_total",
		Help: "Refreshes of the release source, by result (ok, error).",
	}, []string{"result"})
	m.releaseLastSuccess = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "deployd_release_last_refresh_timestamp_seconds",
		Help: "When the release source was last refreshed successfully (Unix seconds); 0 before one.",
	})
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.requestSeconds, m.signIns, m.refusals,
		m.appSync, m.reconcile,
		m.batchSize, m.batchSeconds, m.foldLag,
		m.engineRuns, m.engineSeconds, m.engineLastSuccess,
		m.releaseRefreshes, m.releaseLastSuccess,
		&stateCollector{src: src},
	)
	return m
}

// Gatherer is the registry: every family but argocd_app_info, which the
// handler writes itself from the snapshot (appinfo.go).
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.reg }

// Handler serves GET /metrics in the Prometheus exposition format, and 404
// for every other path.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", m.serveMetrics)
	return mux
}

// SetRoutes names the route templates HTTP requests are labelled with;
// any other value of a request's route is counted as "unmatched".
func (m *Metrics) SetRoutes(templates []string) {
	if m == nil {
		return
	}
	set := make(map[string]bool, len(templates))
	for _, t := range templates {
		set[t] = true
	}
	m.routes.Store(&set)
}

// Request records one answered HTTP request.
func (m *Metrics) Request(method, route string, code int, took time.Duration) {
	if m == nil {
		return
	}
	if !(*m.routes.Load())[route] {
		route = "unmatched"
	}
	method = knownMethod(method)
	if code < 100 || code > 599 {
		code = 0
	}
	m.requests.WithLabelValues(route, method, statusLabels[code]).Inc()
	m.requestSeconds.WithLabelValues(route, method).Observe(took.Seconds())
}

// statusLabels are the code label's values, "0" and "100" to "599", made
// once rather than formatted on every request.
var statusLabels = func() (labels [600]string) {
	labels[0] = "0"
	for code := 100; code < len(labels); code++ {
		labels[code] = strconv.Itoa(code)
	}
	return labels
}()

func knownMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// SignIn records a completed sign-in callback: result is "ok" or the
// failure's reason (a fixed word chosen by the caller).
func (m *Metrics) SignIn(result string) {
	if m == nil {
		return
	}
	m.signIns.WithLabelValues(result).Inc()
}

// Refusal records a request refused (or demoted to anonymous) for its
// credential or its rights; reason is a fixed word chosen by the caller.
func (m *Metrics) Refusal(reason string) {
	if m == nil {
		return
	}
	m.refusals.WithLabelValues(reason).Inc()
}

// Batch records one batch folded by the writer: its size, how long the
// fold took, and how long its oldest change waited for it.
func (m *Metrics) Batch(size int, fold, wait time.Duration) {
	if m == nil {
		return
	}
	m.batchSize.Observe(float64(size))
	m.batchSeconds.Observe(fold.Seconds())
	m.foldLag.Observe(wait.Seconds())
}
