package deploy_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/projection"
)

const (
	composeFile = "docker-compose.yaml"
	sampleFleet = "compose/sample-fleet.yaml"
	setupScript = "compose/setup.sh"
	dexConfig   = "compose/dex.yaml"
	// The password of every static user of the local Dex (README).
	localPassword = "password"
)

// composeService is what the tests read of a service in the resolved model
// that docker compose config --format json prints (long syntax, absolute
// paths).
type composeService struct {
	Image string `json:"image"`
	Build *struct {
		Context    string `json:"context"`
		Dockerfile string `json:"dockerfile"`
	} `json:"build"`
	Entrypoint  []string          `json:"entrypoint"`
	Command     []string          `json:"command"`
	Environment map[string]string `json:"environment"`
	NetworkMode string            `json:"network_mode"`
	User        string            `json:"user"`
	ReadOnly    bool              `json:"read_only"`
	Volumes     []composeVolume   `json:"volumes"`
	Ports       []composePort     `json:"ports"`
}

type composeVolume struct {
	Type   string `json:"type"`
	Source string `json:"source"`
	Target string `json:"target"`
}

type composePort struct {
	HostIP    string `json:"host_ip"`
	Target    int    `json:"target"`
	Published string `json:"published"`
}

type composeModel struct {
	Services map[string]composeService `json:"services"`
}

// resolvedCompose validates docker-compose.yaml with docker compose itself
// (Compose v5.6.0 built by hack/build-tools.sh; it needs no engine) and
// returns the resolved model.
func resolvedCompose(t *testing.T) composeModel {
	t.Helper()
	bin := tool(t, "docker-compose")
	run := func(args ...string) []byte {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), bin, append([]string{"-f", composeFile}, args...)...)
		cmd.Dir = repoRoot
		// A private config folder: nothing of the machine's docker setup
		// (contexts, plugins, credentials) takes part.
		cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+t.TempDir())
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("docker compose %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return out
	}
	if out := run("config", "-q"); len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("docker compose config -q printed %q", out)
	}
	var m composeModel
	if err := json.Unmarshal(run("config", "--format", "json"), &m); err != nil {
		t.Fatalf("docker compose config --format json: %v", err)
	}
	return m
}

// TestComposeConfig: docker compose accepts the file, every service's
// build context, Dockerfile and bind mount exists, and every file a
// service's entrypoint or command names inside the container is one of
// those mounts (or the image's own).
func TestComposeConfig(t *testing.T) {
	m := resolvedCompose(t)
	for _, name := range []string{"k3s", "setup", "dex", "deployd"} {
		if _, ok := m.Services[name]; !ok {
			t.Errorf("no service %s (have %v)", name, slices.Sorted(maps.Keys(m.Services)))
		}
	}
	for name, s := range m.Services {
		if s.Build != nil {
			if _, err := os.Stat(filepath.Join(s.Build.Context, s.Build.Dockerfile)); err != nil {
				t.Errorf("%s: build: %v", name, err)
			}
		} else if !regexp.MustCompile(`:v?\d+\.\d+\.\d+[^:]*$`).MatchString(s.Image) {
			t.Errorf("%s: image %q is not pinned to a version", name, s.Image)
		}
		for _, v := range s.Volumes {
			if v.Type != "bind" {
				continue
			}
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("%s: bind mount of %s: %v", name, v.Target, err)
			}
			if !strings.HasPrefix(v.Source, mustAbs(t, repoRoot)+string(filepath.Separator)) {
				t.Errorf("%s: bind mount source %s is outside the repository", name, v.Source)
			}
		}
		for _, arg := range append(slices.Clone(s.Entrypoint), s.Command...) {
			if !strings.HasPrefix(arg, "/") || !strings.Contains(filepath.Base(arg), ".") {
				continue // not a file path (a binary of the image, a flag)
			}
			host, ok := hostPath(s.Volumes, arg)
			if !ok {
				t.Errorf("%s: %s is not under a bind mount", name, arg)
				continue
			}
			if _, err := os.Stat(host); err != nil {
				t.Errorf("%s: %s (%s): %v", name, arg, host, err)
			}
		}
	}

	d := m.Services["deployd"]
	if d.Build == nil || filepath.Base(d.Build.Dockerfile) != "Dockerfile" || d.Build.Context != mustAbs(t, repoRoot) {
		t.Errorf("deployd is not built from the repository's Dockerfile: %+v", d.Build)
	}
	if d.NetworkMode != "service:dex" {
		t.Errorf("deployd network_mode = %q, want service:dex (the issuer URL must be the same for the browser and deployd)", d.NetworkMode)
	}
	if d.User != "65532:65532" || !d.ReadOnly {
		t.Errorf("deployd runs as %q, read_only %v; want 65532:65532, read-only like in a cluster", d.User, d.ReadOnly)
	}
	published := map[int]composePort{}
	for _, p := range m.Services["dex"].Ports {
		published[p.Target] = p
	}
	for _, port := range []int{5556, 8080} {
		p, ok := published[port]
		switch {
		case !ok:
			t.Errorf("dex does not publish %d (deployd shares its network namespace)", port)
		case p.HostIP != "127.0.0.1" || p.Published != strconv.Itoa(port):
			t.Errorf("port %d is published as %s:%s, want 127.0.0.1:%d (localhost URLs, public passwords)", port, p.HostIP, p.Published, port)
		}
	}
}

// hostPath maps a path inside a container to the host file of the bind
// mount that holds it.
func hostPath(vols []composeVolume, inside string) (string, bool) {
	for _, v := range vols {
		if v.Type != "bind" {
			continue
		}
		if inside == v.Target {
			return v.Source, true
		}
		if rel, ok := strings.CutPrefix(inside, strings.TrimSuffix(v.Target, "/")+"/"); ok {
			return filepath.Join(v.Source, filepath.FromSlash(rel)), true
		}
	}
	return "", false
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// writtenService is what TestLocalSignIn reads of a service.
type writtenService struct {
	Image       string            `json:"image"`
	Environment map[string]string `json:"environment"`
}

// writtenCompose reads docker-compose.yaml as written. It uses no
// interpolation, so its values are what docker compose resolves too.
func writtenCompose(t *testing.T) map[string]writtenService {
	t.Helper()
	path := filepath.Join(repoRoot, composeFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("${")) {
		t.Fatalf("%s uses interpolation; read it through docker compose config instead", composeFile)
	}
	var f struct {
		Services map[string]writtenService `json:"services"`
	}
	readYAMLPart(t, path, &f)
	return f.Services
}

type dexFile struct {
	Issuer        string `json:"issuer"`
	StaticClients []struct {
		ID           string   `json:"id"`
		Secret       string   `json:"secret"`
		RedirectURIs []string `json:"redirectURIs"`
	} `json:"staticClients"`
	EnablePasswordDB bool `json:"enablePasswordDB"`
	StaticPasswords  []struct {
		Email    string   `json:"email"`
		Username string   `json:"username"`
		Hash     string   `json:"hash"`
		Groups   []string `json:"groups"`
	} `json:"staticPasswords"`
}

// TestLocalSignIn: deployd's settings in docker-compose.yaml make a valid
// sign-in configuration that matches Dex's: the same issuer, the client and
// its secret, the callback registered, the groups scope requested, and
// static users whose "org:" groups give a SuperAdmin and members of two
// tenant orgs that own Apps in the sample fleet.
func TestLocalSignIn(t *testing.T) {
	services := writtenCompose(t)
	env := services["deployd"].Environment
	known := deploydEnv(t)
	for k := range env {
		if !known[k] && k != "KUBECONFIG" {
			t.Errorf("deployd env %s is not read by deployd", k)
		}
	}
	cfg, err := auth.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("deployd's sign-in settings in %s are rejected: %v", composeFile, err)
	}
	if cfg.Claims.OrgGroupPrefix == "" {
		t.Fatal("IAM_ORG_GROUP_PREFIX is empty: Dex's static users carry orgs only as groups")
	}
	if !slices.Contains(cfg.Scopes, "groups") {
		t.Errorf("scopes %v: Dex sends the groups claim only for the groups scope", cfg.Scopes)
	}

	dexImage := services["dex"].Image
	if v := regexp.MustCompile(`:v(\d+)\.(\d+)\.\d+$`).FindStringSubmatch(dexImage); v == nil {
		t.Errorf("dex image %q is not pinned to vX.Y.Z", dexImage)
	} else if major, _ := strconv.Atoi(v[1]); major < 2 || (major == 2 && atoi(v[2]) < 45) {
		t.Errorf("dex image %q: static users carry groups from v2.45.0 on", dexImage)
	}

	var dex dexFile
	readYAMLPart(t, dexConfig, &dex)
	if dex.Issuer != cfg.Issuer {
		t.Errorf("Dex issuer %q, deployd IAM_ENDPOINT %q: they must be the same URL", dex.Issuer, cfg.Issuer)
	}
	callback := cfg.PublicURL + auth.CallbackPath
	var client bool
	for _, sc := range dex.StaticClients {
		if sc.ID != cfg.ClientID {
			continue
		}
		client = true
		if sc.Secret != cfg.ClientSecret {
			t.Errorf("Dex client %s secret differs from DEPLOY_IAM_CLIENT_SECRET", sc.ID)
		}
		if !slices.Contains(sc.RedirectURIs, callback) {
			t.Errorf("Dex client %s redirect URIs %v lack %s", sc.ID, sc.RedirectURIs, callback)
		}
	}
	if !client {
		t.Errorf("Dex has no static client %q", cfg.ClientID)
	}
	if !dex.EnablePasswordDB || len(dex.StaticPasswords) == 0 {
		t.Fatal("Dex has no static users")
	}

	fleetOrgs := map[string]bool{}
	for _, u := range readObjects(t, sampleFleet) {
		if org := u.GetLabels()[projection.LabelOrg]; u.GetKind() == "App" && org != "" {
			fleetOrgs[org] = true
		}
	}
	orgs := map[string]string{}
	for _, u := range dex.StaticPasswords {
		if err := bcrypt.CompareHashAndPassword([]byte(u.Hash), []byte(localPassword)); err != nil {
			t.Errorf("Dex user %s: the password is not %q: %v", u.Email, localPassword, err)
		}
		var userOrgs []string
		for _, g := range u.Groups {
			if org, ok := strings.CutPrefix(g, cfg.Claims.OrgGroupPrefix); ok {
				userOrgs = append(userOrgs, org)
			}
		}
		if len(userOrgs) != 1 {
			t.Errorf("Dex user %s has org groups %v, want exactly one %s<org>", u.Email, userOrgs, cfg.Claims.OrgGroupPrefix)
			continue
		}
		orgs[userOrgs[0]] = u.Email
	}
	if orgs[cfg.Claims.AdminOrg] == "" {
		t.Errorf("no Dex user is in the admin org %q (groups %s%s)", cfg.Claims.AdminOrg, cfg.Claims.OrgGroupPrefix, cfg.Claims.AdminOrg)
	}
	tenants := 0
	for org, email := range orgs {
		if org == cfg.Claims.AdminOrg {
			continue
		}
		tenants++
		if !fleetOrgs[org] {
			t.Errorf("Dex user %s is in org %s, which owns no App of the sample fleet (orgs %v)", email, org, fleetOrgs)
		}
	}
	if tenants < 2 {
		t.Errorf("Dex users cover %d tenant orgs, want two (one per tenant of the sample fleet)", tenants)
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// TestSampleFleet: every object decodes with the projection's own decoder
// (so it is a kind deployd reads), sits in a namespace deployd watches by
// default and setup.sh creates, and every App has its Deployment running
// the App's image repository; tenant Apps carry their org.
func TestSampleFleet(t *testing.T) {
	setup, err := os.ReadFile(setupScript)
	if err != nil {
		t.Fatal(err)
	}
	created := regexp.MustCompile(`(?m)^NAMESPACES="([^"]*)"`).FindSubmatch(setup)
	if created == nil {
		t.Fatalf("%s sets no NAMESPACES", setupScript)
	}
	nsCreated := strings.Fields(string(created[1]))
	ns := projection.DefaultNamespaces()

	objs := readObjects(t, sampleFleet)
	apps := map[string]*projection.Object{}
	deployments := map[string]*projection.Object{}
	kinds := map[projection.Kind]int{}
	orgs := map[string]bool{}
	for _, u := range objs {
		o, err := projection.Decode(u.Object)
		if err != nil {
			t.Errorf("%s: %v", describe(u), err)
			continue
		}
		kinds[o.Kind]++
		env, org, ok := ns.Env(o.Namespace)
		if !ok || env == "" {
			t.Errorf("%s is in namespace %q, which deployd does not watch by default", describe(u), o.Namespace)
		}
		if !slices.Contains(nsCreated, o.Namespace) {
			t.Errorf("%s is in namespace %q, which %s does not create (%v)", describe(u), o.Namespace, setupScript, nsCreated)
		}
		key := o.Namespace + "/" + o.Name
		switch o.Kind {
		case projection.KindApp:
			apps[key] = o
			if org != "" {
				orgs[org] = true
				if got := o.Labels.Value(projection.LabelOrg); got != org {
					t.Errorf("App %s: label %s=%q, want %q", key, projection.LabelOrg, got, org)
				}
			}
			if st, _, _ := unstructured.NestedMap(u.Object, "status"); len(st) == 0 {
				t.Errorf("App %s has no status: the stack runs no operator, setup.sh writes it", key)
			}
			if _, managed := u.GetLabels()["app.kubernetes.io/managed-by"]; managed {
				t.Errorf("App %s carries app.kubernetes.io/managed-by: setup.sh writes status only to objects without it", key)
			}
		case projection.KindDeployment:
			deployments[key] = o
			if _, managed := u.GetLabels()["app.kubernetes.io/managed-by"]; !managed {
				t.Errorf("Deployment %s lacks app.kubernetes.io/managed-by: setup.sh would write its status", key)
			}
		case projection.KindService, projection.KindIngress:
			if _, managed := u.GetLabels()["app.kubernetes.io/managed-by"]; !managed {
				t.Errorf("%s lacks app.kubernetes.io/managed-by: setup.sh would write its status", describe(u))
			}
		default:
			t.Errorf("%s: the sample fleet holds only Apps, Deployments, Services and Ingresses (the controllers make the rest)", describe(u))
		}
	}
	if len(apps) < 4 || len(orgs) < 2 {
		t.Errorf("sample fleet has %d Apps in %d tenant orgs, want several in at least two", len(apps), len(orgs))
	}
	for key, app := range apps {
		d, ok := deployments[key]
		if !ok {
			t.Errorf("App %s has no Deployment of the same name", key)
			continue
		}
		as := app.Spec.(*projection.AppSpec)
		ws := d.Spec.(*projection.WorkloadSpec)
		found := false
		for _, c := range ws.Containers {
			found = found || projection.ParseImage(c.Image).Repository == as.Repository
		}
		if !found {
			t.Errorf("Deployment %s runs %+v, none of repository %s (the App's)", key, ws.Containers, as.Repository)
		}
	}
}

// TestSampleFleetAcceptedByAPIServer applies the sample fleet for real, as
// setup.sh does, and writes the Apps' statuses through the status
// subresource: the App CRD's schema accepts all of it.
func TestSampleFleetAcceptedByAPIServer(t *testing.T) {
	c := clustertest.Start(t)
	a := newApplier(t, c)
	setup, err := os.ReadFile(setupScript)
	if err != nil {
		t.Fatal(err)
	}
	created := regexp.MustCompile(`(?m)^NAMESPACES="([^"]*)"`).FindSubmatch(setup)
	if created == nil {
		t.Fatalf("%s sets no NAMESPACES", setupScript)
	}
	for _, ns := range strings.Fields(string(created[1])) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("Namespace")
		u.SetName(ns)
		a.apply(t, u, false)
	}
	for _, u := range readObjects(t, sampleFleet) {
		if _, w := a.apply(t, u, false); len(w) > 0 {
			t.Errorf("%s drew warnings: %q", describe(u), w)
		}
		status, ok, _ := unstructured.NestedMap(u.Object, "status")
		if !ok || u.GetKind() != "App" {
			continue
		}
		patch := map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(),
			"metadata": map[string]any{"name": u.GetName(), "namespace": u.GetNamespace()}, "status": status}
		data, err := json.Marshal(patch)
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.resource(t, u).Patch(t.Context(), u.GetName(), "application/apply-patch+yaml", data,
			metav1.PatchOptions{FieldManager: "hanzo-operator"}, "status")
		if err != nil {
			t.Fatalf("apply status of %s: %v", describe(u), err)
		}
		want, _, _ := unstructured.NestedString(status, "phase")
		if phase, _, _ := unstructured.NestedString(got.Object, "status", "phase"); phase != want {
			t.Errorf("%s status.phase = %q after the status apply, want %q", describe(u), phase, want)
		}
		if gen, og := got.GetGeneration(), status["observedGeneration"]; og != nil && gen > toInt64(og) {
			t.Errorf("%s: generation %d after create, but its status observed %v: it would read as awaiting reconcile", describe(u), gen, og)
		}
	}
}

func toInt64(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case int:
		return int64(n)
	}
	return -1
}

// TestComposePrometheus: the stack's Prometheus scrapes deployd's metrics
// listener (in Dex's network namespace, dex:9090) from its mounted config,
// and only Prometheus's own port is published, on loopback.
func TestComposePrometheus(t *testing.T) {
	m := resolvedCompose(t)
	p, ok := m.Services["prometheus"]
	if !ok {
		t.Fatal("no prometheus service")
	}
	if got := m.Services["deployd"].Environment["DEPLOYD_METRICS_LISTEN"]; got != ":9090" {
		t.Errorf("deployd DEPLOYD_METRICS_LISTEN = %q, want :9090", got)
	}
	for _, port := range m.Services["dex"].Ports {
		if port.Target == 9090 {
			t.Errorf("deployd's metrics port is published (%+v): Prometheus reaches it inside the stack", port)
		}
	}
	if len(p.Ports) != 1 || p.Ports[0].HostIP != "127.0.0.1" || p.Ports[0].Target != 9090 {
		t.Errorf("prometheus ports = %+v, want its 9090 on 127.0.0.1 only", p.Ports)
	}
	host, ok := hostPath(p.Volumes, "/etc/prometheus/prometheus.yml")
	if !ok || !slices.Contains(p.Command, "--config.file=/etc/prometheus/prometheus.yml") {
		t.Fatalf("prometheus does not run with a mounted /etc/prometheus/prometheus.yml: %v %+v", p.Command, p.Volumes)
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName       string `json:"job_name"`
			MetricsPath   string `json:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `json:"targets"`
			} `json:"static_configs"`
		} `json:"scrape_configs"`
	}
	readYAMLPart(t, host, &cfg)
	found := false
	for _, sc := range cfg.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			found = found || sc.JobName == "deployd" && sc.MetricsPath == "/metrics" && slices.Contains(st.Targets, "dex:9090")
		}
	}
	if !found {
		t.Errorf("%s scrapes %+v, want job deployd at dex:9090/metrics", host, cfg.ScrapeConfigs)
	}
}
