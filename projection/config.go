package projection

import (
	"fmt"
	"sort"
	"strings"
)

// Labels the fold reads and writes.
const (
	LabelOrg      = "hanzo.ai/org"
	LabelInstance = "hanzo.ai/instance"
	LabelEnv      = "hanzo.ai/env"
	LabelPartOf   = "app.kubernetes.io/part-of"
	// TenantPrefix is the default namespace prefix of tenant namespaces:
	// tenant-<org>.
	TenantPrefix = "tenant-"
	// DefaultProject is the project of an app without a part-of label.
	DefaultProject = "default"
)

// Namespaces maps namespaces to environments. Platform namespaces are named
// one by one; tenant namespaces are TenantPrefix+<org>, all in TenantEnv.
// Any other namespace is ignored.
type Namespaces struct {
	Platform     map[string]string // namespace → env
	TenantPrefix string
	TenantEnv    string
}

// DefaultNamespaces is the default map: hanzo and hanzo-mainnet → main,
// hanzo-testnet → test, hanzo-devnet → dev, tenant-<org> → main.
func DefaultNamespaces() Namespaces {
	return Namespaces{
		Platform: map[string]string{
			"hanzo":         "main",
			"hanzo-mainnet": "main",
			"hanzo-testnet": "test",
			"hanzo-devnet":  "dev",
		},
		TenantPrefix: TenantPrefix,
		TenantEnv:    "main",
	}
}

// ParseNamespaces reads a namespace map written as
// "ns=env,ns=env,tenant-*=env" (the tenant entry is optional and names the
// tenant prefix). It is how the map is configured.
func ParseNamespaces(spec string) (Namespaces, error) {
	n := Namespaces{Platform: map[string]string{}}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		ns, env, ok := strings.Cut(part, "=")
		ns, env = strings.TrimSpace(ns), strings.TrimSpace(env)
		if !ok || ns == "" || env == "" {
			return Namespaces{}, fmt.Errorf("namespace map entry %q: want namespace=env", part)
		}
		if prefix, isTenant := strings.CutSuffix(ns, "*"); isTenant {
			if prefix == "" || n.TenantPrefix != "" {
				return Namespaces{}, fmt.Errorf("namespace map entry %q: one tenant pattern like tenant-*=main is allowed", part)
			}
			n.TenantPrefix, n.TenantEnv = prefix, env
			continue
		}
		n.Platform[ns] = env
	}
	if len(n.Platform) == 0 && n.TenantPrefix == "" {
		return Namespaces{}, fmt.Errorf("namespace map %q names no namespace", spec)
	}
	return n, nil
}

// Env returns the environment of a namespace and, for a tenant namespace, the
// org it belongs to. ok is false for a namespace outside the map.
func (n Namespaces) Env(ns string) (env, org string, ok bool) {
	if env, ok := n.Platform[ns]; ok {
		return env, "", true
	}
	if n.TenantPrefix != "" {
		if org, isTenant := strings.CutPrefix(ns, n.TenantPrefix); isTenant && org != "" {
			return n.TenantEnv, org, true
		}
	}
	return "", "", false
}

// Watched reports whether objects in ns are folded.
func (n Namespaces) Watched(ns string) bool { _, _, ok := n.Env(ns); return ok }

// PlatformNamespaces returns the platform namespaces, sorted.
func (n Namespaces) PlatformNamespaces() []string {
	out := make([]string, 0, len(n.Platform))
	for ns := range n.Platform {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// SourceDisplay holds the display values of an Application's spec.source:
// the App CR is the desired state today, so these only tell a dashboard where
// its manifests live. {namespace} and {name} are replaced.
type SourceDisplay struct {
	RepoURL        string
	Path           string
	TargetRevision string
}

// Config configures a Store.
type Config struct {
	Namespaces Namespaces
	Source     SourceDisplay
	// ClusterServer is the first cluster's server: its applications'
	// destination.
	ClusterServer string
	// ClusterName is the first cluster's name ("in-cluster" when empty).
	ClusterName string
	// Clusters are the clusters besides the first, whose namespaces are
	// qualified with their names (clusters.go); none with one cluster.
	Clusters []ClusterRef
	// names are the clusters' names, set by NewStore (ClusterNames).
	names []string
	// Engine is the engine's configured source: an App it applied (one
	// carrying its instance label and revision annotation) shows it as
	// spec.source, and GET /v1/deploy/gitops names it while the engine is
	// disabled. Nil when none is configured; read-only once set.
	Engine *EngineSource
	// EngineInstance is the configured engine's instance; an App marked by
	// another instance keeps the display source. Empty matches any.
	EngineInstance string
	// BaseRevision is the first revision this store hands out, minus one.
	// Make it increase across restarts (e.g. the start time in
	// microseconds) so an event id from an earlier process is always
	// recognisable as older.
	BaseRevision uint64
}

// DefaultConfig is the configuration with the default namespace map and
// display values and a zero base revision.
func DefaultConfig() Config {
	return Config{
		Namespaces: DefaultNamespaces(),
		Source: SourceDisplay{
			RepoURL:        "https://github.com/hanzoai/universe",
			Path:           "infra/k8s/operator/crs/{namespace}/{name}",
			TargetRevision: "HEAD",
		},
		ClusterServer: "https://kubernetes.default.svc",
	}
}

func (d SourceDisplay) expand(s, namespace, name string) string {
	if !strings.Contains(s, "{") {
		return s
	}
	// As strings.NewReplacer("{namespace}", namespace, "{name}", name)
	// replaces, without building a replacer for each row it encodes.
	var b strings.Builder
	b.Grow(len(s) + len(namespace) + len(name))
	for {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i:]
		switch {
		case strings.HasPrefix(s, "{namespace}"):
			b.WriteString(namespace)
			s = s[len("{namespace}"):]
		case strings.HasPrefix(s, "{name}"):
			b.WriteString(name)
			s = s[len("{name}"):]
		default:
			b.WriteByte('{')
			s = s[1:]
		}
	}
}
