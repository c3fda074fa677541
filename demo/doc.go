// Package demo assembles what `deployd demo` runs instead of a cluster and
// an identity provider: a simulated fleet in an in-process fake API server
// (demo/sim, over the fleet package) and a demo identity provider (demo/idp). The
// server itself is wired by the caller: deployd's watcher reads
// Env.Cluster through cluster.NewWatcherForClients, the same code path as a
// real cluster, and its sign-in is configured with Env.IdP.AuthConfig.
//
// Nothing here is reachable from `deployd serve`: only the demo command
// imports this package, and no package of deployd's server imports it.
//
// Goroutines: Start starts the identity provider's (see demo/idp); Run
// ticks the simulator until its context ends; Close stops the identity
// provider. Env holds no other goroutine.
package demo
