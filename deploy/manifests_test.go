package deploy_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/cluster/clustertest"
)

const (
	namespace     = "deployd"
	healthPath    = "/v1/deploy/health"
	containerPort = 8080
	metricsPort   = 9090
	nonRootUID    = 65532
	fieldManager  = "deployd-test"
)

// TestKustomizationListsEveryManifest: kubectl apply -k deploy/ installs
// every manifest of the folder, and nothing else.
func TestKustomizationListsEveryManifest(t *testing.T) {
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
		Images     []any    `json:"images,omitempty"`
	}
	readYAML(t, "kustomization.yaml", &k)
	if k.Kind != "Kustomization" || !strings.HasPrefix(k.APIVersion, "kustomize.config.k8s.io/") {
		t.Fatalf("kustomization.yaml is %s %s, want a kustomize.config.k8s.io Kustomization", k.APIVersion, k.Kind)
	}
	got := slices.Sorted(slices.Values(k.Resources))
	if want := manifestFiles(t); !slices.Equal(got, want) {
		t.Errorf("kustomization.yaml resources = %v, want every manifest of deploy/: %v", got, want)
	}
}

// warnings collects the API server's warning headers (deprecations, Pod
// Security violations of the namespace's warn level).
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.msgs
	w.msgs = nil
	return m
}

// applier server-side applies objects through the dynamic client, with the
// warnings of each request collected.
type applier struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	warn   *warnings
}

func newApplier(t *testing.T, c *clustertest.Cluster) *applier {
	t.Helper()
	cfg := rest.CopyConfig(c.Config)
	w := &warnings{}
	cfg.WarningHandler = w
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)), warn: w}
}

func (a *applier) resource(t *testing.T, u *unstructured.Unstructured) dynamic.ResourceInterface {
	t.Helper()
	gvk := u.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatalf("%s: %v", describe(u), err)
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		if u.GetNamespace() != "" {
			t.Fatalf("%s: a cluster-scoped kind with a namespace", describe(u))
		}
		return a.dyn.Resource(m.Resource)
	}
	if u.GetNamespace() == "" {
		t.Fatalf("%s: a namespaced object must name its namespace", describe(u))
	}
	return a.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
}

// apply server-side applies u (status excluded, as kubectl does), dry-run
// when asked, and returns the warnings the request drew.
func (a *applier) apply(t *testing.T, u *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, []string) {
	t.Helper()
	obj := u.DeepCopy()
	delete(obj.Object, "status")
	data, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	opts := metav1.PatchOptions{FieldManager: fieldManager}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	a.warn.take()
	got, err := a.resource(t, u).Patch(t.Context(), u.GetName(), types.ApplyPatchType, data, opts)
	if err != nil {
		t.Fatalf("server-side apply of %s (dry-run %v): %v", describe(u), dryRun, err)
	}
	return got, a.warn.take()
}

// TestManifestsAcceptedByAPIServer server-side applies every object of every
// manifest of deploy/ to a real kube-apiserver (the harness has installed
// deploy/crds), as a dry run: the namespace is created for real first, since
// a dry run of namespaced objects needs it to exist. The namespace enforces
// and warns at the restricted Pod Security level, so a Deployment whose pod
// template breaks it draws a warning, which fails the test.
func TestManifestsAcceptedByAPIServer(t *testing.T) {
	c := clustertest.Start(t)
	a := newApplier(t, c)

	var all []*unstructured.Unstructured
	var ns *unstructured.Unstructured
	for _, f := range manifestFiles(t) {
		for _, u := range readObjects(t, f) {
			all = append(all, u)
			if u.GetKind() == "Namespace" {
				ns = u
			}
		}
	}
	if ns == nil || ns.GetName() != namespace {
		t.Fatalf("deploy/ has no Namespace %s", namespace)
	}
	if _, w := a.apply(t, ns, false); len(w) > 0 {
		t.Errorf("creating %s drew warnings: %q", describe(ns), w)
	}

	kinds := map[string]int{}
	for _, u := range all {
		got, w := a.apply(t, u, true)
		if len(w) > 0 {
			t.Errorf("%s drew warnings: %q", describe(u), w)
		}
		if got.GetName() != u.GetName() || got.GetKind() != u.GetKind() {
			t.Errorf("dry-run apply of %s answered %s", describe(u), describe(got))
		}
		kinds[u.GetKind()]++
	}
	for _, k := range []string{"CustomResourceDefinition", "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment", "Service", "PodDisruptionBudget"} {
		if kinds[k] == 0 {
			t.Errorf("deploy/ has no %s (have %v)", k, kinds)
		}
	}

	// The warning channel works: the same Deployment with privilege
	// escalation allowed draws a Pod Security warning.
	for _, u := range all {
		if u.GetKind() != "Deployment" {
			continue
		}
		bad := u.DeepCopy()
		containers, _, _ := unstructured.NestedSlice(bad.Object, "spec", "template", "spec", "containers")
		sc := containers[0].(map[string]any)["securityContext"].(map[string]any)
		sc["allowPrivilegeEscalation"] = true
		if err := unstructured.SetNestedSlice(bad.Object, containers, "spec", "template", "spec", "containers"); err != nil {
			t.Fatal(err)
		}
		if _, w := a.apply(t, bad, true); !slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, "allowPrivilegeEscalation") }) {
			t.Errorf("a Deployment allowing privilege escalation drew warnings %q, want a Pod Security warning naming allowPrivilegeEscalation", w)
		}
	}
}

// deployment reads deploy/deployment.yaml strictly (an unknown field, such
// as a misspelled one, fails).
func deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	readYAML(t, "deployment.yaml", &d)
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("deployment.yaml has %d containers, want 1", len(d.Spec.Template.Spec.Containers))
	}
	return &d
}

// TestDeploymentHardening: the pod runs as the non-root distroless user
// with a read-only root, no privilege escalation, no capabilities and the
// runtime's seccomp profile, as the deployd ServiceAccount.
func TestDeploymentHardening(t *testing.T) {
	d := deployment(t)
	if d.Namespace != namespace || d.Name != "deployd" {
		t.Errorf("Deployment is %s/%s, want %s/deployd", d.Namespace, d.Name, namespace)
	}
	pod := d.Spec.Template.Spec
	if pod.ServiceAccountName != "deployd" {
		t.Errorf("serviceAccountName = %q, want deployd (deploy/rbac.yaml)", pod.ServiceAccountName)
	}
	if pod.AutomountServiceAccountToken != nil && !*pod.AutomountServiceAccountToken {
		t.Error("automountServiceAccountToken is false: deployd reads the cluster with its ServiceAccount token")
	}
	ctr := pod.Containers[0]
	if !regexp.MustCompile(`^ghcr\.io/hanzoai/deployd:v\d+\.\d+\.\d+$`).MatchString(ctr.Image) {
		t.Errorf("image = %q, want a pinned ghcr.io/hanzoai/deployd:vX.Y.Z", ctr.Image)
	}

	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	sc := ctr.SecurityContext
	if sc == nil {
		t.Fatal("the container has no securityContext")
	}
	// The container's settings win over the pod's; both are checked as
	// the kubelet would combine them.
	runAsNonRoot := firstBool(sc.RunAsNonRoot, psc.RunAsNonRoot)
	runAsUser := firstInt(sc.RunAsUser, psc.RunAsUser)
	seccomp := sc.SeccompProfile
	if seccomp == nil {
		seccomp = psc.SeccompProfile
	}
	checks := []struct {
		what string
		ok   bool
	}{
		{"runAsNonRoot true", runAsNonRoot != nil && *runAsNonRoot},
		{fmt.Sprintf("runAsUser %d", nonRootUID), runAsUser != nil && *runAsUser == nonRootUID},
		{"readOnlyRootFilesystem true", sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem},
		{"allowPrivilegeEscalation false", sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation},
		{"not privileged", sc.Privileged == nil || !*sc.Privileged},
		{"capabilities drop ALL, add none", sc.Capabilities != nil && slices.Contains(sc.Capabilities.Drop, "ALL") && len(sc.Capabilities.Add) == 0},
		{"seccompProfile RuntimeDefault", seccomp != nil && seccomp.Type == corev1.SeccompProfileTypeRuntimeDefault},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("container securityContext: want %s", c.what)
		}
	}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			t.Errorf("volume %q is a hostPath", v.Name)
		}
	}

	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := ctr.Resources.Requests[r]; !ok {
			t.Errorf("no %s request", r)
		}
		if _, ok := ctr.Resources.Limits[r]; !ok {
			t.Errorf("no %s limit", r)
		}
	}
	if len(ctr.Ports) != 2 || ctr.Ports[0].ContainerPort != containerPort || ctr.Ports[0].Name != "http" ||
		ctr.Ports[1].ContainerPort != metricsPort || ctr.Ports[1].Name != "metrics" {
		t.Errorf("ports = %+v, want http on %d and metrics on %d", ctr.Ports, containerPort, metricsPort)
	}
}

// TestDeploymentProbes: readiness follows /v1/deploy/health (503 while
// degraded takes the pod out of the Service); liveness checks only that the
// process serves (a TCP connect), so a cluster that is briefly unreachable,
// or a missing CRD, never gets the pod killed.
func TestDeploymentProbes(t *testing.T) {
	ctr := deployment(t).Spec.Template.Spec.Containers[0]
	port := func(p intstr.IntOrString) int32 {
		if p.Type == intstr.Int {
			return p.IntVal
		}
		for _, cp := range ctr.Ports {
			if cp.Name == p.StrVal {
				return cp.ContainerPort
			}
		}
		t.Errorf("probe names port %q, which the container does not declare", p.StrVal)
		return 0
	}

	r := ctr.ReadinessProbe
	if r == nil || r.HTTPGet == nil {
		t.Fatal("no HTTP readiness probe")
	}
	if r.HTTPGet.Path != healthPath || port(r.HTTPGet.Port) != containerPort {
		t.Errorf("readiness probe GET %s on %d, want %s on %d", r.HTTPGet.Path, port(r.HTTPGet.Port), healthPath, containerPort)
	}

	l := ctr.LivenessProbe
	if l == nil {
		t.Fatal("no liveness probe")
	}
	if l.TCPSocket == nil || port(l.TCPSocket.Port) != containerPort {
		t.Errorf("liveness probe = %+v, want a TCP check of port %d (it must not depend on the cluster, as %s does)", l.ProbeHandler, containerPort, healthPath)
	}
	if l.HTTPGet != nil && l.HTTPGet.Path == healthPath {
		t.Errorf("liveness probe GETs %s, which is 503 whenever the cluster is unreachable", healthPath)
	}
	if s := ctr.StartupProbe; s != nil && s.HTTPGet != nil && s.HTTPGet.Path == healthPath {
		t.Errorf("startup probe GETs %s: a pod would be killed while the cluster is unreachable at start", healthPath)
	}
}

// TestDeploymentEnv: every variable set is one deployd reads; the cookie key
// and client secret come from the Secret, never as literals; the literal
// values make a valid sign-in configuration.
func TestDeploymentEnv(t *testing.T) {
	ctr := deployment(t).Spec.Template.Spec.Containers[0]
	known := deploydEnv(t)
	literal := map[string]string{}
	fromSecret := map[string]*corev1.SecretKeySelector{}
	for _, e := range ctr.Env {
		if !known[e.Name] {
			t.Errorf("env %s is not read by deployd (cmd/deployd, auth) nor the runtime %v", e.Name, runtimeEnv)
		}
		if _, dup := literal[e.Name]; dup {
			t.Errorf("env %s is set twice", e.Name)
		}
		literal[e.Name] = e.Value
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			fromSecret[e.Name] = e.ValueFrom.SecretKeyRef
		}
	}
	for _, name := range []string{"DEPLOYD_LISTEN", "DEPLOY_NAMESPACES", "DEPLOY_PUBLIC_URL", "IAM_ENDPOINT",
		"DEPLOY_IAM_CLIENT_ID", "DEPLOY_IAM_CLIENT_SECRET", "DEPLOY_COOKIE_KEY", "IAM_ADMIN_ORG", "IAM_ORG_CLAIM",
		"IAM_ORG_ADMIN_CLAIM", "IAM_ORG_GROUP_PREFIX", "LOG_LEVEL", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if _, ok := literal[name]; !ok {
			t.Errorf("env %s is not set", name)
		}
	}
	for name, optional := range map[string]bool{"DEPLOY_COOKIE_KEY": false, "DEPLOY_IAM_CLIENT_SECRET": true} {
		ref := fromSecret[name]
		switch {
		case ref == nil:
			t.Errorf("env %s must come from the Secret deployd (secretKeyRef), not a literal", name)
		case ref.Name != "deployd":
			t.Errorf("env %s comes from Secret %q, want deployd", name, ref.Name)
		case (ref.Optional != nil && *ref.Optional) != optional:
			t.Errorf("env %s: optional = %v, want %v", name, ref.Optional != nil && *ref.Optional, optional)
		}
		delete(literal, name)
	}
	if got := literal["DEPLOYD_METRICS_LISTEN"]; got != fmt.Sprintf(":%d", metricsPort) {
		t.Errorf("DEPLOYD_METRICS_LISTEN = %q, want :%d (the metrics container port)", got, metricsPort)
	}
	if got := literal["DEPLOYD_LISTEN"]; got != fmt.Sprintf(":%d", containerPort) {
		t.Errorf("DEPLOYD_LISTEN = %q, want :%d (the container port)", got, containerPort)
	}
	cfg, err := auth.ConfigFromEnv(func(k string) string { return literal[k] })
	if err != nil {
		t.Fatalf("the Deployment's sign-in settings are rejected: %v", err)
	}
	if !strings.HasPrefix(cfg.PublicURL, "https://") || !strings.HasPrefix(cfg.Issuer, "https://") {
		t.Errorf("public URL %q and issuer %q must be https in a cluster", cfg.PublicURL, cfg.Issuer)
	}
}

// TestService: ClusterIP, port 80 to the container's http port and 9090 to
// its metrics port, with the scrape annotations, selecting exactly the
// Deployment's pods.
func TestService(t *testing.T) {
	var s corev1.Service
	readYAML(t, "service.yaml", &s)
	d := deployment(t)
	if s.Namespace != namespace || s.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("Service %s/%s of type %q, want ClusterIP in %s", s.Namespace, s.Name, s.Spec.Type, namespace)
	}
	if len(s.Spec.Ports) != 2 || s.Spec.Ports[0].Port != 80 ||
		(s.Spec.Ports[0].TargetPort != intstr.FromString("http") && s.Spec.Ports[0].TargetPort != intstr.FromInt32(containerPort)) ||
		s.Spec.Ports[1].Port != metricsPort || s.Spec.Ports[1].TargetPort != intstr.FromString("metrics") {
		t.Errorf("Service ports = %+v, want 80 → http (%d) and %d → metrics", s.Spec.Ports, containerPort, metricsPort)
	}
	for k, v := range map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": fmt.Sprint(metricsPort), "prometheus.io/path": "/metrics"} {
		if got := s.Annotations[k]; got != v {
			t.Errorf("Service annotation %s = %q, want %q", k, got, v)
		}
	}
	for k, v := range s.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("Service selects %s=%s, which the Deployment's pods do not carry", k, v)
		}
	}
	if len(s.Spec.Selector) == 0 {
		t.Error("Service has no selector")
	}
	sel, err := metav1.LabelSelectorAsMap(d.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range sel {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("Deployment selector %s=%s does not match its own pod template", k, v)
		}
	}
}

// TestDeploymentSurvivesUpgrades: two replicas or more, spread over nodes
// (softly: a one-node cluster still schedules them); a rolling update that
// starts the new pod before stopping an old one; and a grace period that
// covers the shutdown's drain (cmd/deployd/shutdown.go, whose durations
// are read from its source, with the Deployment's own DEPLOYD_DRAIN_*
// values when it sets them).
func TestDeploymentSurvivesUpgrades(t *testing.T) {
	d := deployment(t)
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Errorf("replicas = %v, want 2 or more: one replica is down during every upgrade", d.Spec.Replicas)
	}
	ru := d.Spec.Strategy.RollingUpdate
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil ||
		ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 || ru.MaxSurge == nil || ru.MaxSurge.IntValue() < 1 {
		t.Errorf("strategy = %+v, want RollingUpdate with maxUnavailable 0 and maxSurge 1", d.Spec.Strategy)
	}

	pod := d.Spec.Template.Spec
	spread := false
	for _, c := range pod.TopologySpreadConstraints {
		if c.TopologyKey != corev1.LabelHostname {
			continue
		}
		if c.WhenUnsatisfiable != corev1.ScheduleAnyway {
			t.Errorf("the spread over %s is %s, want ScheduleAnyway: a one-node cluster must still schedule every replica", c.TopologyKey, c.WhenUnsatisfiable)
		}
		if !selects(t, c.LabelSelector, d.Spec.Template.Labels) {
			t.Errorf("the spread over %s selects %v, not the Deployment's pods", c.TopologyKey, c.LabelSelector)
		}
		spread = true
	}
	if !spread {
		t.Errorf("no topologySpreadConstraints over %s: both replicas may land on one node", corev1.LabelHostname)
	}

	durations := goDurations(t, filepath.Join(repoRoot, "cmd/deployd/shutdown.go"))
	need := map[string]time.Duration{}
	for _, name := range []string{"defaultDrainDelay", "defaultDrainSpread", "drainOverrun", "shutdownTimeout"} {
		v, ok := durations[name]
		if !ok {
			t.Fatalf("cmd/deployd/shutdown.go has no duration constant %s", name)
		}
		need[name] = v
	}
	for _, e := range pod.Containers[0].Env {
		name := map[string]string{"DEPLOYD_DRAIN_DELAY": "defaultDrainDelay", "DEPLOYD_DRAIN_SPREAD": "defaultDrainSpread"}[e.Name]
		if name == "" {
			continue
		}
		v, err := time.ParseDuration(e.Value)
		if err != nil {
			t.Fatalf("env %s = %q: %v", e.Name, e.Value, err)
		}
		need[name] = v
	}
	var total time.Duration
	for _, v := range need {
		total += v
	}
	grace := time.Duration(corev1.DefaultTerminationGracePeriodSeconds) * time.Second
	if g := pod.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	if grace < total {
		t.Errorf("terminationGracePeriodSeconds is %v, want at least %v: the drain's delay and spread, the overrun and the HTTP shutdown (%v)",
			grace, total, need)
	}
}

// TestPodDisruptionBudget: node drains leave one deployd pod up, and never
// block for good (minAvailable below the replicas).
func TestPodDisruptionBudget(t *testing.T) {
	var pdb policyv1.PodDisruptionBudget
	readYAML(t, "pdb.yaml", &pdb)
	d := deployment(t)
	if pdb.Namespace != namespace || pdb.APIVersion != "policy/v1" {
		t.Errorf("PodDisruptionBudget %s %s/%s, want policy/v1 in %s", pdb.APIVersion, pdb.Namespace, pdb.Name, namespace)
	}
	minAvailable := pdb.Spec.MinAvailable
	if minAvailable == nil || minAvailable.Type != intstr.Int || minAvailable.IntVal != 1 || pdb.Spec.MaxUnavailable != nil {
		t.Errorf("PodDisruptionBudget minAvailable %v, maxUnavailable %v: want minAvailable 1", minAvailable, pdb.Spec.MaxUnavailable)
	}
	if d.Spec.Replicas != nil && minAvailable != nil && minAvailable.IntVal >= *d.Spec.Replicas {
		t.Errorf("minAvailable %d with %d replicas: no pod could ever be evicted", minAvailable.IntVal, *d.Spec.Replicas)
	}
	if !selects(t, pdb.Spec.Selector, d.Spec.Template.Labels) {
		t.Errorf("the PodDisruptionBudget selects %v, not the Deployment's pods %v", pdb.Spec.Selector, d.Spec.Template.Labels)
	}
	if !reflect.DeepEqual(pdb.Spec.Selector, d.Spec.Selector) {
		t.Errorf("the PodDisruptionBudget's selector %v differs from the Deployment's %v", pdb.Spec.Selector, d.Spec.Selector)
	}
}

// selects reports whether a non-empty label selector matches labels.
func selects(t *testing.T, sel *metav1.LabelSelector, labels map[string]string) bool {
	t.Helper()
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("selector %v: %v", sel, err)
	}
	return s.Matches(k8slabels.Set(labels))
}

// goDurations evaluates the constants of a Go file written as a duration:
// N * time.Unit, time.Unit or a quoted duration ("5s"). Others are skipped.
func goDurations(t *testing.T, path string) map[string]time.Duration {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	units := map[string]time.Duration{"Nanosecond": time.Nanosecond, "Microsecond": time.Microsecond,
		"Millisecond": time.Millisecond, "Second": time.Second, "Minute": time.Minute, "Hour": time.Hour}
	var eval func(ast.Expr) (time.Duration, bool)
	eval = func(e ast.Expr) (time.Duration, bool) {
		switch e := e.(type) {
		case *ast.ParenExpr:
			return eval(e.X)
		case *ast.SelectorExpr:
			if x, ok := e.X.(*ast.Ident); ok && x.Name == "time" {
				u, ok := units[e.Sel.Name]
				return u, ok
			}
		case *ast.BasicLit:
			switch e.Kind {
			case token.INT:
				n, err := strconv.ParseInt(e.Value, 0, 64)
				return time.Duration(n), err == nil
			case token.STRING:
				s, err := strconv.Unquote(e.Value)
				if err != nil {
					return 0, false
				}
				d, err := time.ParseDuration(s)
				return d, err == nil
			}
		case *ast.BinaryExpr:
			x, okx := eval(e.X)
			y, oky := eval(e.Y)
			if okx && oky && e.Op == token.MUL {
				return x * y, true
			}
		}
		return 0, false
	}
	out := map[string]time.Duration{}
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					if d, ok := eval(vs.Values[i]); ok {
						out[name.Name] = d
					}
				}
			}
		}
	}
	return out
}

func firstBool(vs ...*bool) *bool {
	for _, v := range vs {
		if v != nil {
			return v
		}
	}
	return nil
}

func firstInt(vs ...*int64) *int64 {
	for _, v := range vs {
		if v != nil {
			return v
		}
	}
	return nil
}
