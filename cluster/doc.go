// Package cluster is deployd's only client of the Kubernetes API: it
// resolves the rest config, watches the closed registry of kinds, turns every
// informer notification into a projection.Change for the single writer, and
// performs the few reads and writes handlers ask for (live manifests, logs,
// Events, merge patches).
//
// Invariants:
//   - Closed registry. Only the kinds of projection.Registry are ever read;
//     Secrets are not among them, so no code path here can read one. Events
//     (projection.LiveOnly) are listed per request for one namespace and
//     never watched or folded.
//   - One watch per kind, cluster-wide, whatever the number of clients.
//     Built-in kinds are read in protobuf through typed clients (ConfigMaps
//     and PodDisruptionBudgets as metadata only: their data never crosses
//     the wire); CRDs through the dynamic client.
//   - Decoded once, held once. The informer transform turns each object
//     into the projection's summary (projection.Object) as it arrives; the
//     informer cache and the projection share that summary, so no full
//     object (managedFields, last-applied configuration, pod environment)
//     outlives its decoding. Objects outside the namespace map keep their
//     identity alone and never reach the fold. Strings that repeat are
//     interned, and a pod decoded after a sibling of the same controller
//     holds the sibling's labels, owner references, containers and
//     statuses when they are equal (a bounded table of recent
//     controllers), so the ten pods of a ReplicaSet hold one copy of each.
//   - Informer callbacks only enqueue. The Feed's goroutine is the one
//     writer of the projection.Store: it applies queued changes in arrival
//     order, in batches, and hands the deltas on. Ready means every initial
//     list has been folded, not merely received.
//   - Goroutines: Watcher.Run owns the informers, the discovery poll and
//     the start-up progress reporter (which logs the initial sync every
//     Options.Progress and ends after one ready line) and returns when its
//     context ends, after they stopped; Feed.Run returns when its context
//     ends. Nothing else is started here.
//   - Counters for metrics are plain atomics read by accessors (Feed.Changes,
//     Watcher.Counters, Status's sync progress) or one callback per folded
//     batch (Feed.OnBatch); this package imports no metrics library.
//   - Without a resolvable configuration the watcher still exists: it reports
//     why (Status) and every data read answers that reason instead.
package cluster
