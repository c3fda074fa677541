// Package handlers is deployd's HTTP surface: the Echo v4 routes of the
// /v1/deploy (Argo CD dialect and native) and /v1/paas contracts, their
// middleware, and one central error handler. The Argo CD dialect is also
// served at Argo CD's own paths (/api/v1, /api/version, /auth/…), mounted
// from the same table (argoroutes.go) so the two cannot drift.
//
// Files: argo*.go hold what only Argo CD's API has (settings, version,
// clusters, projects, a resource, its events, logs, diff and actions, and
// Argo CD's write bodies); applications.go, streams.go, query.go and
// gzlist.go the lists and streams both dialects serve; native.go deployd's
// own tree and resource routes; writes.go mounts the writes (audit.go,
// rollback.go, write_patch.go, writeback.go, paas_deploy.go); engine.go,
// engine_routes.go, webhook.go, gitops.go, githistory.go and leader.go the
// engine's; paas*.go the drift board; session.go and authn.go sign-in;
// health.go, middleware.go, requeststate.go, routing.go, cache.go,
// position.go, sse.go and errors.go what every route shares. The contracts they keep are
// ARCHITECTURE.md's Tenancy and Positions.
//
// Invariants:
//   - Handlers compute no domain state. They read the current immutable
//     projection.Snapshot, a stream subscription, or ask the cluster through the
//     small interfaces declared here (implemented by package cluster); they never
//     import client-go.
//   - Every read is filtered by the caller's auth.Scope, derived in one place
//     from a validated token; another tenant's app is answered exactly like a
//     missing one. Every write is SuperAdmin-only and checked before anything
//     else is looked up — but for the git webhook, which has no principal: it
//     authenticates by the HMAC-SHA256 of its body, and at most queues an
//     engine run.
//   - Every error reaches the client as {"error","message","code"} with a safe
//     message; causes (Kubernetes, identity provider) go to the log only.
//   - Tokens and cookies never appear in a log line.
//   - The router matches the escaped path, and every path parameter is
//     percent-decoded exactly once, in one middleware, before any handler
//     reads it.
//   - An unrouted path under /v1/ or /api/ is a JSON 404 (a 405 with Allow
//     when another method is routed there), worked out from the router
//     itself; only other paths fall back to the page.
//   - Every answer carries Cache-Control: no-store (ETags are kept).
//   - The middleware chain and each route's middleware are composed once, in
//     New (Echo v4 would compose them again on every request), and what the
//     chain adds to a request is one value, which is the request's context
//     (requestState): a signed-in GET allocates at most 1 KB before its
//     handler runs (TestMiddlewareChainBudget).
//   - The drift board joins release facts on its read side: Deps.Releases
//     reads the release source's cache (never a registry or a forge), and
//     the board's answers are versioned by the snapshot's revision and the
//     release source's generation, so a cached or 304 answer is never older
//     than either. GET /v1/paas/stream/apps re-reads the board when either
//     moves and sends the rows whose view changed (paas_stream.go).
//   - Routes that name one object of an app (resource, actions, events,
//     managed-resources) find it in the app's tree only, and only for kinds
//     deployd reads: no query reaches a Secret or another app's object.
//   - The engine runs on one replica (the holder of its Lease). Reconcile,
//     the git webhook, suspend and resume, and a managed App's rollback or
//     release that reach another replica are forwarded to it, once
//     (leader.go): its answer is the answer. The forwarding replica has
//     checked the caller (the webhook's signature) first; the forward goes
//     only to a peer (Deps.Peers), carries no credential of the caller but
//     a signed assertion of who the caller is, and the leader checks the
//     assertion and then the caller again. An App is managed when it
//     carries the engine's tracking label.
package handlers
