// Package metrics is deployd's Prometheus surface: every collector lives
// here, and nothing else in deployd imports the Prometheus client.
//
// Invariants:
//   - Two kinds of metric. Gauges and counters of state other packages
//     already keep (the snapshot's Apps, the hub's subscribers and ring, the
//     feed's and informers' counters, the token cache) are read at scrape
//     time from Sources, through plain accessors: no second copy of the
//     fleet is kept, and the fold's hot path does no metrics work.
//     Observations of events (a request, a batch folded, a sign-in, a sync,
//     an engine run, a release refresh) are recorded by calling the
//     Metrics methods, which are safe for concurrent use and on a nil
//     *Metrics (they then do nothing).
//   - Argo CD's family (argocd_app_info, argocd_app_sync_total,
//     argocd_app_reconcile, argocd_cluster_info,
//     argocd_cluster_api_resource_objects, argocd_cluster_api_resources)
//     has Argo CD's names, types and label names, so its dashboards and
//     alerts work unchanged; deployd's own metrics are prefixed deployd_.
//   - Bounded cardinality. No label value comes from a request: HTTP
//     metrics are labelled by the route template (a path that matched no
//     route is "unmatched"), a known method or "other", and the status;
//     refusals and sign-ins by a fixed reason. Per-App series exist only
//     for Apps in the snapshot (argocd_app_info) or Apps a write or an
//     engine run acted on.
//   - Hooks for parts built elsewhere. Whoever runs the engine (cmd/deployd,
//     around engine.Reconcile, for every trigger: request, interval,
//     webhook) calls EngineRun once per finished run that was not a dry run,
//     with the report (or the error that ended it), the run's duration and
//     its end: runs count by result, a clean run sets the last-success
//     time, and each App of the report counts in argocd_app_sync_total and
//     argocd_app_reconcile. The release source reports each repository
//     refresh through release.Options.OnRefresh, which cmd/deployd turns
//     into ReleaseRefresh. Syncs and rollbacks through the write routes are
//     counted by the handlers (AppSync).
//   - Handler serves /metrics only; it is meant for its own listener
//     (DEPLOYD_METRICS_LISTEN), never the public one.
package metrics
