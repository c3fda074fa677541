// Package sim simulates a fleet the way the hanzo operator and the
// Kubernetes controllers run it, over a dynamic client: it loads a
// generated fleet, then at each Step behaves like the operator (an App's
// new spec.image.tag updates its Deployment's pod template, a sync request
// is reconciled, status follows), the Deployment and ReplicaSet controllers
// (new ReplicaSets, rolling updates with Kubernetes' default surge, old
// ReplicaSets scaled down, a rolling restart) and the kubelet (pods pending,
// then running, then ready; a crash loop that recovers; an image that
// cannot be pulled). FakeCluster is the in-process API server the demo runs
// it against; the same code loads into a real API server.
//
// Invariants:
//   - Time advances only by Step. Step count decides how far pods and
//     rollouts have come; the injected clock only stamps times. Tests drive
//     Step directly and never sleep; Run ticks Step at a pace until its
//     context ends, and is the only goroutine this package starts (besides
//     the bounded workers of a load, which end before New returns).
//   - The cluster is the source of truth for what others write. Each Step
//     first lists the Apps and Deployments (polling, one list per kind per
//     step), so a write made through any client (deployd's sync annotation,
//     a rollback of spec.image.tag, a rolling restart of the pod template)
//     is seen at the next Step, in a deterministic order.
//   - The simulator writes only what the operator and the controllers own,
//     as merge patches of what it changed since it last wrote: an App's
//     status (never its metadata or spec); its children's metadata, spec
//     and status. Fields others set on them survive.
//   - Deterministic: one seed, one sequence of Steps and of outside writes
//     give the same objects, names and uids (uids of a real API server
//     aside).
//   - Step is serialized; every exported method is safe for concurrent use.
package sim
