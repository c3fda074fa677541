package fleet

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"time"
)

// DefaultSize is the number of Apps the demo generates.
const DefaultSize = 30

// The namespaces every generated fleet uses.
const (
	NamespaceMain   = "hanzo"
	NamespaceTest   = "hanzo-testnet"
	NamespaceAcme   = "tenant-acme"
	NamespaceGlobex = "tenant-globex"
)

// The extras every fleet carries besides its Apps.
const (
	SiteHost = "docs.acme.dev"
	SiteName = "docs"
	CDName   = "platform"
)

// anchor is an App every fleet of at least its index+1 Apps contains, so the
// interesting states are always there whatever the seed.
type anchor struct {
	namespace, name, role, project string
	replicas                       int32
	hosts                          []string
	lb, hpa, pdb                   bool
	sidecar                        string
	fault                          Fault
}

var anchors = []anchor{
	{namespace: NamespaceMain, name: "iam", role: "service", project: "platform", replicas: 2, hosts: []string{"iam.hanzo.ai"}, hpa: true, pdb: true, sidecar: "ghcr.io/hanzoai/oauth-proxy:v7.1.0"},
	{namespace: NamespaceMain, name: "gateway", role: "web", project: "platform", replicas: 1, hosts: []string{"api.hanzo.ai"}, lb: true, fault: FaultImagePull},
	{namespace: NamespaceAcme, name: "web", role: "web", project: "storefront", replicas: 2, hosts: []string{"www.acme.dev"}, fault: FaultCrashLoop},
	{namespace: NamespaceAcme, name: "worker", role: "worker", project: "storefront", replicas: 0},
	{namespace: NamespaceGlobex, name: "api", role: "service", project: "ledger", replicas: 2, hosts: []string{"api.globex.io"}, hpa: true, pdb: true},
	{namespace: NamespaceTest, name: "iam", role: "service", project: "platform", replicas: 1},
}

// Names the filler Apps are drawn from.
var (
	platformNames = []string{"billing", "web", "worker", "api", "search", "console", "analytics", "chat", "inference",
		"mpc", "kms", "vector", "cdn", "notify", "scheduler", "ledger", "relay", "indexer", "explorer",
		"faucet", "bridge", "oracle", "registry", "storage", "mailer", "webhooks", "metrics", "pay", "vault", "status"}
	tenantNames = []string{"web", "api", "worker", "shop", "checkout", "search", "admin", "cms", "mobile-api",
		"reports", "billing", "inventory", "notifications", "auth", "catalog", "orders"}
	platformProjects = []string{"platform", "inference", "chain", "commerce"}
	extraOrgs        = []string{"initech", "umbrella", "hooli", "stark", "wayne", "wonka", "soylent", "cyberdyne",
		"tyrell", "aperture", "oscorp", "vandelay", "nakatomi", "monarch", "octan", "prestige", "massive", "dunder"}
	sidecars = []string{"ghcr.io/hanzoai/oauth-proxy:v7.1.0", "ghcr.io/hanzoai/otel-collector:v0.9.2"}
)

// tenant is a tenant org and how its Apps are named.
type tenant struct {
	org, namespace, registry string
	projects                 []string
	domain                   string
}

func (t tenant) repository(name string) string { return t.registry + "/" + name }

// Generate returns n Apps (DefaultSize when n ≤ 0) followed by the fleet's
// static site, CD Application and AppProject, deterministically from seed.
// The Apps are spread over hanzo (main), hanzo-testnet (test), tenant-acme
// and tenant-globex; fleets over 100 Apps add a tenant per 100 Apps (for
// benchmarks). The first six Apps are always the same ones (hanzo/iam,
// hanzo/gateway with a tag that cannot be pulled, tenant-acme/web with a
// crash-looping pod, tenant-acme/worker scaled to zero, tenant-globex/api,
// hanzo-testnet/iam); their versions and histories, and every other App,
// come from the seed.
func Generate(seed int64, n int) []App {
	if n <= 0 {
		n = DefaultSize
	}
	r := rand.New(rand.NewPCG(uint64(seed), 0x68616e7a6f))
	acme := tenant{org: "acme", namespace: NamespaceAcme, registry: "registry.acme.dev/acme", projects: []string{"storefront", "internal"}, domain: "acme.dev"}
	globex := tenant{org: "globex", namespace: NamespaceGlobex, registry: "ghcr.io/globex", projects: []string{"ledger", "portal"}, domain: "globex.io"}
	tenants := []tenant{acme, globex}
	for i := range n / 100 {
		org := extraOrgs[i%len(extraOrgs)]
		if i >= len(extraOrgs) {
			org += strconv.Itoa(i/len(extraOrgs) + 1)
		}
		tenants = append(tenants, tenant{org: org, namespace: "tenant-" + org, registry: "registry." + org + ".dev/" + org,
			projects: []string{org + "-apps"}, domain: org + ".example"})
	}
	g := &generator{r: r, used: map[string]map[string]bool{}}
	apps := make([]App, 0, n+3)
	for i := 0; i < n && i < len(anchors); i++ {
		apps = append(apps, g.anchorApp(anchors[i], tenants))
	}
	for len(apps) < n {
		apps = append(apps, g.fillerApp(tenants))
	}

	siteCreated := Epoch.Add(-g.days(30, 90))
	apps = append(apps,
		App{Kind: KindSite, Namespace: NamespaceAcme, Name: SiteName, Org: "acme", Project: "storefront",
			Created: siteCreated, Hosts: []string{SiteHost}, Root: "/sites/acme/docs"},
		App{Kind: KindCD, Namespace: NamespaceMain, Name: CDName, Project: "platform", Created: Epoch.Add(-g.days(60, 120)),
			RepoURL: "https://github.com/hanzoai/universe", Path: "infra/k8s/platform", TargetRevision: "main",
			SyncStatus: "Synced", HealthStatus: "Healthy"},
		App{Kind: KindProject, Namespace: NamespaceMain, Name: "platform", Created: Epoch.Add(-g.days(120, 180)),
			Description: "the platform's own services"},
	)
	return apps
}

type generator struct {
	r    *rand.Rand
	used map[string]map[string]bool // namespace → names taken
}

func (g *generator) take(namespace, name string) {
	if g.used[namespace] == nil {
		g.used[namespace] = map[string]bool{}
	}
	g.used[namespace][name] = true
}

// uniqueName draws a name from pool not yet used in namespace, numbering it
// once the pool is exhausted.
func (g *generator) uniqueName(namespace string, pool []string) string {
	start := g.r.IntN(len(pool))
	for i := range pool {
		if name := pool[(start+i)%len(pool)]; !g.used[namespace][name] {
			g.take(namespace, name)
			return name
		}
	}
	for k := 2; ; k++ {
		name := pool[start] + "-" + strconv.Itoa(k)
		if !g.used[namespace][name] {
			g.take(namespace, name)
			return name
		}
		start = (start + 1) % len(pool)
	}
}

// days is a random duration between lo and hi days, to the minute.
func (g *generator) days(lo, hi int) time.Duration {
	minutes := lo*24*60 + g.r.IntN((hi-lo)*24*60+1)
	return time.Duration(minutes) * time.Minute
}

// releases draws 2 to 5 rollouts with increasing clean semver tags between
// created and Epoch.
func (g *generator) releases(created time.Time) []Release {
	count := 2 + g.r.IntN(4)
	major, minor, patch := g.r.IntN(3), g.r.IntN(12), g.r.IntN(6)
	if major == 0 && minor == 0 {
		minor = 1
	}
	span := Epoch.Sub(created) - 2*time.Hour
	offsets := make([]time.Duration, count)
	offsets[0] = time.Minute
	for i := 1; i < count; i++ {
		offsets[i] = time.Duration(g.r.Int64N(int64(span/time.Minute))) * time.Minute
	}
	slices.Sort(offsets)
	out := make([]Release, count)
	for i := range out {
		if i > 0 {
			switch x := g.r.IntN(10); {
			case x < 6:
				patch++
			case x < 9:
				minor, patch = minor+1, 0
			default:
				major, minor, patch = major+1, 0, 0
			}
		}
		at := created.Add(offsets[i])
		if i > 0 && !at.After(out[i-1].At) {
			at = out[i-1].At.Add(time.Hour)
		}
		out[i] = Release{Tag: fmt.Sprintf("v%d.%d.%d", major, minor, patch), At: at}
	}
	return out
}

func (g *generator) anchorApp(a anchor, tenants []tenant) App {
	g.take(a.namespace, a.name)
	app := App{Kind: KindApp, Namespace: a.namespace, Name: a.name, Project: a.project, Role: a.role,
		Replicas: a.replicas, Port: 8000, Hosts: slices.Clone(a.hosts), TLS: len(a.hosts) > 0,
		LoadBalancer: a.lb, Sidecar: a.sidecar, PDB: a.pdb, Fault: a.fault}
	app.Repository = "ghcr.io/hanzoai/" + a.name
	for _, t := range tenants {
		if t.namespace == a.namespace {
			app.Org, app.Repository = t.org, t.repository(a.name)
		}
	}
	if a.hpa {
		app.Autoscale = &Autoscale{Min: a.replicas, Max: a.replicas * 3}
	}
	g.history(&app)
	return app
}

func (g *generator) fillerApp(tenants []tenant) App {
	var app App
	switch x := g.r.IntN(100); {
	case x < 35:
		app = App{Namespace: NamespaceMain, Project: platformProjects[g.r.IntN(len(platformProjects))]}
		app.Name = g.uniqueName(app.Namespace, platformNames)
		app.Repository = "ghcr.io/hanzoai/" + baseName(app.Name)
	case x < 50:
		app = App{Namespace: NamespaceTest, Project: platformProjects[g.r.IntN(len(platformProjects))]}
		app.Name = g.uniqueName(app.Namespace, platformNames)
		app.Repository = "ghcr.io/hanzoai/" + baseName(app.Name)
	default:
		t := tenants[g.r.IntN(len(tenants))]
		app = App{Namespace: t.namespace, Org: t.org, Project: t.projects[g.r.IntN(len(t.projects))]}
		app.Name = g.uniqueName(app.Namespace, tenantNames)
		app.Repository = t.repository(baseName(app.Name))
	}
	app.Kind = KindApp
	app.Role = []string{"service", "service", "web", "worker"}[g.r.IntN(4)]
	app.Replicas = int32(1 + g.r.IntN(3))
	app.Port = []int32{8000, 8080, 3000, 9090}[g.r.IntN(4)]
	if app.Role != "worker" && g.r.IntN(10) < 4 {
		app.Hosts = []string{hostFor(app)}
		app.TLS = true
	}
	if app.Role != "worker" && g.r.IntN(10) < 3 {
		app.Autoscale = &Autoscale{Min: app.Replicas, Max: app.Replicas * 3}
	}
	app.PDB = app.Replicas >= 2 && g.r.IntN(2) == 0
	if g.r.IntN(10) == 0 {
		app.Sidecar = sidecars[g.r.IntN(len(sidecars))]
	}
	g.history(&app)
	return app
}

// history sets the App's creation time, releases and declared tag.
func (g *generator) history(app *App) {
	app.Created = Epoch.Add(-g.days(20, 200))
	app.Releases = g.releases(app.Created)
	if app.Fault == FaultImagePull {
		// The last rollout started recently and has been stuck since.
		last := &app.Releases[len(app.Releases)-1]
		last.At = Epoch.Add(-50 * time.Minute)
		sort.SliceStable(app.Releases, func(i, j int) bool { return app.Releases[i].At.Before(app.Releases[j].At) })
	}
	app.Tag = app.Releases[len(app.Releases)-1].Tag
}

// baseName strips a numbering suffix ("api-3" → "api") for the repository.
func baseName(name string) string {
	for i := len(name) - 1; i > 0; i-- {
		if name[i] == '-' {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				return name[:i]
			}
			break
		}
	}
	return name
}

func hostFor(app App) string {
	switch {
	case app.Namespace == NamespaceMain:
		return app.Name + ".hanzo.ai"
	case app.Namespace == NamespaceTest:
		return app.Name + ".test.hanzo.ai"
	case app.Org == "acme":
		return app.Name + ".acme.dev"
	case app.Org == "globex":
		return app.Name + ".globex.io"
	}
	return app.Name + "." + app.Org + ".example"
}
