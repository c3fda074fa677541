package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigFromEnv(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	docker := filepath.Join(dir, "config.json")
	notJSON := filepath.Join(dir, "bad.json")
	for p, b := range map[string]string{token: "t\n", docker: `{"auths":{"ghcr.io":{"auth":"dTpw"}}}`, notJSON: "auths: {}"} {
		if err := os.WriteFile(p, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		env     map[string]string
		want    string // Sources(), or the error's start
		refresh time.Duration
	}{
		{nil, "none", 0},
		{map[string]string{"DEPLOY_RELEASE_SOURCE": "none"}, "none", 0},
		{map[string]string{"DEPLOY_RELEASE_SOURCE": "registry"}, "registry", 0},
		{map[string]string{"DEPLOY_RELEASE_SOURCE": "github"}, "github", 0},
		{map[string]string{"DEPLOY_RELEASE_SOURCE": "registry,github", "DEPLOY_RELEASE_REFRESH": "2m"}, "registry,github", 2 * time.Minute},
		{map[string]string{"DEPLOY_RELEASE_SOURCE": "github, registry"}, "registry,github", 0},
		{map[string]string{"DEPLOY_RELEASE_SOURCE": "registry", "DEPLOY_REGISTRY_AUTH_FILE": docker, "DEPLOY_GITHUB_TOKEN_FILE": token}, "registry", 0},
		{map[string]string{"DEPLOY_RELEASE_SOURCE": "gitlab"}, `error: DEPLOY_RELEASE_SOURCE "gitlab": want none, registry, github or registry,github`, 0},
		{map[string]string{"DEPLOY_RELEASE_SOURCE": "registry,"}, `error: DEPLOY_RELEASE_SOURCE "registry,"`, 0},
		{map[string]string{"DEPLOY_RELEASE_REFRESH": "5s"}, `error: DEPLOY_RELEASE_REFRESH "5s": want a duration of at least 10s`, 0},
		{map[string]string{"DEPLOY_RELEASE_REFRESH": "often"}, `error: DEPLOY_RELEASE_REFRESH "often"`, 0},
		{map[string]string{"DEPLOY_GITHUB_API": "api.github.com"}, `error: DEPLOY_GITHUB_API "api.github.com": want an http(s) base URL`, 0},
		{map[string]string{"DEPLOY_GITHUB_TOKEN_FILE": filepath.Join(dir, "missing")}, "error: DEPLOY_GITHUB_TOKEN_FILE: " + filepath.Join(dir, "missing") + " does not exist", 0},
		{map[string]string{"DEPLOY_REGISTRY_AUTH_FILE": notJSON}, "error: DEPLOY_REGISTRY_AUTH_FILE: " + notJSON + ` is not a Docker config file`, 0},
	} {
		cfg, err := ConfigFromEnv(func(k string) string { return tc.env[k] })
		got := cfg.Sources()
		if err != nil {
			got = "error: " + err.Error()
		}
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("%v: got %q, want %q", tc.env, got, tc.want)
		}
		if err == nil && cfg.Refresh != tc.refresh {
			t.Errorf("%v: refresh got %s, want %s", tc.env, cfg.Refresh, tc.refresh)
		}
	}
}
