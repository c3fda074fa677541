package engine

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/projection"
)

// AnnotationDesiredHash holds a hash of the object as rendered: it tells a
// run whether the desired state changed since the object was last applied.
const AnnotationDesiredHash = "gitops.hanzo.ai/desired-hash"

// FieldManager names the engine's applies in managedFields.
const FieldManager = "deployd"

// Config configures an Engine. Start from Defaults and change what differs:
// a zero Config is not valid (Validate names the first field that is not).
type Config struct {
	Repo string // clone URL (https://, http:// to loopback, ssh://, or git@host:path)
	Ref  string // branch, tag, or full ref name
	Path string // folder in the repository ("" or "." for the root)
	// Instance is the value of the tracking label on every applied object.
	Instance string
	// Namespace fills in the namespace of an object that names none.
	Namespace string
	// Namespaces is the namespace map; nothing is written outside it.
	Namespaces projection.Namespaces
	// Allow lists the kinds the engine applies.
	Allow []projection.Kind

	Prune         bool
	PruneMax      int
	PruneMaxRatio float64
	// Interval is the self-heal period; zero runs only on demand.
	Interval time.Duration

	// Auth is the content of DEPLOY_ENGINE_AUTH_FILE: an HTTPS token (the
	// Basic-auth password) or an SSH private key (a PEM block). Never
	// logged.
	Auth     []byte
	AuthUser string
	// Push turns write-back on: rollbacks and releases of the Apps the
	// engine declares are commits pushed to Ref (a branch).
	Push bool
	// CacheDir holds the fetched repository.
	CacheDir string
	// Lease, when set, makes the engine one writer among replicas: only
	// the holder of the Lease runs it (see LeaseConfig). Nil: this process
	// runs it alone.
	Lease *LeaseConfig
}

// LeaseName is the default name of the engine's Lease and state
// ConfigMap for an instance.
func LeaseName(instance string) string {
	return strings.ToLower(strings.NewReplacer("_", "-", ".", "-").Replace("deployd-engine-" + instance))
}

// Defaults is the engine's configuration with nothing set.
func Defaults() Config {
	return Config{
		Repo:          "https://github.com/hanzoai/universe",
		Ref:           "main",
		Path:          "infra/k8s/operator/crs",
		Instance:      "universe",
		Namespace:     "hanzo",
		Namespaces:    projection.DefaultNamespaces(),
		Allow:         DefaultAllow(),
		PruneMax:      10,
		PruneMaxRatio: 0.20,
		Interval:      3 * time.Minute,
		AuthUser:      "git",
	}
}

// DefaultAllow is the default allow-list: App, Middleware, IngressRoute.
func DefaultAllow() []projection.Kind {
	return []projection.Kind{projection.KindApp, projection.KindMiddleware, projection.KindIngressRoute}
}

// Source is where the configuration reads the desired state from.
func (c Config) Source() projection.EngineSource {
	return projection.EngineSource{Repo: c.Repo, Ref: c.Ref, Path: c.Path}
}

// ConfigError is a setting that cannot work; Field names the Config field.
type ConfigError struct {
	Field string
	Msg   string
}

func (e *ConfigError) Error() string { return e.Msg }

func bad(field, format string, args ...any) error {
	return &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Validate reports the first setting that cannot work, as a *ConfigError.
func (c Config) Validate() error {
	if _, err := parseRepo(c.Repo, len(c.Auth) > 0); err != nil {
		return &ConfigError{Field: "Repo", Msg: err.Error()}
	}
	if c.Ref == "" || strings.ContainsAny(c.Ref, " \t\n~^:?*[\\") || strings.Contains(c.Ref, "..") {
		return bad("Ref", "ref %q is not a branch, tag or ref name", c.Ref)
	}
	if strings.HasPrefix(c.Path, "/") || hasDotDot(c.Path) {
		return bad("Path", "path %q must be relative to the repository root, without ..", c.Path)
	}
	if c.Instance == "" || len(c.Instance) > 63 || !labelValue(c.Instance) {
		return bad("Instance", "instance %q must be a label value (letters, digits, -, _, ., at most 63)", c.Instance)
	}
	if c.Namespace == "" || !labelValue(c.Namespace) {
		return bad("Namespace", "namespace %q is not a namespace name", c.Namespace)
	}
	if _, _, ok := c.Namespaces.Env(c.Namespace); !ok {
		return bad("Namespace", "namespace %q is not in the namespace map", c.Namespace)
	}
	if c.PruneMax < 0 {
		return bad("PruneMax", "prune max %d must not be negative", c.PruneMax)
	}
	if c.PruneMaxRatio < 0 || c.PruneMaxRatio > 1 {
		return bad("PruneMaxRatio", "prune max ratio %v must be between 0 and 1", c.PruneMaxRatio)
	}
	if c.Interval < 0 {
		return bad("Interval", "interval %v must not be negative", c.Interval)
	}
	if c.Push && strings.HasPrefix(c.Ref, "refs/") && !strings.HasPrefix(c.Ref, "refs/heads/") {
		return bad("Ref", "ref %q is not a branch: write-back (push) needs one", c.Ref)
	}
	if len(c.Allow) == 0 {
		return bad("Allow", "the allow-list is empty")
	}
	if c.Lease != nil {
		return c.Lease.validate()
	}
	return nil
}

func hasDotDot(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}

func labelValue(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// parseRepo checks a clone URL: https, ssh, scp-like git@host:path, or
// http only to a loopback host when credentials would be sent (plain http
// with no credentials is allowed anywhere).
func parseRepo(repo string, withAuth bool) (*url.URL, error) {
	if repo == "" {
		return nil, fmt.Errorf("repo is empty")
	}
	if !strings.Contains(repo, "://") {
		if at, _, ok := strings.Cut(repo, ":"); ok && strings.Contains(at, "@") {
			return &url.URL{Scheme: "ssh"}, nil // scp-like git@host:path
		}
		return nil, fmt.Errorf("repo %q is not a URL (https://…, ssh://… or git@host:path)", repo)
	}
	u, err := url.Parse(repo)
	if err != nil {
		return nil, fmt.Errorf("repo %q is not a URL", repo)
	}
	if u.User != nil {
		if _, hasPassword := u.User.Password(); hasPassword || u.Scheme != "ssh" {
			return nil, fmt.Errorf("repo URL must not carry credentials; use the auth file")
		}
	}
	switch u.Scheme {
	case "https", "ssh":
	case "http":
		if withAuth && !auth.IsLoopbackHost(u.Hostname()) {
			return nil, fmt.Errorf("repo %q: credentials are never sent over plain http except to a loopback host; use https", repo)
		}
	case "file":
		if withAuth {
			return nil, fmt.Errorf("repo %q: a file URL takes no credentials", repo)
		}
	default:
		return nil, fmt.Errorf("repo %q: scheme %q is not https, http, ssh or file", repo, u.Scheme)
	}
	if u.Scheme != "file" && u.Host == "" {
		return nil, fmt.Errorf("repo %q names no host", repo)
	}
	return u, nil
}
