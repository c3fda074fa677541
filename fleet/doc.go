// Package fleet generates a realistic fleet of hanzo.ai/v1 Apps and renders
// the objects the operator and the Kubernetes controllers make of them, for
// the demo, for tests and for benchmarks.
//
// Invariants:
//   - Pure and deterministic. Generate depends only on its seed and size;
//     Render only on its arguments. Every time in a generated fleet is at or
//     before Epoch (Shift moves a fleet to another moment), every uid is
//     derived from namespace, kind and name (UID), and every ReplicaSet and
//     Pod name from the app and its pod template, so two renders of one seed
//     are byte-identical and ownerReferences resolve without an API server.
//   - Rendered objects carry what deployd's fold reads (projection.Decode)
//     and what a real API server validates: selectors match template labels,
//     statuses are consistent (ready ≤ replicas), App status never has
//     status.replicas.
//   - Load is the only code here that talks to a cluster. It creates objects
//     through a dynamic client with a bounded pool of workers it starts and
//     waits for; nothing outlives the call.
package fleet
