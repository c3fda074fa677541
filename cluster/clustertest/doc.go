// Package clustertest runs a real Kubernetes control plane for tests: etcd
// and kube-apiserver (and, on request, kube-controller-manager,
// kube-scheduler and a fake kubelet) built from source by
// hack/build-tools.sh, with deployd's CRDs from deploy/crds installed.
//
//	c := clustertest.Start(t)                                // etcd + kube-apiserver + CRDs, ~4 s
//	c := clustertest.Start(t, clustertest.WithControllers()) // + Deployments really roll out, ~5 s
//	c.Apply(t, clustertest.Object(t, appYAML))
//	c.WaitFor(t, 10*time.Second, func() (bool, error) { ... })
//
// Start returns a cluster that is fully usable: /readyz answers 200, every
// installed CRD is Established, its storage is built (the first list does
// not wait on a 429), and the API server's 2 s hold on creates of a freshly
// Established kind has passed, so a test's first request is as fast as any.
//
// # Binaries
//
// They are taken from ToolsDir() ($DEPLOYD_TOOLS, else ~/.cache/deployd/tools).
// When one is missing the test is skipped with a message naming make test;
// with DEPLOYD_REQUIRE_TOOLS=1 (set by make test) it fails instead, naming the
// path and make tools, so CI never passes by skipping.
//
// # Ownership and cleanup
//
// A Cluster belongs to the test that started it; subtests may share it.
// Every process it runs is a child of the test binary in its own process
// group, with its stdout and stderr in Dir/<name>.log (appended across
// restarts). Start registers one t.Cleanup that, when the test ends (passed,
// failed, or panicked), stops the in-process goroutines (the fake kubelet)
// and waits for them, then kills each process group (newest first) and
// reaps it; t.TempDir removes Dir afterwards. When the test failed, the tail
// of every log is printed with t.Log. Should the test binary itself die (a
// timeout, a crash in another goroutine) the children die with it
// (Pdeathsig), so no etcd or kube-apiserver outlives a test run. Client
// connections of Config close when the server goes away; after cleanup a
// goleak check passes (goleak's default retries cover the last of them).
// A test that starts its own informers or watches stops them itself.
//
// # Network and identities
//
// Everything listens on 127.0.0.1 on ports picked free at start; a port
// lost to a race before the bind is detected from the log ("address already
// in use") and the start is retried on fresh ports. kube-apiserver keeps its
// port across RestartAPIServer, which stops it with SIGTERM (open watches
// are ended within a second), starts it again with the same etcd and keys,
// and returns once it is ready and the CRDs are served again; clients and
// the controllers reconnect by themselves. Its serving certificate is signed by a CA
// generated per cluster (CAData), so clients verify TLS. Authentication is
// by static tokens: AdminUser is in system:masters (Config, Kubeconfig);
// DeploydUser is in group "deployd" and, with --authorization-mode=Node,RBAC,
// may do nothing until a test binds a role to it, which is how least
// privilege is checked (UserConfig, UserKubeconfig). WithUser adds more.
// The ServiceAccount admission plugin is off, so pods can be created in a
// fresh namespace without a controller; service-account tokens can still
// be issued with the generated signing key.
//
// # Audit log
//
// WithAuditLog has kube-apiserver keep an audit log, Dir/audit.log (JSON
// lines, policy in Dir/audit-policy.yaml): one event at level Metadata for
// each create, update, patch, delete and deletecollection once its
// response is complete, none for reads and watches. The log is written in
// blocking mode, each event before its response is sent, so a write is in
// it as soon as the call returns. AuditEvents parses the whole log into
// verb, user, user agent, object, status code and timestamps; a test tells
// its clients apart by rest.Config.UserAgent. The API server's own writes
// and the harness's are in it too. The log is never rotated, and
// RestartAPIServer appends to it with the same flags.
//
// # Controllers and the fake kubelet
//
// WithControllers (or StartControllers) runs kube-controller-manager with
// every controller except node-lifecycle, and kube-scheduler, both as
// AdminUser with leader election off; it registers NodeName as a Ready node
// and runs a fake kubelet in the test binary. The kubelet watches pods bound
// to NodeName and writes their status through the status subresource, as
// PodStatusFunc decides (DefaultPodStatus unless WithPodStatus): by default
// Running and Ready with container statuses built from the pod spec (image =
// the spec's image), and by image tag suffix
//
//	-crash    CrashLoopBackOff, restarts > 0, not Ready
//	-badpull  ImagePullBackOff, Pending, not Ready
//	-unready  Running, not Ready
//	-pending  left Pending
//
// It also completes deletions (grace period 0), as a kubelet confirms a pod
// is gone, so rollouts and namespace deletion finish. It never runs
// anything; its log server (TLS at 127.0.0.1, the node's address and
// kubelet port) answers pods/log through the API server with a few lines
// naming the pod, container and image, and with follow one more a second.
//
// # etcd
//
// EtcdURL is etcd's client URL (no TLS, no authentication). CompactEtcd
// compacts to the current revision through etcd's JSON gateway (no etcd
// client library). The API server's watch cache hides a compaction until
// the API server restarts; after CompactEtcd and RestartAPIServer, a watch
// or list from an older resourceVersion gets 410 Gone. RestartAPIServer
// alone already makes a watch from before the restart 410 (Expired).
//
// # Snapshots
//
// WithSnapshot(key, load) starts a cluster from a cached copy of etcd's
// data, so a large fixture is loaded once and not by every run:
//
//	c := clustertest.Start(b, clustertest.FleetSnapshot(10000, 10)) // ~181,000 objects
//
// A snapshot is SnapshotDir()/<key>: etcd/ (a data folder) and
// snapshot.json. The first run with a key takes the key's lock
// (SnapshotDir()/.locks/<key>, an flock, released if the run dies), starts
// an empty cluster, calls load, then saves: etcd is compacted and
// defragmented, stopped with SIGTERM (a clean stop leaves a consistent data
// folder), copied to SnapshotDir()/.tmp/ and flushed, and the copy is renamed
// to <key>, which publishes it whole. etcd is then started again on the same
// ports with the same data; the running API server reconnects by itself,
// and Start waits until a list goes through before it returns. A run that
// finds the lock taken waits for it and starts from the snapshot, so
// concurrent first runs load once. A load that fails the test or panics
// saves nothing; a .tmp folder left by a run killed while saving is never
// read, and is removed by the next run that loads the key.
//
// Every later run copies etcd/ into its own Dir and starts etcd on fresh
// ports; the member keeps its identity (its recorded peer URL is stale,
// which a single member never dials). The copy is a reflink where the
// filesystem has them, else a full copy in the kernel (copy_file_range);
// never a hard link, as etcd writes its database and WAL in place. A run
// may change, compact or kill anything: the cache is never written to. The
// API server's keys and tokens are new in each run; nothing stored depends
// on them (service-account tokens are signed on request with the run's
// key). The CRDs are already in the copy, Established; Start updates them
// to deploy/crds. The key is a snapshot's only identity: it must change
// when what load creates does (FleetSnapshotKey hashes what the generator
// renders and deploy/crds); remove a folder under SnapshotDir to load it
// again.
//
// # Helpers
//
// Object parses a manifest. Apply creates or updates objects through the
// dynamic client (and writes a given status through the status
// subresource, as the operator or a controller would); Delete deletes;
// Resource maps a kind to its dynamic client; WaitFor polls a condition
// with a deadline (no test sleeps for a fixed time). InstallCRD and
// DeleteCRD add and remove CRDs while the cluster runs, and WithoutCRDs
// leaves some out at start, for tests of optional kinds. PIDs and Dir are
// there for tests of the harness itself.
package clustertest
