package clustertest

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Static token users every cluster has.
const (
	// AdminUser is in group system:masters: every request is allowed.
	AdminUser = "admin"
	// DeploydUser (group "deployd") has no permissions until a test binds a
	// role to it; UserConfig(DeploydUser) is how a test checks least privilege.
	DeploydUser = "deployd"
)

// startBudget bounds each wait for a component to become ready. A start
// normally takes 2-4 s; the rest is headroom for a loaded machine.
const startBudget = 60 * time.Second

// Option changes what Start starts.
type Option func(*options)

type options struct {
	controllers bool
	withoutCRDs []string
	users       []user
	podStatus   PodStatusFunc
	snapshot    *snapshotOption
	auditLog    bool
}

// WithControllers also starts kube-controller-manager, kube-scheduler, the
// fake Ready node and the fake kubelet (see StartControllers).
func WithControllers() Option { return func(o *options) { o.controllers = true } }

// WithoutCRDs leaves the named CRDs (e.g. "applications.apps.hanzo.ai") out
// of the install; a test can install one later with InstallCRD.
func WithoutCRDs(names ...string) Option {
	return func(o *options) { o.withoutCRDs = append(o.withoutCRDs, names...) }
}

// WithUser adds a static token user with the given groups; UserConfig(name)
// then returns a rest.Config that authenticates as it.
func WithUser(name string, groups ...string) Option {
	return func(o *options) { o.users = append(o.users, user{name: name, groups: groups}) }
}

// WithPodStatus replaces the fake kubelet's DefaultPodStatus.
func WithPodStatus(f PodStatusFunc) Option { return func(o *options) { o.podStatus = f } }

// Cluster is a running control plane owned by one test (see the package
// documentation for who owns what and how it is cleaned up).
type Cluster struct {
	// Config authenticates as AdminUser (group system:masters) and trusts
	// the cluster's CA. Copy it (rest.CopyConfig) before changing it.
	Config *rest.Config
	// Kubeconfig is a kubeconfig file for AdminUser.
	Kubeconfig string
	// Dir holds every file of the cluster: data, keys, logs. It is removed
	// when the test ends.
	Dir string

	opts      options
	pki       *pki
	users     map[string]user
	crds      map[string]*unstructured.Unstructured
	etcd      *etcd
	apiserver *apiserver
	clientset *kubernetes.Clientset
	dynamic   *dynamic.DynamicClient
	mapper    *restmapper.DeferredDiscoveryRESTMapper

	mu          sync.Mutex
	procs       []*process // in start order, stopped in reverse
	stops       []func()   // in-process goroutines (the fake kubelet), stopped first
	controllers bool
}

// Start runs etcd and kube-apiserver from ToolsDir() on free loopback ports,
// installs every CRD of deploy/crds (but those left out by WithoutCRDs) and
// waits until each is Established. Without the binaries it skips the test,
// or fails it when DEPLOYD_REQUIRE_TOOLS=1. Everything started is stopped and
// removed by t.Cleanup, also when the test fails or panics.
func Start(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	apiBin := binary(t, "kube-apiserver")
	etcdBin := binary(t, "etcd")
	if o.controllers {
		binary(t, "kube-controller-manager")
		binary(t, "kube-scheduler")
	}
	crds := loadCRDs(t)
	for _, name := range o.withoutCRDs {
		if _, ok := crds[name]; !ok {
			t.Fatalf("WithoutCRDs(%q): no such CRD in %s (have %v)", name, CRDDir(t), sortedKeys(crds))
		}
	}

	var snap *snapshotPlan
	if o.snapshot != nil {
		if len(o.withoutCRDs) > 0 {
			t.Fatalf("WithoutCRDs(%v) with a snapshot: a snapshot holds every CRD; install them later with InstallCRD instead of leaving them out", o.withoutCRDs)
		}
		snap = planSnapshot(t, o.snapshot)
	}

	began := time.Now()
	c := &Cluster{Dir: t.TempDir(), opts: o, crds: crds, users: map[string]user{}}
	t.Cleanup(func() { c.shutdown(t) })

	var err error
	if c.pki, err = newPKI(c.Dir); err != nil {
		t.Fatalf("cluster keys: %v", err)
	}
	users := append([]user{
		{name: AdminUser, groups: []string{"system:masters"}},
		{name: DeploydUser, groups: []string{"deployd"}},
	}, o.users...)
	for i := range users {
		if _, dup := c.users[users[i].name]; dup {
			t.Fatalf("user %q defined twice", users[i].name)
		}
		users[i].token = randomToken()
		c.users[users[i].name] = users[i]
	}
	tokenFile := filepath.Join(c.Dir, "tokens.csv")
	if err := writeTokenFile(tokenFile, users); err != nil {
		t.Fatalf("token file: %v", err)
	}

	var from string
	if snap != nil && snap.seed != "" {
		copied, err := copyTree(snap.seed, filepath.Join(c.Dir, "etcd"), false)
		if err != nil {
			t.Fatalf("snapshot %s: copy etcd data: %v", snap.key, err)
		}
		from = fmt.Sprintf(", from snapshot %s (%s in %d files copied by %s in %v)", snap.key, mib(copied.bytes),
			copied.files, copied.method, time.Since(began).Round(time.Millisecond))
	}
	c.etcd, err = startEtcd(etcdBin, c.Dir, from == "", startBudget)
	if c.etcd != nil {
		c.own(c.etcd.proc)
	}
	if err != nil {
		t.Fatal(err)
	}
	etcdReady := time.Now()

	var install []string
	for _, name := range sortedKeys(crds) {
		if !slices.Contains(o.withoutCRDs, name) {
			install = append(install, name)
		}
	}
	var apiArgs []string
	if o.auditLog {
		if apiArgs, err = auditArgs(c.Dir); err != nil {
			t.Fatal(err)
		}
	}
	c.apiserver, err = startAPIServer(apiBin, c.Dir, c.etcd.url, c.pki, tokenFile, c.users[AdminUser].token,
		apiArgs, startBudget, c.createCRDsEarly(t.Context(), install))
	if c.apiserver != nil {
		c.own(c.apiserver.proc)
	}
	if err != nil {
		t.Fatal(err)
	}
	apiReady := time.Now()

	c.Config = c.restConfig(c.users[AdminUser].token)
	if c.clientset, err = kubernetes.NewForConfig(c.Config); err != nil {
		t.Fatalf("clientset: %v", err)
	}
	if c.dynamic, err = dynamic.NewForConfig(c.Config); err != nil {
		t.Fatalf("dynamic client: %v", err)
	}
	c.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.clientset.Discovery()))
	c.Kubeconfig = c.writeKubeconfig(t, AdminUser)

	c.InstallCRD(t, install...)
	crdsReady := time.Now()

	if snap != nil && snap.seed == "" {
		c.loadAndSave(t, snap, o.snapshot.load)
	}
	if o.controllers {
		c.StartControllers(t)
	}
	t.Logf("cluster ready in %v (etcd %v, kube-apiserver %v, %d CRDs %v) at %s%s",
		time.Since(began).Round(time.Millisecond), etcdReady.Sub(began).Round(time.Millisecond),
		apiReady.Sub(etcdReady).Round(time.Millisecond), len(install),
		crdsReady.Sub(apiReady).Round(time.Millisecond), c.apiserver.url, from)
	return c
}

// own registers a started process for shutdown.
func (c *Cluster) own(p *process) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.procs = append(c.procs, p)
}

// shutdown stops in-process goroutines, then every process (newest first),
// and prints the tail of each log when the test failed.
func (c *Cluster) shutdown(t testing.TB) {
	c.mu.Lock()
	stops, procs := c.stops, c.procs
	c.stops, c.procs = nil, nil
	c.mu.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop(syscall.SIGKILL, 5*time.Second)
	}
	if t.Failed() {
		for _, p := range procs {
			t.Logf("--- %s log (%s), last lines:\n%s", p.name, p.logPath, p.tail(40))
		}
	}
}

// PIDs are the process ids of the binaries this cluster runs, by name
// ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler").
func (c *Cluster) PIDs() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]int, len(c.procs))
	for _, p := range c.procs {
		m[p.name] = p.pid()
	}
	return m
}

// URL is the API server's address, https://127.0.0.1:PORT; it does not
// change when the API server restarts.
func (c *Cluster) URL() string { return c.apiserver.url }

// CAData is the PEM of the CA that signed the API server's certificate.
func (c *Cluster) CAData() []byte { return slices.Clone(c.pki.caPEM) }

// Clientset is a typed client as AdminUser.
func (c *Cluster) Clientset() kubernetes.Interface { return c.clientset }

// Dynamic is a dynamic client as AdminUser.
func (c *Cluster) Dynamic() dynamic.Interface { return c.dynamic }

// UserConfig returns a rest.Config that authenticates as the named static
// user (AdminUser, DeploydUser or one added with WithUser). It panics for
// an unknown name, which is a mistake in the test.
func (c *Cluster) UserConfig(name string) *rest.Config {
	u, ok := c.users[name]
	if !ok {
		panic(fmt.Sprintf("clustertest: no user %q (have %v)", name, sortedKeys(c.users)))
	}
	return c.restConfig(u.token)
}

// UserKubeconfig writes a kubeconfig file for the named static user and
// returns its path (for a binary run by the test).
func (c *Cluster) UserKubeconfig(t testing.TB, name string) string {
	t.Helper()
	if _, ok := c.users[name]; !ok {
		t.Fatalf("no user %q (have %v)", name, sortedKeys(c.users))
	}
	return c.writeKubeconfig(t, name)
}

func (c *Cluster) restConfig(token string) *rest.Config {
	return &rest.Config{
		Host:            c.apiserver.url,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: slices.Clone(c.pki.caPEM)},
		UserAgent:       "clustertest",
		QPS:             500,
		Burst:           1000,
	}
}

func (c *Cluster) writeKubeconfig(t testing.TB, name string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["clustertest"] = &clientcmdapi.Cluster{Server: c.apiserver.url, CertificateAuthorityData: c.pki.caPEM}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: c.users[name].token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "clustertest", AuthInfo: name, Namespace: "default"}
	cfg.CurrentContext = name
	path := filepath.Join(c.Dir, "kubeconfig-"+name)
	if name == AdminUser {
		path = filepath.Join(c.Dir, "kubeconfig")
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	return path
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
