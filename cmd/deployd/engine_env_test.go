package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hanzoai/deploy/cluster"
	"github.com/hanzoai/deploy/engine"
	"github.com/hanzoai/deploy/projection"
)

func envMap(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestEngineEnvDefaults(t *testing.T) {
	env, err := engineFromEnv(envMap(nil), projection.DefaultNamespaces())
	if err != nil {
		t.Fatal(err)
	}
	c := env.Config
	if env.Enabled || c.Repo != "https://github.com/hanzoai/universe" || c.Ref != "main" || c.Path != "infra/k8s/operator/crs" ||
		c.Instance != "universe" || c.Namespace != "hanzo" || c.Prune || c.PruneMax != 10 || c.PruneMaxRatio != 0.20 ||
		c.Interval != 3*time.Minute || c.AuthUser != "git" || len(c.Auth) != 0 {
		t.Fatalf("defaults: enabled %v, %+v", env.Enabled, c)
	}
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("tok-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env, err = engineFromEnv(envMap(map[string]string{
		"DEPLOY_ENGINE_ENABLED": "true", "DEPLOY_ENGINE_REPO": "https://git.example.com/fleet.git", "DEPLOY_ENGINE_REF": "prod",
		"DEPLOY_ENGINE_PATH": "crs", "DEPLOY_ENGINE_INSTANCE": "fleet", "DEPLOY_ENGINE_NAMESPACE": "hanzo-devnet",
		"DEPLOY_ENGINE_PRUNE": "true", "DEPLOY_ENGINE_PRUNE_MAX": "3", "DEPLOY_ENGINE_PRUNE_MAX_RATIO": "0.5",
		"DEPLOY_ENGINE_INTERVAL": "0", "DEPLOY_ENGINE_AUTH_FILE": token, "DEPLOY_ENGINE_AUTH_USER": "bot",
		"DEPLOY_ENGINE_WEBHOOK_SECRET": "hook", "DEPLOY_ENGINE_PUSH": "true",
	}), projection.DefaultNamespaces())
	if err != nil {
		t.Fatal(err)
	}
	c = env.Config
	if !env.Enabled || c.Repo != "https://git.example.com/fleet.git" || c.Ref != "prod" || c.Path != "crs" || c.Instance != "fleet" ||
		c.Namespace != "hanzo-devnet" || !c.Prune || c.PruneMax != 3 || c.PruneMaxRatio != 0.5 || c.Interval != 0 ||
		string(c.Auth) != "tok-123\n" || c.AuthUser != "bot" || string(env.WebhookSecret) != "hook" || !c.Push {
		t.Fatalf("set: %+v", env)
	}
}

// TestEngineEnvBadValues: a bad value is an error naming the variable,
// and never echoes a credential.
func TestEngineEnvBadValues(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	on := map[string]string{"DEPLOY_ENGINE_ENABLED": "true"}
	cases := []struct {
		set  map[string]string
		name string
	}{
		{map[string]string{"DEPLOY_ENGINE_ENABLED": "yes please"}, "DEPLOY_ENGINE_ENABLED"},
		{map[string]string{"DEPLOY_ENGINE_PRUNE": "maybe"}, "DEPLOY_ENGINE_PRUNE"},
		{map[string]string{"DEPLOY_ENGINE_PUSH": "maybe"}, "DEPLOY_ENGINE_PUSH"},
		{map[string]string{"DEPLOY_ENGINE_PRUNE_MAX": "-1"}, "DEPLOY_ENGINE_PRUNE_MAX"},
		{map[string]string{"DEPLOY_ENGINE_PRUNE_MAX": "ten"}, "DEPLOY_ENGINE_PRUNE_MAX"},
		{map[string]string{"DEPLOY_ENGINE_PRUNE_MAX_RATIO": "20%"}, "DEPLOY_ENGINE_PRUNE_MAX_RATIO"},
		{map[string]string{"DEPLOY_ENGINE_PRUNE_MAX_RATIO": "1.5"}, "DEPLOY_ENGINE_PRUNE_MAX_RATIO"},
		{map[string]string{"DEPLOY_ENGINE_INTERVAL": "3"}, "DEPLOY_ENGINE_INTERVAL"},
		{map[string]string{"DEPLOY_ENGINE_INTERVAL": "-1m"}, "DEPLOY_ENGINE_INTERVAL"},
		{map[string]string{"DEPLOY_ENGINE_AUTH_FILE": "/nonexistent/token"}, "DEPLOY_ENGINE_AUTH_FILE"},
		{map[string]string{"DEPLOY_ENGINE_AUTH_FILE": empty}, "DEPLOY_ENGINE_AUTH_FILE"},
		{with(on, "DEPLOY_ENGINE_REPO", "not a url"), "DEPLOY_ENGINE_REPO"},
		{with(with(on, "DEPLOY_ENGINE_REPO", "http://git.example.com/r.git"), "DEPLOY_ENGINE_AUTH_FILE", token), "DEPLOY_ENGINE_REPO"},
		{with(on, "DEPLOY_ENGINE_REF", "a b"), "DEPLOY_ENGINE_REF"},
		{with(on, "DEPLOY_ENGINE_PATH", "../up"), "DEPLOY_ENGINE_PATH"},
		{with(on, "DEPLOY_ENGINE_INSTANCE", "not/a/label"), "DEPLOY_ENGINE_INSTANCE"},
		{with(on, "DEPLOY_ENGINE_NAMESPACE", "kube-system"), "DEPLOY_ENGINE_NAMESPACE"},
		{map[string]string{"DEPLOY_ENGINE_LEASE_DURATION": "1500ms"}, "DEPLOY_ENGINE_LEASE_DURATION"},
		{map[string]string{"DEPLOY_ENGINE_LEASE_DURATION": "fifteen"}, "DEPLOY_ENGINE_LEASE_DURATION"},
		{map[string]string{"DEPLOYD_ADVERTISE_URL": "10.0.0.7:8080"}, "DEPLOYD_ADVERTISE_URL"},
		{map[string]string{"DEPLOYD_ADVERTISE_URL": "ftp://10.0.0.7"}, "DEPLOYD_ADVERTISE_URL"},
	}
	for _, c := range cases {
		_, err := engineFromEnv(envMap(c.set), projection.DefaultNamespaces())
		if err == nil || !strings.HasPrefix(err.Error(), c.name) {
			t.Errorf("%v: got %v, want an error naming %s", c.set, err, c.name)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%v: the error echoes the credential: %v", c.set, err)
		}
	}
}

func with(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for mk, mv := range m {
		if mk != k {
			out[mk] = mv
		}
	}
	return out
}

// TestServeStopsOnBadEngineValue: serve does not start with a bad engine
// setting, and says which.
func TestServeStopsOnBadEngineValue(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("DEPLOY_ENGINE_ENABLED", "true")
	t.Setenv("DEPLOY_ENGINE_PRUNE_MAX_RATIO", "lots")
	err := run(context.Background(), []string{"serve", "--listen", "127.0.0.1:0"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "DEPLOY_ENGINE_PRUNE_MAX_RATIO") {
		t.Fatalf("got %v, want an error naming DEPLOY_ENGINE_PRUNE_MAX_RATIO", err)
	}
	t.Setenv("DEPLOY_ENGINE_PRUNE_MAX_RATIO", "")
	err = run(context.Background(), []string{"serve", "--listen", "127.0.0.1:0"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "DEPLOY_ENGINE_ENABLED=true needs a cluster") {
		t.Fatalf("got %v, want the engine to need a cluster", err)
	}
}

// TestEngineLease: serve always elects the engine; the Lease takes its
// namespace, timing and advertised URL from the environment, and a replica
// listening on every address advertises its pod IP.
func TestEngineLease(t *testing.T) {
	env, err := engineFromEnv(envMap(map[string]string{"DEPLOY_ENGINE_LEASE_DURATION": "6s"}), projection.DefaultNamespaces())
	if err != nil {
		t.Fatal(err)
	}
	addr := &net.TCPAddr{IP: net.IPv4zero, Port: 8080}
	l, err := env.lease(envMap(map[string]string{"POD_NAMESPACE": "ops", "POD_IP": "10.1.2.3"}), addr)
	if err != nil {
		t.Fatal(err)
	}
	if l.Namespace != "ops" || l.URL != "http://10.1.2.3:8080" || l.Duration != 6*time.Second || l.RenewDeadline != 4*time.Second || l.RetryPeriod != 800*time.Millisecond || l.Identity == "" {
		t.Errorf("lease %+v", l)
	}
	env.AdvertiseURL, env.LeaseNamespace = "https://deployd-0.deployd:8443", "deployd-ns"
	l, err = env.lease(envMap(nil), addr)
	if err != nil || l.URL != env.AdvertiseURL || l.Namespace != "deployd-ns" {
		t.Errorf("lease %+v, %v", l, err)
	}
	l2, _ := env.lease(envMap(nil), addr)
	if l2.Identity == l.Identity {
		t.Errorf("two processes share the identity %q", l.Identity)
	}
}

// TestPeeringFromEnv: DEPLOY_PEERS is read at start (a bad entry stops
// serve with the variable named); without it, or without a shared cookie
// key, the replica starts and says that it forwards nothing.
func TestPeeringFromEnv(t *testing.T) {
	lease := &engine.LeaseConfig{Identity: "r-1", URL: "http://10.0.0.7:8080"}
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	key := make([]byte, 32)
	if _, _, err := peeringFromEnv(envMap(map[string]string{"DEPLOY_PEERS": "http://10.0.0.7:8080/path"}), key, lease, log); err == nil || !strings.Contains(err.Error(), "DEPLOY_PEERS") {
		t.Errorf("a bad DEPLOY_PEERS: %v", err)
	}
	p, peers, err := peeringFromEnv(envMap(map[string]string{"DEPLOY_PEERS": "http://10.0.0.7:8080,http://10.0.0.8:8080"}), key, lease, log)
	if err != nil || p.Ready() != nil || !peers.Admits(context.Background(), "http://10.0.0.8:8080") || p.Self() != "r-1" {
		t.Fatalf("peers: %v %v %v", p, peers, err)
	}
	if logs.Len() != 0 {
		t.Errorf("a complete peering logged: %s", logs.String())
	}
	for _, tc := range []struct {
		env  map[string]string
		key  []byte
		want string
	}{
		{map[string]string{}, key, "set DEPLOY_PEERS"},
		{map[string]string{"DEPLOY_PEERS": "http://10.0.0.7:8080"}, nil, "set DEPLOY_COOKIE_KEY"},
		{map[string]string{"DEPLOY_PEERS": "http://10.0.0.8:8080"}, key, "not among DEPLOY_PEERS"},
	} {
		logs.Reset()
		if _, _, err := peeringFromEnv(envMap(tc.env), tc.key, lease, log); err != nil || !strings.Contains(logs.String(), tc.want) {
			t.Errorf("%v: %v, logged %q, want %q", tc.env, err, logs.String(), tc.want)
		}
	}
}

// TestClusterWebhookSecrets: an entry's engine.webhookSecretFile is read
// at start, trimmed; one that cannot be read or is empty stops serve.
func TestClusterWebhookSecrets(t *testing.T) {
	dir := t.TempDir()
	good, empty := filepath.Join(dir, "staging"), filepath.Join(dir, "empty")
	if err := os.WriteFile(good, []byte(" s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	entries := []cluster.Entry{{Name: "staging", Engine: &cluster.EntryEngine{Repo: "r", WebhookSecretFile: good}}, {Name: "qa", Engine: &cluster.EntryEngine{Repo: "r"}}, {Name: "dev"}}
	got, err := clusterWebhookSecrets(entries)
	if err != nil || len(got) != 1 || string(got["staging"]) != "s3cret" {
		t.Fatalf("secrets: %q %v", got, err)
	}
	for path, want := range map[string]string{empty: "is empty", filepath.Join(dir, "none"): "cannot be read"} {
		_, err := clusterWebhookSecrets([]cluster.Entry{{Name: "staging", Engine: &cluster.EntryEngine{Repo: "r", WebhookSecretFile: path}}})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "cluster staging") {
			t.Errorf("%s: %v, want %q", path, err, want)
		}
	}
}
