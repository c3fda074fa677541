package handlers

import (
	"context"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/projection"
)

// The engines of several clusters (ARCHITECTURE.md §12). Each cluster may
// run an engine of its own, with its own Lease, state, report and
// write-back: Deps.Engine is the first cluster's, Deps.ClusterEngines the
// others', by cluster name, each speaking of namespaces as its own cluster
// names them. The routes speak of the projection's namespaces (qualified
// for the other clusters): an App's engine is its cluster's
// (engineFor), and the engine routes take the cluster as ?cluster=, the
// first cluster's engine when it is absent (engineNamed).

// clusterEngine is one cluster's engine as the routes see it: it takes
// the projection's namespaces, answers only for its own cluster's, and
// names its cluster in what it reports.
type clusterEngine struct {
	Engine
	// cluster is the cluster's name.
	cluster string
	// suffix is the qualifier of the cluster's namespaces: "" for the
	// first cluster, else its name.
	suffix string
}

// local is the namespace as the engine's cluster names it; false for
// another cluster's.
func (e clusterEngine) local(namespace string) (string, bool) {
	ns, cluster := projection.SplitNamespace(namespace)
	return ns, cluster == e.suffix
}

func (e clusterEngine) Desired(kind projection.Kind, namespace, name string) (map[string]any, bool) {
	ns, ok := e.local(namespace)
	if !ok {
		return nil, false
	}
	return e.Engine.Desired(kind, ns, name)
}

func (e clusterEngine) Manages(namespace, name string) (string, bool) {
	ns, ok := e.local(namespace)
	if !ok {
		return "", false
	}
	return e.Engine.Manages(ns, name)
}

func (e clusterEngine) History(ctx context.Context, namespace, name string) ([]gitops.GitCommit, error) {
	ns, ok := e.local(namespace)
	if !ok {
		return nil, nil
	}
	return e.Engine.History(ctx, ns, name)
}

func (e clusterEngine) WriteTag(ctx context.Context, w gitops.TagWrite) (string, error) {
	ns, ok := e.local(w.Namespace)
	if !ok {
		return "", errorf(http.StatusConflict, "namespace "+quoteShort(w.Namespace)+" is not in cluster "+e.cluster)
	}
	w.Namespace = ns
	return e.Engine.WriteTag(ctx, w)
}

func (e clusterEngine) Status() gitops.EngineStatus {
	st := e.Engine.Status()
	st.Cluster = e.cluster
	return st
}

func (e clusterEngine) Reconcile(ctx context.Context, trigger string, dryRun bool) (*gitops.ReconcileReport, error) {
	r, err := e.Engine.Reconcile(ctx, trigger, dryRun)
	if r != nil {
		// Requests that share a run share its report: tag a copy.
		out := *r
		out.Cluster = e.cluster
		r = &out
	}
	return r, err
}

func (e clusterEngine) Suspend(ctx context.Context, by string) (gitops.EngineStatus, error) {
	st, err := e.Engine.Suspend(ctx, by)
	st.Cluster = e.cluster
	return st, err
}

func (e clusterEngine) Resume(ctx context.Context) (gitops.EngineStatus, error) {
	st, err := e.Engine.Resume(ctx)
	st.Cluster = e.cluster
	return st, err
}

// initEngines keys the engines by cluster name; with one cluster the
// first's engine is used as it is.
func (s *Server) initEngines() {
	names := s.clusterNames
	if names == nil {
		return
	}
	s.engines = make(map[string]Engine, len(names))
	if s.d.Engine != nil {
		s.engines[names[0]] = clusterEngine{Engine: s.d.Engine, cluster: names[0]}
	}
	for _, name := range names[1:] {
		if e := s.d.ClusterEngines[name]; e != nil {
			s.engines[name] = clusterEngine{Engine: e, cluster: name, suffix: name}
		}
	}
}

// anyEngine reports whether some cluster runs an engine.
func (s *Server) anyEngine() bool {
	return s.d.Engine != nil || len(s.engines) > 0
}

// engineFor is the engine of the cluster a (projection) namespace is in;
// nil when that cluster runs none.
func (s *Server) engineFor(namespace string) Engine {
	if s.engines == nil {
		return s.d.Engine
	}
	_, cluster := projection.SplitNamespace(namespace)
	if cluster == "" {
		cluster = s.clusterNames[0]
	}
	return s.engines[cluster]
}

// engineKey holds the engine a route's request names (routeEngine),
// engineClusterKey the name of its cluster.
const (
	engineKey        = "deployd.engine"
	engineClusterKey = "deployd.engine.cluster"
)

// engineNamed is the engine the request's ?cluster= names (the first
// cluster's when absent; nil when that cluster runs none) and the
// cluster's name; a 400 for a cluster deployd does not serve.
func (s *Server) engineNamed(c echo.Context) (Engine, string, error) {
	q := c.QueryParams()
	name, err := single(q, "cluster")
	if err != nil {
		return nil, "", err
	}
	first := s.d.ClusterName
	if s.clusterNames != nil {
		first = s.clusterNames[0]
	}
	if !q.Has("cluster") || name == first {
		if s.engines == nil {
			return s.d.Engine, first, nil
		}
		return s.engines[first], first, nil
	}
	for _, n := range s.clusterNames {
		if n == name {
			return s.engines[name], name, nil
		}
	}
	served := first
	if s.clusterNames != nil {
		served = strings.Join(s.clusterNames, ", ")
	}
	return nil, "", errorf(http.StatusBadRequest, "cluster "+quoteShort(name)+" is not one deployd serves; name one of: "+served)
}

// selectEngine is the middleware that resolves the engine a route's
// request names, for onLeader and the handler (routeEngine); the handler
// answers for a cluster that runs none.
func (s *Server) selectEngine(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		e, name, err := s.engineNamed(c)
		if err != nil {
			return err
		}
		if e != nil {
			c.Set(engineKey, e)
		}
		c.Set(engineClusterKey, name)
		return next(c)
	}
}

// routeEngine is the engine selectEngine resolved; nil when the cluster
// runs none.
func (s *Server) routeEngine(c echo.Context) Engine {
	e, _ := c.Get(engineKey).(Engine)
	return e
}

// webhookSecret is the webhook secret of the engine the request names:
// its cluster's own when its entry sets one, else DEPLOY_ENGINE_WEBHOOK_SECRET.
func (s *Server) webhookSecret(c echo.Context) []byte {
	name, _ := c.Get(engineClusterKey).(string)
	if secret, ok := s.d.ClusterWebhookSecrets[name]; ok && len(secret) > 0 {
		return secret
	}
	return s.d.EngineWebhookSecret
}

// noEngine is the 503 of an engine route for a cluster that runs none.
func (s *Server) noEngine(c echo.Context) error {
	name := c.QueryParam("cluster")
	if s.clusterNames == nil || name == "" || name == s.clusterNames[0] {
		return errorf(http.StatusServiceUnavailable, engineDisabled)
	}
	return errorf(http.StatusServiceUnavailable, "cluster "+quoteShort(name)+" runs no engine (give its entry in DEPLOY_CLUSTERS_FILE an engine: {repo, ref, path})")
}

// engineStatuses is every cluster's engine state, the first's first, when
// deployd serves several clusters; nil with one.
func (s *Server) engineStatuses() []gitops.EngineStatus {
	if s.clusterNames == nil {
		return nil
	}
	out := make([]gitops.EngineStatus, 0, len(s.clusterNames))
	for i, name := range s.clusterNames {
		out = append(out, s.engineStatusOf(s.engines[name], i))
	}
	return out
}

// engineStatusOf is an engine's state for GET /v1/deploy/gitops; without
// one, the cluster's configured source (if any) with nothing run.
func (s *Server) engineStatusOf(e Engine, cluster int) gitops.EngineStatus {
	if e != nil {
		return e.Status()
	}
	st := gitops.EngineStatus{}
	src := s.d.Projection.Engine
	if cluster > 0 {
		r := s.d.Projection.Clusters[cluster-1]
		src, st.Cluster = r.Engine, r.Name
	} else if s.clusterNames != nil {
		st.Cluster = s.clusterNames[0]
	}
	if src != nil {
		st.Source = *src
	}
	return st
}
