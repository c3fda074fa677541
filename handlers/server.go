package handlers

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/metrics"
	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/stream"
)

// Snapshotter hands out the current projection snapshot.
type Snapshotter interface {
	Snapshot() *projection.Snapshot
}

// ClusterStatus is what the watcher reports about the cluster it reads.
type ClusterStatus struct {
	// Configured: a cluster configuration was resolved.
	Configured bool
	// Reachable: the API server answered discovery.
	Reachable bool
	// AppCRD: hanzo.ai/v1 apps is served.
	AppCRD bool
	// CDCRD: the CD Application kind is served.
	CDCRD bool
	// Ready: every cache synced; the projection reflects the cluster.
	Ready bool
	// Reason says why it is not ready, in words safe for a client.
	Reason string
	// Progress is the initial sync's progress while it runs ("syncing: 12
	// of 17 kinds listed, 48211 objects folded"), "" otherwise.
	Progress string
	// ServerVersion is the API server's version ("v1.35.0"), "" until it
	// has answered; CheckedAt when it was last asked (zero before).
	ServerVersion string
	CheckedAt     time.Time
	// FailedSince is when the API server stopped answering (zero while
	// it answers).
	FailedSince time.Time
}

// ClusterEntry is one cluster of several, as GET /api/v1/clusters lists
// it: its name, its API server's URL and its state.
type ClusterEntry struct {
	Name, Server string
	Status       ClusterStatus
}

// LiveReader reads one object of a registry kind from the API server, on
// demand (the live manifest is never cached).
type LiveReader interface {
	Get(ctx context.Context, kind projection.Kind, namespace, name string) (map[string]any, error)
}

// LogRequest asks for a container's log.
type LogRequest struct {
	Namespace  string
	Pod        string
	Container  string
	TailLines  int64
	LimitBytes int64
	Follow     bool
	// Timestamps prefixes each line with its RFC 3339 time and a space.
	Timestamps bool
}

// LogReader streams a container's log from the kubelet through the API
// server.
type LogReader interface {
	Logs(ctx context.Context, req LogRequest) (io.ReadCloser, error)
}

// Version describes the running binary.
type Version struct {
	Version   string
	BuildDate string
	GitCommit string
}

// Deps is everything the HTTP surface needs.
type Deps struct {
	Log *slog.Logger
	// AccessLog writes a line for every request (nil: Log).
	AccessLog *slog.Logger
	Snapshots Snapshotter
	// Projection is the store's configuration (namespace map, display
	// values).
	Projection projection.Config
	// Cluster reports the watcher's state; nil means never configured.
	Cluster func() ClusterStatus
	Live    LiveReader
	Logs    LogReader
	// Events lists Events live for the events route; nil answers 503.
	Events EventReader
	// Writer performs the writes; nil disables them (503).
	Writer Writer
	// Hub serves the streams; nil leaves them out.
	Hub  *stream.Hub
	Auth *auth.Authenticator
	// PublicURL is where browsers reach deployd (the dashboard's origin).
	PublicURL string
	// ClusterName names the one cluster in /clusters and on the board.
	ClusterName string
	// Clusters lists every cluster, the first first (the order of
	// Projection.Clusters), when the projection holds several; nil with
	// one (Cluster and ClusterName describe it). Cluster is then their
	// sum: what readiness waits for.
	Clusters func() []ClusterEntry
	Version  Version
	// Releases answers the drift board's release questions; nil when no
	// release source is configured.
	// It is given the App's image repository (registry host included) and
	// reads a cache: it never waits on a registry or a forge.
	Releases func(repository, declaredTag string) *projection.Release
	// ReleaseChanges returns the release source's generation and a channel
	// closed when an answer changes; nil when Releases is nil.
	ReleaseChanges func() (uint64, <-chan struct{})
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Web serves the embedded dashboard at /; nil for none.
	Web http.Handler
	// Engine drives the (first) cluster to the manifest repository; nil
	// when disabled (its routes answer 503).
	Engine Engine
	// ClusterEngines are the other clusters' engines, by cluster name,
	// each taking namespaces as its cluster names them (engines.go); a
	// cluster without one runs none.
	ClusterEngines map[string]Engine
	// Metrics records requests, sign-ins, refusals and syncs; nil records
	// nothing. It is served on its own listener, never by this server.
	Metrics *metrics.Metrics
	// EngineWebhookSecret authenticates POST /v1/deploy/webhook/git (HMAC-SHA256
	// of the body); empty refuses every webhook.
	EngineWebhookSecret []byte
	// ClusterWebhookSecrets are the other clusters' engines' webhook
	// secrets, by cluster name; a cluster without one takes
	// EngineWebhookSecret.
	ClusterWebhookSecrets map[string][]byte
	// Positions maps back the compact ids of positions of many clusters
	// (the stream's, a list's entity tag); nil: none are given.
	Positions *projection.Book
	// Peering signs the requests this replica forwards to the engine's
	// leader and verifies those forwarded to it; nil refuses both.
	Peering *auth.Peering
	// Peers are the only places a request is forwarded to (DEPLOY_PEERS);
	// nil: none.
	Peers *auth.PeerSet
}

// Server is deployd's HTTP surface.
type Server struct {
	d       Deps
	e       *echo.Echo
	session *Session
	cache   *responseCache
	// writes are the write routes (POST /path/:name/sync), audited.
	writes map[writeRoute]bool
	// chain is the middleware every request goes through, composed once
	// (front).
	chain echo.HandlerFunc
	// fwd carries requests forwarded to the engine's leader.
	fwdOnce sync.Once
	fwd     *http.Client
	// deliveries are the git webhook's deliveries run, for replays.
	deliveries deliveries
	// clusterNames name the parts of a position (nil with one cluster).
	clusterNames []string
	// engines are the clusters' engines by name, nil with one cluster
	// (engines.go).
	engines map[string]Engine
	// readyUntil is when requireReady asks the clusters again, on
	// processStart's clock (nanoseconds); until then they were ready.
	readyUntil atomic.Int64
}

// New builds the Echo server with every route and middleware.
func New(d Deps) *Server {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.AccessLog == nil {
		d.AccessLog = d.Log
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Cluster == nil {
		d.Cluster = func() ClusterStatus { return ClusterStatus{Reason: "no Kubernetes configuration"} }
	}
	if d.ClusterName == "" {
		d.ClusterName = "in-cluster"
	}
	s := &Server{d: d, e: echo.New(), session: NewSession(d.Auth, d.Log), cache: newResponseCache(256), writes: map[writeRoute]bool{}, clusterNames: d.Projection.ClusterNames()}
	s.session.metrics = d.Metrics
	s.initEngines()
	e := s.e
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(d.Log)
	e.Pre(routeEscaped)
	s.chain = compose(func(c echo.Context) error { return stateOf(c.Request().Context()).next(c) },
		accessLog(d.AccessLog, d.Now, d.Metrics),
		recoverPanics(d.Log),
		tracing(),
		securityHeaders(),
		bodyLimit(),
		decodeParams,
		s.proveForwardAnswer,
		s.audit,
		s.acceptForward,
		s.session.Authenticate(),
		SameOrigin(d.PublicURL),
	)
	e.Use(s.front)
	if d.Positions != nil && d.Peers != nil && d.Peering.Ready() == nil {
		d.Positions.Lookup = s.lookupPosition
	}
	s.session.Register(e)
	s.routes()
	s.mountArgo()
	s.streamRoutes()
	s.writeRoutes()
	s.engineRoutes()
	s.mountAPINotFound()
	// Metrics have their own listener: this one never serves them, not
	// even as the page's fallback.
	noMetrics := func(echo.Context) error {
		return errorf(http.StatusNotFound, "not found: metrics are served on their own listener (DEPLOYD_METRICS_LISTEN), not this one")
	}
	e.Any("/metrics", noMetrics)
	e.Any("/metrics/*", noMetrics)
	if d.Web != nil {
		e.GET("/*", echo.WrapHandler(d.Web))
	}
	if d.Metrics != nil {
		var templates []string
		for _, r := range e.Routes() {
			templates = append(templates, r.Path)
		}
		d.Metrics.SetRoutes(templates)
	}
	return s
}

// front is the one middleware Echo applies itself. Echo v4 calls every
// middleware's constructor again on each request (a closure each), so the
// chain is composed once, in New; front starts the request's state, with
// the route's handler as where the chain ends, and runs it.
func (s *Server) front(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		c.SetRequest(r.WithContext(&requestState{Context: r.Context(), next: next}))
		return s.chain(c)
	}
}

// compose applies middleware to h once: the first wraps the others.
func compose(h echo.HandlerFunc, middleware ...echo.MiddlewareFunc) echo.HandlerFunc {
	for i := len(middleware) - 1; i >= 0; i-- {
		h = middleware[i](h)
	}
	return h
}

// handle registers h for method and path with its route middleware applied
// once, here: Echo v4 would apply it again on every request.
func (s *Server) handle(method, path string, h echo.HandlerFunc, middleware ...echo.MiddlewareFunc) {
	s.e.Add(method, path, compose(h, middleware...))
}

// bodyLimit holds a request's body to 64 KiB. The git webhook reads its
// own, larger, limit. A request without a body has nothing to limit and is
// not given a reader for it.
func bodyLimit() echo.MiddlewareFunc {
	return middleware.BodyLimitWithConfig(middleware.BodyLimitConfig{Limit: "64K", Skipper: func(c echo.Context) bool {
		return c.Path() == webhookPath || hasNoBody(c.Request())
	}})
}

// hasNoBody reports whether r carries no body at all (net/http's NoBody,
// length 0), as a GET or HEAD does.
func hasNoBody(r *http.Request) bool {
	return r.ContentLength == 0 && (r.Body == nil || r.Body == http.NoBody)
}

// Handler returns the server as an http.Handler.
func (s *Server) Handler() http.Handler { return s.e }

// Echo returns the underlying Echo instance (for mounting more routes).
func (s *Server) Echo() *echo.Echo { return s.e }

func (s *Server) routes() {
	e := s.e
	scoped := []echo.MiddlewareFunc{RequireScope(), s.requireReady}

	e.GET("/v1/deploy/health", s.health("deploy"))
	e.GET(peerPositionsPath+":id", s.peerPosition)
	e.GET("/v1/paas/health", s.health("paas"))

	s.handle(http.MethodGet, "/v1/deploy/gitops", s.gitops, append(scoped, s.requireSuperAdmin)...)

	s.handle(http.MethodGet, "/v1/deploy/:name/tree", s.nativeTree, scoped...)
	s.handle(http.MethodGet, "/v1/deploy/:name/resource/:ref", s.resource, scoped...)
	s.handle(http.MethodGet, "/v1/deploy/:name/logs", s.logs, scoped...)

	paas := []echo.MiddlewareFunc{RequireScope(), s.requirePaaS, s.requireReady}
	s.handle(http.MethodGet, "/v1/paas/apps", s.paasList, paas...)
	s.handle(http.MethodGet, "/v1/paas/apps/:app", s.paasApp, paas...)
	s.handle(http.MethodGet, "/v1/paas/stream/apps", s.paasStream, paas...)
}
