// Package load holds deployd's load harness: the side-by-side benchmark
// (make bench-compare: deployd beside the API server and beside a bare
// handler writing the same bytes, on one fleet, in one run) and the fault
// scenarios (make chaos: kill -9, reconnect storms, API server restarts and
// etcd compaction, slow clients and bad input under load). Both run the
// built binary against a real kube-apiserver + etcd (cluster/clustertest)
// loaded with fleet, and measure the processes from /proc.
//
// Everything here is in _test.go files: the package has no code of its own
// that ships. make test runs a short smoke of each so they cannot rot;
// the full runs are make targets of their own. The test binary is also the
// program of a limit that must be its own process (TestMain runs it when
// DEPLOYD_LOAD_ROLE names it), so /proc reads its CPU apart from the
// harness's clients.
package load
