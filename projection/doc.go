// Package projection is deployd's domain: a pure, order-independent fold of
// cluster objects into applications, resource trees, health, sync, history
// and drift.
//
// Invariants:
//   - Pure. The package does no IO, starts no goroutine and imports no
//     client-go, echo or net/http; only k8s.io/apimachinery types.
//   - One writer. Store.Apply is called by exactly one goroutine (the owner of
//     the Store). It folds a batch of Changes, bumps the revision once, publishes
//     a new immutable Snapshot through an atomic pointer, and returns the Deltas.
//   - Readers never lock. Store.Snapshot returns the current *Snapshot; nothing
//     reachable from it is ever mutated afterwards (every App, Node and slice in
//     it is fresh or shared read-only). Readers must not mutate it either.
//   - Order independence. The derived state is a function of the set of objects
//     currently held, never of the order they arrived in: a Pod before its
//     ReplicaSet, a child before its App, converge to the same tree.
//   - Closed registry. Apply rejects any kind outside the registry (Secrets
//     above all) and any object in a namespace outside the namespace map.
//   - Strings that repeat across objects (namespaces, labels, owner
//     references, images, node names, phases, condition types) are
//     interned when an object is decoded (Intern): summaries share one copy.
//   - Encoded forms are computed once per App version, by whichever reader
//     needs them first, and shared by all readers after that.
//
// Several clusters (clusters.go): the first cluster's objects keep their
// namespaces; another cluster's are folded with the namespace
// "<namespace>.<cluster>" (QualifyNamespace). A namespace is a DNS label,
// without a dot, so the first dot splits the two, and the name round-trips
// through the Argo CD UI's URLs and ?appNamespace= unchanged; today's
// links to the first cluster's Apps keep working. Each cluster has its own
// namespace map (Config.Clusters), a tenant's namespace in another cluster
// is "tenant-<org>.<cluster>", and a Position holds one resourceVersion
// per cluster (vector.go).
//
// Files: store.go (Apply and the fold), store_owners.go (the owner index),
// store_dirty.go (which rows a change marks), store_deltas.go (deriving the
// marked rows and the deltas); derive.go (an App row), derive_tree.go,
// derive_health.go, derive_history.go, derive_patch.go (the incremental
// patch of a row whose tree kept its shape), derive_rows.go (sites and CD
// Applications); snapshot.go, position.go, kind.go, decode.go, health*.go,
// argo.go and native.go (the wire shapes). The contracts kept here are
// ARCHITECTURE.md's Positions and Kind registry; desired vs live is
// projection/drift.
package projection
