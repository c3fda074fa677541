package release

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// registryLister lists an image repository's tags.
type registryLister struct {
	keychain  authn.Keychain
	transport http.RoundTripper
}

func newRegistryLister(authFile string, rt http.RoundTripper) (*registryLister, error) {
	kc := authn.Keychain(anonymousKeychain{})
	if authFile != "" {
		cfg, err := loadDockerConfig(authFile)
		if err != nil {
			return nil, err
		}
		kc = cfg
	}
	return &registryLister{keychain: kc, transport: rt}, nil
}

// latest lists the repository's tags and returns the highest clean release.
func (l *registryLister) latest(ctx context.Context, repository string) (string, error) {
	repo, err := name.NewRepository(repository)
	if err != nil {
		return "", &fetchError{reason: "the image repository is not a valid reference"}
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(l.keychain)}
	if l.transport != nil {
		opts = append(opts, remote.WithTransport(l.transport))
	}
	tags, err := remote.List(repo, opts...)
	if err != nil {
		return "", registryError(ctx, err)
	}
	return Latest(tags), nil
}

// registryError turns a registry failure into a reason safe to show: a
// status class, never the registry's own text.
func registryError(ctx context.Context, err error) error {
	var te *transport.Error
	switch {
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return &fetchError{reason: "registry timed out", cause: err}
	case errors.As(err, &te):
		switch {
		case te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden:
			return &fetchError{reason: "registry denied access; check DEPLOY_REGISTRY_AUTH_FILE", cause: err}
		case te.StatusCode == http.StatusNotFound:
			return &fetchError{reason: "repository not found in the registry", cause: err}
		case te.StatusCode == http.StatusTooManyRequests:
			return &fetchError{reason: "registry rate limit", cause: err}
		}
		return &fetchError{reason: fmt.Sprintf("registry answered %d", te.StatusCode), cause: err}
	}
	// Refused, reset, unresolvable, or an answer that is not a registry's.
	return &fetchError{reason: "registry unreachable", cause: err}
}

type anonymousKeychain struct{}

func (anonymousKeychain) Resolve(authn.Resource) (authn.Authenticator, error) {
	return authn.Anonymous, nil
}

// dockerConfig is the part of a Docker config file deployd reads: the
// static credentials under "auths". Credential helpers ("credHelpers",
// "credsStore") run programs and are not supported: mount a file with the
// credentials themselves (a Kubernetes dockerconfigjson Secret is one).
type dockerConfig struct {
	Auths map[string]dockerAuth `json:"auths"`
}

type dockerAuth struct {
	Auth          string `json:"auth"`
	Username      string `json:"username"`
	Password      string `json:"password"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

func loadDockerConfig(path string) (*dockerConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s cannot be read", path)
	}
	var c dockerConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s is not a Docker config file (JSON with \"auths\")", path)
	}
	for host, a := range c.Auths {
		if a.Auth != "" {
			if _, err := base64.StdEncoding.DecodeString(a.Auth); err != nil {
				return nil, fmt.Errorf("%s: the auth of %s is not base64 of user:password", path, host)
			}
		}
	}
	return &c, nil
}

// Resolve finds the credentials of a registry host, written as the host,
// with a scheme, or with a path (as "docker login" writes Docker Hub's);
// anonymous when there are none.
func (c *dockerConfig) Resolve(r authn.Resource) (authn.Authenticator, error) {
	want := r.RegistryStr()
	for key, a := range c.Auths {
		host := key
		host = strings.TrimPrefix(strings.TrimPrefix(host, "https://"), "http://")
		host, _, _ = strings.Cut(host, "/")
		if host == want || (want == name.DefaultRegistry && (host == "index.docker.io" || host == "docker.io")) {
			cfg := authn.AuthConfig{Username: a.Username, Password: a.Password, IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken}
			if a.Auth != "" {
				raw, _ := base64.StdEncoding.DecodeString(a.Auth)
				cfg.Username, cfg.Password, _ = strings.Cut(string(raw), ":")
			}
			return authn.FromConfig(cfg), nil
		}
	}
	return authn.Anonymous, nil
}
