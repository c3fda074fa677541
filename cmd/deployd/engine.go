package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/cluster"
	"github.com/hanzoai/deploy/engine"
	"github.com/hanzoai/deploy/handlers"
	"github.com/hanzoai/deploy/projection"
)

// The engine satisfies the interface the routes call.
var _ handlers.Engine = (*engine.Engine)(nil)

// engineEnv is the engine's configuration from the environment:
//
//	DEPLOY_ENGINE_ENABLED          true turns the engine on (off)
//	DEPLOY_ENGINE_REPO             https://github.com/hanzoai/universe
//	DEPLOY_ENGINE_REF              main
//	DEPLOY_ENGINE_PATH             infra/k8s/operator/crs
//	DEPLOY_ENGINE_INSTANCE         universe (the tracking label's value)
//	DEPLOY_ENGINE_NAMESPACE        hanzo (for objects that name none)
//	DEPLOY_ENGINE_PRUNE            true allows deletes (off)
//	DEPLOY_ENGINE_PRUNE_MAX        10
//	DEPLOY_ENGINE_PRUNE_MAX_RATIO  0.20
//	DEPLOY_ENGINE_INTERVAL         3m (0: on demand only)
//	DEPLOY_ENGINE_AUTH_FILE        a file holding an HTTPS token or an SSH private key
//	                               (ssh checks the server's key against the file named by
//	                               SSH_KNOWN_HOSTS, else ~/.ssh/known_hosts: mount one)
//	DEPLOY_ENGINE_AUTH_USER        git (the Basic-auth user sent with a token)
//	DEPLOY_ENGINE_PUSH             true makes rollbacks and releases of the Apps it declares commits pushed to the ref (off)
//	DEPLOY_ENGINE_WEBHOOK_SECRET   the HMAC key of POST /v1/deploy/webhook/git
//	DEPLOY_ENGINE_CACHE_DIR        where the repository is fetched ($XDG_CACHE_HOME/deployd/engine/<instance>)
//	DEPLOY_ENGINE_LEASE_NAMESPACE  where the engine's Lease and state ConfigMap live ($POD_NAMESPACE, else
//	                               the service account's namespace, else deployd)
//	DEPLOY_ENGINE_LEASE_DURATION   15s (renewed within 2/3 of it; whole seconds)
//	DEPLOYD_ADVERTISE_URL          where the other replicas reach this one (http://$POD_IP:<port>)
//
// Every value is parsed whether or not the engine is enabled, so a typo
// stops serve at start; the settings are checked together when it is
// enabled. An error names the variable and never echoes a credential.
type engineEnv struct {
	Enabled        bool
	Config         engine.Config
	WebhookSecret  []byte
	LeaseNamespace string
	LeaseDuration  time.Duration
	AdvertiseURL   string
}

// engineVars maps engine.Config fields to the variables that set them.
var engineVars = map[string]string{
	"Repo": "DEPLOY_ENGINE_REPO", "Ref": "DEPLOY_ENGINE_REF", "Path": "DEPLOY_ENGINE_PATH",
	"Instance": "DEPLOY_ENGINE_INSTANCE", "Namespace": "DEPLOY_ENGINE_NAMESPACE",
	"PruneMax": "DEPLOY_ENGINE_PRUNE_MAX", "Lease": "DEPLOY_ENGINE_LEASE_NAMESPACE", "PruneMaxRatio": "DEPLOY_ENGINE_PRUNE_MAX_RATIO",
	"Interval": "DEPLOY_ENGINE_INTERVAL", "Auth": "DEPLOY_ENGINE_AUTH_FILE",
}

func engineFromEnv(getenv func(string) string, namespaces projection.Namespaces) (engineEnv, error) {
	env := engineEnv{Config: engine.Defaults()}
	cfg := &env.Config
	cfg.Namespaces = namespaces
	var err error
	if env.Enabled, err = envBool(getenv, "DEPLOY_ENGINE_ENABLED", false); err != nil {
		return env, err
	}
	str := func(name string, dst *string) {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			*dst = v
		}
	}
	str("DEPLOY_ENGINE_REPO", &cfg.Repo)
	str("DEPLOY_ENGINE_REF", &cfg.Ref)
	str("DEPLOY_ENGINE_PATH", &cfg.Path)
	str("DEPLOY_ENGINE_INSTANCE", &cfg.Instance)
	str("DEPLOY_ENGINE_NAMESPACE", &cfg.Namespace)
	str("DEPLOY_ENGINE_AUTH_USER", &cfg.AuthUser)
	str("DEPLOY_ENGINE_CACHE_DIR", &cfg.CacheDir)
	if cfg.Prune, err = envBool(getenv, "DEPLOY_ENGINE_PRUNE", false); err != nil {
		return env, err
	}
	if cfg.Push, err = envBool(getenv, "DEPLOY_ENGINE_PUSH", false); err != nil {
		return env, err
	}
	if v := getenv("DEPLOY_ENGINE_PRUNE_MAX"); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return env, fmt.Errorf("DEPLOY_ENGINE_PRUNE_MAX %q: want a whole number of objects, 0 or more", v)
		}
		cfg.PruneMax = n
	}
	if v := getenv("DEPLOY_ENGINE_PRUNE_MAX_RATIO"); v != "" {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || f < 0 || f > 1 {
			return env, fmt.Errorf("DEPLOY_ENGINE_PRUNE_MAX_RATIO %q: want a fraction between 0 and 1, e.g. 0.20", v)
		}
		cfg.PruneMaxRatio = f
	}
	if v := strings.TrimSpace(getenv("DEPLOY_ENGINE_INTERVAL")); v != "" {
		d, err := time.ParseDuration(v)
		if v == "0" {
			d, err = 0, nil
		}
		if err != nil || d < 0 {
			return env, fmt.Errorf("DEPLOY_ENGINE_INTERVAL %q: want a duration like 3m or 30s, or 0 for on demand only", v)
		}
		cfg.Interval = d
	}
	if path := getenv("DEPLOY_ENGINE_AUTH_FILE"); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return env, fmt.Errorf("DEPLOY_ENGINE_AUTH_FILE %s: cannot be read (%v)", path, errReason(err))
		}
		if len(strings.TrimSpace(string(b))) == 0 {
			return env, fmt.Errorf("DEPLOY_ENGINE_AUTH_FILE %s is empty: put an HTTPS token or an SSH private key in it, or unset it", path)
		}
		cfg.Auth = b
	}
	if v := getenv("DEPLOY_ENGINE_WEBHOOK_SECRET"); v != "" {
		env.WebhookSecret = []byte(v)
	}
	if v := strings.TrimSpace(getenv("DEPLOY_ENGINE_LEASE_DURATION")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d%time.Second != 0 {
			return env, fmt.Errorf("DEPLOY_ENGINE_LEASE_DURATION %q: want whole seconds, at least 1s, like 15s", v)
		}
		env.LeaseDuration = d
	}
	env.LeaseNamespace = strings.TrimSpace(getenv("DEPLOY_ENGINE_LEASE_NAMESPACE"))
	env.AdvertiseURL = strings.TrimSpace(getenv("DEPLOYD_ADVERTISE_URL"))
	if env.AdvertiseURL != "" {
		u, err := url.Parse(env.AdvertiseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return env, fmt.Errorf("DEPLOYD_ADVERTISE_URL %q: want the URL other replicas reach this one at, like http://10.0.0.7:8080", env.AdvertiseURL)
		}
	}
	if env.Enabled {
		if err := cfg.Validate(); err != nil {
			return env, engineConfigError(err)
		}
	}
	return env, nil
}

// serviceAccountNamespace is where the kubelet writes the pod's namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// lease is the engine's Lease for a replica serving on addr: the engine is
// always elected in serve, so two replicas (as during every rolling
// upgrade) never both write.
func (env engineEnv) lease(getenv func(string) string, addr net.Addr) (*engine.LeaseConfig, error) {
	l := engine.DefaultLease()
	if env.LeaseDuration > 0 {
		l.Duration = env.LeaseDuration
		l.RenewDeadline = env.LeaseDuration * 2 / 3
		l.RetryPeriod = env.LeaseDuration * 2 / 15
	}
	l.Namespace = env.LeaseNamespace
	if l.Namespace == "" {
		l.Namespace = strings.TrimSpace(getenv("POD_NAMESPACE"))
	}
	if l.Namespace == "" {
		if b, err := os.ReadFile(serviceAccountNamespace); err == nil {
			l.Namespace = strings.TrimSpace(string(b))
		}
	}
	if l.Namespace == "" {
		l.Namespace = "deployd"
	}
	l.Identity = engine.NewIdentity()
	l.URL = env.AdvertiseURL
	if l.URL == "" {
		tcp, ok := addr.(*net.TCPAddr)
		if !ok {
			return nil, fmt.Errorf("DEPLOYD_ADVERTISE_URL: set it to the URL other replicas reach this one at")
		}
		host := strings.TrimSpace(getenv("POD_IP"))
		if host == "" && !tcp.IP.IsUnspecified() {
			host = tcp.IP.String()
		}
		if host == "" {
			h, err := os.Hostname()
			if err != nil {
				return nil, fmt.Errorf("DEPLOYD_ADVERTISE_URL: set it (or POD_IP) to where other replicas reach this one")
			}
			host = h
		}
		l.URL = "http://" + net.JoinHostPort(host, strconv.Itoa(tcp.Port))
	}
	return &l, nil
}

// peeringFromEnv is how this replica forwards the engine's requests to
// the one that leads, and accepts those forwarded to it: keyed by the
// cookie key every replica shares, to the peers DEPLOY_PEERS lists (and
// only to them). Without either, every forward is refused, and said so
// here once.
func peeringFromEnv(getenv func(string) string, cookieKey []byte, lease *engine.LeaseConfig, log *slog.Logger) (*auth.Peering, *auth.PeerSet, error) {
	peers, err := auth.ParsePeers(getenv("DEPLOY_PEERS"))
	if err != nil {
		return nil, nil, fmt.Errorf("DEPLOY_PEERS: %w", err)
	}
	peering, err := auth.NewPeering(cookieKey, lease.Identity, nil)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case peering.Ready() != nil:
		log.Warn("requests for the engine's leader that reach this replica are refused: set DEPLOY_COOKIE_KEY, the same on every replica")
	case peers == nil:
		log.Warn("requests for the engine's leader that reach this replica are refused: set DEPLOY_PEERS to the replicas' URLs (or a headless Service's)")
	default:
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if !peers.Admits(ctx, lease.URL) {
			log.Warn("this replica's URL is not among DEPLOY_PEERS: the others will not forward to it while it leads",
				"advertise", lease.URL, "peers", peers.String())
		}
	}
	return peering, peers, nil
}

// clusterWebhookSecrets reads the webhook secret of each cluster's engine
// whose entry names a file for it.
func clusterWebhookSecrets(entries []cluster.Entry) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, e := range entries {
		if e.Engine == nil || e.Engine.WebhookSecretFile == "" {
			continue
		}
		b, err := os.ReadFile(e.Engine.WebhookSecretFile)
		if err != nil {
			return nil, fmt.Errorf("DEPLOY_CLUSTERS_FILE: cluster %s: engine.webhookSecretFile %s: cannot be read (%v)", e.Name, e.Engine.WebhookSecretFile, errReason(err))
		}
		secret := bytes.TrimSpace(b)
		if len(secret) == 0 {
			return nil, fmt.Errorf("DEPLOY_CLUSTERS_FILE: cluster %s: engine.webhookSecretFile %s is empty: put the hook's secret in it, or leave the field out", e.Name, e.Engine.WebhookSecretFile)
		}
		out[e.Name] = secret
	}
	return out, nil
}

// engineConfigError names the variable behind an engine configuration
// error.
func engineConfigError(err error) error {
	if ce, ok := err.(*engine.ConfigError); ok {
		if name, ok := engineVars[ce.Field]; ok {
			return fmt.Errorf("%s: %s", name, ce.Msg)
		}
	}
	return fmt.Errorf("DEPLOY_ENGINE: %w", err)
}

func envBool(getenv func(string) string, name string, def bool) (bool, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return def, fmt.Errorf("%s %q: want true or false", name, v)
	}
	return b, nil
}

func errReason(err error) string {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err.Error()
	}
	return err.Error()
}
