package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hanzoai/deploy/projection"
)

// Argo CD's descriptors, with Argo CD's label names in Argo CD's order
// (controller/metrics/metrics.go and clustercollector.go, v2.14).
var (
	descClusterInfo = prometheus.NewDesc("argocd_cluster_info", "Information about cluster.",
		[]string{"server", "k8s_version", "name"}, nil)
	// Argo CD labels these by server alone; deployd adds the cluster's name,
	// since two clusters may share an address (one API server under two
	// names, each with its own credentials), and two series with the same
	// labels would fail the whole scrape.
	descClusterObjects = prometheus.NewDesc("argocd_cluster_api_resource_objects", "Number of k8s resource objects in the cache.",
		[]string{"server", "name"}, nil)
	descClusterAPIs = prometheus.NewDesc("argocd_cluster_api_resources", "Number of monitored kubernetes API resources.",
		[]string{"server", "name"}, nil)
)

// deployd's own scrape-time descriptors.
var (
	descReady = prometheus.NewDesc("deployd_ready",
		"1 when the projection reflects the cluster (every served kind listed and folded), else 0.", nil, nil)
	descKindsListed = prometheus.NewDesc("deployd_initial_sync_kinds_listed",
		"Served registry kinds whose informer has finished its initial list.", nil, nil)
	descKindsServed = prometheus.NewDesc("deployd_initial_sync_kinds",
		"Registry kinds the API server serves (and deployd watches).", nil, nil)
	descFolded = prometheus.NewDesc("deployd_fold_changes_total",
		"Changes folded into the projection.", nil, nil)
	descQueued = prometheus.NewDesc("deployd_fold_queue_length",
		"Changes waiting for the writer.", nil, nil)
	descChanges = prometheus.NewDesc("deployd_changes_total",
		"Informer notifications turned into changes for the fold, by kind.", []string{"kind"}, nil)
	descRelists = prometheus.NewDesc("deployd_informer_relists_total",
		"Initial lists an informer made again after its first (it lost its place in the watch), by kind.", []string{"kind"}, nil)
	descWatchRestarts = prometheus.NewDesc("deployd_watch_restarts_total",
		"Watches reopened from a resourceVersion without a list, by kind.", []string{"kind"}, nil)
	descObjects = prometheus.NewDesc("deployd_informer_objects",
		"Objects an informer holds for watched namespaces, by kind.", []string{"kind"}, nil)
	descRevision = prometheus.NewDesc("deployd_snapshot_revision",
		"The revision of the current projection snapshot.", nil, nil)
	descPosition = prometheus.NewDesc("deployd_snapshot_position",
		"The cluster position of the current snapshot: the newest resourceVersion folded (equal on replicas in step).", nil, nil)
	descHistoryResumes = prometheus.NewDesc("deployd_stream_history_resumes_total",
		"Streams resumed from a position older than the ring by the API server's history, instead of reset.", nil, nil)
	descApps = prometheus.NewDesc("deployd_apps",
		"Application rows in the current snapshot (CD Applications included).", nil, nil)
	descSubscribers = prometheus.NewDesc("deployd_stream_subscribers",
		"Streams being served, by route (applications, resource-tree).", []string{"route"}, nil)
	descViews = prometheus.NewDesc("deployd_stream_views",
		"Distinct views (scope, filter, fields) with live subscribers.", nil, nil)
	descEvents = prometheus.NewDesc("deployd_stream_events_total",
		"Changes fanned out to the streams (one per revision).", nil, nil)
	descEncodings = prometheus.NewDesc("deployd_stream_encodings_total",
		"Frames encoded: live (once per view that sees an event) or replay (per subscriber, bursts and catch-up).", []string{"kind"}, nil)
	descCutOffs = prometheus.NewDesc("deployd_stream_cutoffs_total",
		"Streams cut off, by reason (slow: its queue was full; skipped: revisions were skipped).", []string{"reason"}, nil)
	descResets = prometheus.NewDesc("deployd_stream_resets_total",
		"Streams told to reset (event: reset) because their position could not be resumed.", nil, nil)
	descRingLen = prometheus.NewDesc("deployd_stream_ring_events",
		"Events held in the resume ring.", nil, nil)
	descRingAge = prometheus.NewDesc("deployd_stream_ring_age_seconds",
		"Age of the oldest event in the resume ring; 0 when it is empty.", nil, nil)
	descEngineLeader = prometheus.NewDesc("deployd_engine_leader",
		"1 on the replica that runs the engine (holds its Lease), 0 on the others.", nil, nil)
	descEngineSuspended = prometheus.NewDesc("deployd_engine_suspended",
		"1 while the engine is suspended (interval and webhook runs skipped).", nil, nil)
	descEngineStale = prometheus.NewDesc("deployd_engine_stale_since_timestamp_seconds",
		"When the repository's fetches began to fail (runs heal from the last good commit meanwhile); 0 while they succeed.", nil, nil)
	descTokenCache = prometheus.NewDesc("deployd_token_cache_requests_total",
		"Bearer token verifications, by result (hit: answered from the cache; miss: verified against the issuer's keys).", []string{"result"}, nil)
)

// stateCollector reads Sources at scrape time.
type stateCollector struct{ src Sources }

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		descClusterInfo, descClusterObjects, descClusterAPIs,
		descReady, descKindsListed, descKindsServed, descFolded, descQueued, descChanges, descRelists,
		descWatchRestarts, descObjects, descRevision, descPosition, descHistoryResumes, descApps, descSubscribers, descViews, descEvents,
		descEncodings, descCutOffs, descResets, descRingLen, descRingAge, descTokenCache,
		descEngineLeader, descEngineSuspended, descEngineStale,
	} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	counter := func(d *prometheus.Desc, v uint64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), lv...)
	}
	if c.src.Snapshot != nil {
		snap := c.src.Snapshot()
		n := snap.Len() + len(snap.CDApplications()) // argocd_app_info is written by serveMetrics
		gauge(descRevision, float64(snap.Revision))
		gauge(descPosition, float64(snap.Position.First()))
		gauge(descApps, float64(n))
	}
	if c.src.Cluster != nil {
		cl := c.src.Cluster()
		gauge(descReady, b2f(cl.Ready))
		gauge(descKindsListed, float64(cl.KindsListed))
		gauge(descKindsServed, float64(cl.KindsServed))
		counter(descFolded, cl.Folded)
		gauge(descQueued, float64(cl.Queued))
		objects := 0
		for _, k := range cl.Kinds {
			counter(descChanges, k.Changes, k.Name)
			counter(descRelists, k.Relists, k.Name)
			counter(descWatchRestarts, k.WatchRestarts, k.Name)
			gauge(descObjects, float64(k.Objects), k.Name)
			objects += k.Objects
		}
		gauge(descClusterInfo, 1, c.src.ClusterServer, cl.K8sVersion, c.src.ClusterName)
		gauge(descClusterObjects, float64(objects), c.src.ClusterServer, c.src.ClusterName)
		gauge(descClusterAPIs, float64(cl.KindsServed), c.src.ClusterServer, c.src.ClusterName)
	}
	if c.src.Others != nil {
		for _, cl := range c.src.Others() {
			objects := 0
			for _, k := range cl.Kinds {
				objects += k.Objects
			}
			gauge(descClusterInfo, 1, cl.Server, cl.K8sVersion, cl.Name)
			gauge(descClusterObjects, float64(objects), cl.Server, cl.Name)
			gauge(descClusterAPIs, float64(cl.KindsServed), cl.Server, cl.Name)
		}
	}
	if c.src.Hub != nil {
		st := c.src.Hub()
		gauge(descSubscribers, float64(st.Subscribers), "applications")
		gauge(descSubscribers, float64(st.TreeSubscribers), "resource-tree")
		gauge(descViews, float64(st.Views))
		counter(descEvents, st.Events)
		counter(descEncodings, st.Encodings, "live")
		counter(descEncodings, st.ReplayEncodings, "replay")
		counter(descCutOffs, st.SlowCutOff, "slow")
		counter(descCutOffs, st.CutOff-st.SlowCutOff, "skipped")
		counter(descResets, st.Resets)
		counter(descHistoryResumes, st.HistoryResumes)
		gauge(descRingLen, float64(st.RingLen))
		age := 0.0
		if !st.RingOldest.IsZero() {
			age = max(time.Since(st.RingOldest).Seconds(), 0)
		}
		gauge(descRingAge, age)
	}
	if c.src.Engine != nil {
		st, leading := c.src.Engine()
		gauge(descEngineLeader, b2f(leading))
		gauge(descEngineSuspended, b2f(st.Suspended != nil))
		since := 0.0
		if st.Stale != nil {
			since = float64(st.Stale.Since.UnixNano()) / 1e9
		}
		gauge(descEngineStale, since)
	}
	if c.src.TokenCache != nil {
		tc := c.src.TokenCache()
		counter(descTokenCache, tc.Hits, "hit")
		counter(descTokenCache, tc.Misses, "miss")
	}
}

// operation is Argo CD's operation label: "delete" while the row's root
// object is being deleted, "sync" while a sync runs, "" otherwise.
func operation(a *projection.App) string {
	switch {
	case len(a.Tree) > 0 && a.Tree[0].Obj.Deleting:
		return "delete"
	case a.Operation != nil && a.Operation.Phase == "Running":
		return "sync"
	}
	return ""
}

func boolLabel(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
