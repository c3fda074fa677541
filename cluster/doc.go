// Package cluster is deployd's only client of the Kubernetes API: it
// resolves the rest config, watches the closed registry of kinds, turns every
// informer notification into a projection.Change for the single writer, and
// performs the few reads and writes handlers ask for (live manifests, logs,
// merge patches).
//
// Invariants:
//   - Closed registry. Only the kinds of projection.Registry are ever read;
//     Secrets are not among them, so no code path here can read one.
//   - One watch per kind, cluster-wide, whatever the number of clients.
//     Objects outside the namespace map are cut to a stub at ingest and never
//     reach the fold; every object is trimmed to what the fold needs (no
//     managedFields, no last-applied configuration, no ConfigMap data, no pod
//     environment), so the informer caches stay small.
//   - Informer callbacks only decode and enqueue. The Feed's goroutine is the
//     one writer of the projection.Store: it applies queued changes in
//     arrival order, in batches, and hands the deltas on.
//   - Goroutines: Watcher.Run owns the informers and the discovery poll and
//     returns when its context ends, after they stopped; Feed.Run returns
//     when its context ends. Nothing else is started here.
//   - Without a resolvable configuration the watcher still exists: it reports
//     why (Status) and every data read answers that reason instead.
package cluster
