package release

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
)

// The release sources that can be configured.
const (
	SourceRegistry = "registry"
	SourceGitHub   = "github"
)

// DefaultGitHubAPI is the public GitHub REST API.
const DefaultGitHubAPI = "https://api.github.com/"

// Config configures a Source. Zero values take the defaults.
type Config struct {
	// Registry lists image tags from each App's OCI registry (latestTag,
	// stale).
	Registry bool
	// RegistryAuthFile is a Docker config file ({"auths":{host:{auth}}})
	// whose credentials are used per registry host; "" is anonymous.
	RegistryAuthFile string
	// GitHub reads each repository's releases (no-release, zero-assets,
	// and latestTag when Registry is off).
	GitHub bool
	// GitHubAPI is the REST API's base URL (default DefaultGitHubAPI): a
	// GitHub Enterprise ".../api/v3/" or a Gitea-compatible ".../api/v1/".
	GitHubAPI string
	// GitHubTokenFile holds the token sent to GitHubAPI; "" is anonymous.
	GitHubTokenFile string
	// Refresh is the period between two fetches of one repository
	// (default 10 minutes), jittered by ±10%.
	Refresh time.Duration
	// Concurrency bounds the fetches in flight (default 4).
	Concurrency int
	// Timeout bounds one fetch of one source (default 30 s).
	Timeout time.Duration
	// CacheSize bounds the repositories whose facts are kept (default
	// 4096); an entry not refreshed for three periods expires.
	CacheSize int
}

// Enabled reports whether any source is configured.
func (c Config) Enabled() bool { return c.Registry || c.GitHub }

func (c Config) withDefaults() Config {
	if c.GitHubAPI == "" {
		c.GitHubAPI = DefaultGitHubAPI
	}
	if c.Refresh <= 0 {
		c.Refresh = 10 * time.Minute
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 4
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.CacheSize <= 0 {
		c.CacheSize = 4096
	}
	return c
}

// ConfigFromEnv reads DEPLOY_RELEASE_SOURCE (none, registry, github or
// registry,github), DEPLOY_REGISTRY_AUTH_FILE, DEPLOY_GITHUB_API,
// DEPLOY_GITHUB_TOKEN_FILE and DEPLOY_RELEASE_REFRESH (a Go duration, at
// least 10s). An error names the variable and what to write instead. The
// files are checked for readability here, so a wrong path stops the
// server at start; their contents are read when used.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	var c Config
	src := strings.TrimSpace(getenv("DEPLOY_RELEASE_SOURCE"))
	if src != "" && src != "none" {
		for s := range strings.SplitSeq(src, ",") {
			switch strings.TrimSpace(s) {
			case SourceRegistry:
				c.Registry = true
			case SourceGitHub:
				c.GitHub = true
			default:
				return c, fmt.Errorf("DEPLOY_RELEASE_SOURCE %q: want none, registry, github or registry,github", src)
			}
		}
	}
	if v := getenv("DEPLOY_REGISTRY_AUTH_FILE"); v != "" {
		if err := readable(v); err != nil {
			return c, fmt.Errorf("DEPLOY_REGISTRY_AUTH_FILE: %w", err)
		}
		if _, err := loadDockerConfig(v); err != nil {
			return c, fmt.Errorf("DEPLOY_REGISTRY_AUTH_FILE: %w", err)
		}
		c.RegistryAuthFile = v
	}
	if v := getenv("DEPLOY_GITHUB_API"); v != "" {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return c, fmt.Errorf("DEPLOY_GITHUB_API %q: want an http(s) base URL such as %s or https://ghe.example.com/api/v3/", v, DefaultGitHubAPI)
		}
		c.GitHubAPI = v
	}
	if v := getenv("DEPLOY_GITHUB_TOKEN_FILE"); v != "" {
		if err := readable(v); err != nil {
			return c, fmt.Errorf("DEPLOY_GITHUB_TOKEN_FILE: %w", err)
		}
		c.GitHubTokenFile = v
	}
	if v := getenv("DEPLOY_RELEASE_REFRESH"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Second {
			return c, fmt.Errorf("DEPLOY_RELEASE_REFRESH %q: want a duration of at least 10s, such as 10m", v)
		}
		c.Refresh = d
	}
	return c, nil
}

// Sources names the configured sources, "none" when there are none.
func (c Config) Sources() string {
	var s []string
	if c.Registry {
		s = append(s, SourceRegistry)
	}
	if c.GitHub {
		s = append(s, SourceGitHub)
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(slices.Clip(s), ",")
}

func readable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s does not exist", path)
		}
		return fmt.Errorf("%s cannot be read", path)
	}
	return f.Close()
}
