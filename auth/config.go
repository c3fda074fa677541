package auth

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Defaults of Config, applied by New to fields left empty.
const (
	DefaultIssuer        = "https://hanzo.id"
	DefaultClientID      = "admin-console"
	DefaultOrgClaim      = "owner"
	DefaultAdminOrg      = "admin"
	DefaultOrgAdminClaim = "isAdmin"
	DefaultGroupsClaim   = "groups"

	// CallbackPath is where the identity provider sends the browser back; the
	// redirect URI is PublicURL + CallbackPath, never derived from a request.
	CallbackPath = "/v1/deploy/callback"
	// CLIRedirectURI is the redirect `deployd login` receives the code at,
	// on whatever port it listens (a loopback redirect, RFC 8252 §7.3):
	// register it with the identity provider for CLIClientID.
	CLIRedirectURI = "http://127.0.0.1/callback"
	// LoginPath starts a sign-in.
	LoginPath = "/v1/deploy/login"

	// MinCookieKeyBytes is the least key material DEPLOY_COOKIE_KEY may carry.
	MinCookieKeyBytes = 32
)

// DefaultScopes are requested when Config.Scopes is empty.
var DefaultScopes = []string{"openid", "profile", "email"}

// DefaultAlgorithms is the signing-algorithm allow-list used when
// Config.Algorithms is empty.
var DefaultAlgorithms = []string{"RS256", "ES256"}

// knownAlgorithms are the asymmetric JWS algorithms a token may be signed
// with. Symmetric (HS*) and "none" are never accepted.
var knownAlgorithms = []string{
	"RS256", "RS384", "RS512",
	"ES256", "ES384", "ES512",
	"PS256", "PS384", "PS512",
	"EdDSA",
}

// Config is everything sign-in needs. Build it with ConfigFromEnv or by hand;
// New applies the defaults documented on each field.
type Config struct {
	// Issuer is the OIDC issuer URL, discovered at
	// Issuer + "/.well-known/openid-configuration" (IAM_ENDPOINT, default
	// https://hanzo.id). It must be https, except for a loopback host
	// (127.0.0.1, ::1, localhost), where plain http is allowed for local
	// providers and tests.
	Issuer string
	// ClientID is the OAuth2 client (DEPLOY_IAM_CLIENT_ID, default admin-console).
	ClientID string
	// ClientSecret is optional (DEPLOY_IAM_CLIENT_SECRET): without it deployd
	// is a public client and PKCE alone protects the code exchange.
	ClientSecret string
	// PublicURL is the origin browsers use to reach deployd
	// (DEPLOY_PUBLIC_URL), e.g. https://deploy.example.com. Without it
	// sign-in is disabled. It must be https, except http://127.0.0.1,
	// http://[::1] or http://localhost (any port); with such a loopback http
	// URL cookies are issued without the Secure attribute: some browsers
	// and tools do not keep Secure cookies received over plain http even on
	// loopback, and loopback traffic never leaves the host. It carries no
	// path, query or fragment.
	PublicURL string
	// CLIClientID is the public OAuth2 client `deployd login` signs in with
	// (DEPLOY_IAM_CLI_CLIENT_ID; Argo CD's cliClientID): authorization code
	// with PKCE through a loopback redirect, CLIRedirectURI on any port.
	// Its tokens are accepted as ClientID's are, and the settings route
	// advertises it. Empty: the CLI uses ClientID, which must then allow
	// that redirect.
	CLIClientID string
	// ExtraAudiences are further "aud" values accepted besides ClientID
	// (DEPLOY_IAM_EXTRA_AUDIENCES, comma separated), for tokens minted for a
	// sibling client such as a CLI.
	ExtraAudiences []string
	// Scopes requested at sign-in (DEPLOY_IAM_SCOPES, default "openid
	// profile email"); must include openid.
	Scopes []string
	// Algorithms is the allow-list of JWS algorithms for ID tokens
	// (DEPLOY_IAM_SIGNING_ALGS, default RS256,ES256).
	Algorithms []string
	// Claims maps token claims to a Principal.
	Claims ClaimMapping
	// CookieKey is the key material the cookie sealing keys are derived from
	// (DEPLOY_COOKIE_KEY, base64 or hex, at least 32 bytes). Replicas behind
	// one URL must share it. When empty, New generates a random key and logs
	// that it did: sessions then end at restart and are not shared between
	// replicas.
	CookieKey []byte

	// HTTPClient talks to the identity provider (discovery, keys, code
	// exchange). Default: a client with a 10 s timeout.
	HTTPClient *http.Client
	// Now is the clock for token expiry, flow age and cache lifetimes.
	// Default time.Now.
	Now func() time.Time
	// DiscoveryRetry is the first wait before discovery is retried when the
	// issuer is unreachable at start; it doubles up to one minute. Default 1 s.
	DiscoveryRetry time.Duration
	// CacheSize bounds the verified-token cache. Default 10000.
	CacheSize int
}

// ClaimMapping says which token claims carry the tenancy facts.
//
// By default the org is the string claim OrgClaim ("owner"), SuperAdmin means
// org == AdminOrg, and OrgAdmin is the boolean claim OrgAdminClaim ("isAdmin").
//
// For providers that express organizations as groups, set OrgGroupPrefix
// (IAM_ORG_GROUP_PREFIX, e.g. "org:"): the org is then the first group in
// GroupsClaim that starts with the prefix (prefix removed), OrgClaim is
// ignored, and membership of the group OrgGroupPrefix+AdminOrg makes the
// principal SuperAdmin whatever its first org group is.
type ClaimMapping struct {
	OrgClaim       string // IAM_ORG_CLAIM, default "owner"
	AdminOrg       string // IAM_ADMIN_ORG, default "admin"
	OrgAdminClaim  string // IAM_ORG_ADMIN_CLAIM, default "isAdmin"
	GroupsClaim    string // IAM_GROUPS_CLAIM, default "groups"
	OrgGroupPrefix string // IAM_ORG_GROUP_PREFIX, default "" (orgs from OrgClaim)
}

// ConfigFromEnv reads the settings documented on Config from getenv
// (os.Getenv in production). It returns an error naming the variable for a
// malformed value; an absent DEPLOY_PUBLIC_URL is not an error (sign-in is
// then disabled by New, which says so).
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }
	cfg := Config{
		Issuer:       get("IAM_ENDPOINT"),
		ClientID:     get("DEPLOY_IAM_CLIENT_ID"),
		ClientSecret: get("DEPLOY_IAM_CLIENT_SECRET"),
		CLIClientID:  get("DEPLOY_IAM_CLI_CLIENT_ID"),
		PublicURL:    get("DEPLOY_PUBLIC_URL"),
		Claims: ClaimMapping{
			OrgClaim:       get("IAM_ORG_CLAIM"),
			AdminOrg:       get("IAM_ADMIN_ORG"),
			OrgAdminClaim:  get("IAM_ORG_ADMIN_CLAIM"),
			GroupsClaim:    get("IAM_GROUPS_CLAIM"),
			OrgGroupPrefix: get("IAM_ORG_GROUP_PREFIX"),
		},
	}
	cfg.ExtraAudiences = splitList(get("DEPLOY_IAM_EXTRA_AUDIENCES"))
	cfg.Scopes = splitList(get("DEPLOY_IAM_SCOPES"))
	cfg.Algorithms = splitList(get("DEPLOY_IAM_SIGNING_ALGS"))
	if k := get("DEPLOY_COOKIE_KEY"); k != "" {
		key, err := ParseCookieKey(k)
		if err != nil {
			return Config{}, fmt.Errorf("DEPLOY_COOKIE_KEY: %w", err)
		}
		cfg.CookieKey = key
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// ParseCookieKey decodes DEPLOY_COOKIE_KEY: a string of only hex digits (even
// length) is hex, anything else is base64 (standard or URL alphabet, padded
// or not). The result must be at least MinCookieKeyBytes long.
func ParseCookieKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	var key []byte
	var err error
	if isHex(s) {
		key, err = hex.DecodeString(s)
	} else {
		key, err = decodeBase64(s)
	}
	if err != nil {
		return nil, errors.New("not valid hex or base64")
	}
	if len(key) < MinCookieKeyBytes {
		return nil, fmt.Errorf("%d bytes of key material, need at least %d (e.g. openssl rand -base64 32)", len(key), MinCookieKeyBytes)
	}
	return key, nil
}

func isHex(s string) bool {
	if s == "" || len(s)%2 != 0 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
			return false
		}
	}
	return true
}

func decodeBase64(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("invalid base64")
}

// splitList splits on commas and white space, dropping empty items.
func splitList(s string) []string {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
	if len(f) == 0 {
		return nil
	}
	return f
}

func (c Config) withDefaults() Config {
	if c.Issuer == "" {
		c.Issuer = DefaultIssuer
	}
	if c.ClientID == "" {
		c.ClientID = DefaultClientID
	}
	if len(c.Scopes) == 0 {
		c.Scopes = slices.Clone(DefaultScopes)
	}
	if len(c.Algorithms) == 0 {
		c.Algorithms = slices.Clone(DefaultAlgorithms)
	}
	if c.Claims.OrgClaim == "" {
		c.Claims.OrgClaim = DefaultOrgClaim
	}
	if c.Claims.AdminOrg == "" {
		c.Claims.AdminOrg = DefaultAdminOrg
	}
	if c.Claims.OrgAdminClaim == "" {
		c.Claims.OrgAdminClaim = DefaultOrgAdminClaim
	}
	if c.Claims.GroupsClaim == "" {
		c.Claims.GroupsClaim = DefaultGroupsClaim
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.DiscoveryRetry <= 0 {
		c.DiscoveryRetry = time.Second
	}
	if c.CacheSize <= 0 {
		c.CacheSize = 10000
	}
	return c
}

// validate checks everything but the presence of PublicURL (whose absence
// disables sign-in rather than failing start). Errors name the variable.
func (c Config) validate() error {
	if err := checkIssuer(c.Issuer); err != nil {
		return fmt.Errorf("IAM_ENDPOINT: %w", err)
	}
	if c.PublicURL != "" {
		if _, err := parsePublicURL(c.PublicURL); err != nil {
			return fmt.Errorf("DEPLOY_PUBLIC_URL: %w", err)
		}
	}
	if !slices.Contains(c.Scopes, "openid") {
		return fmt.Errorf("DEPLOY_IAM_SCOPES: must include openid, got %q", strings.Join(c.Scopes, " "))
	}
	for _, a := range c.Algorithms {
		if !slices.Contains(knownAlgorithms, a) {
			return fmt.Errorf("DEPLOY_IAM_SIGNING_ALGS: %q is not an accepted algorithm (one of %s)", a, strings.Join(knownAlgorithms, ", "))
		}
	}
	if c.CookieKey != nil && len(c.CookieKey) < MinCookieKeyBytes {
		return fmt.Errorf("DEPLOY_COOKIE_KEY: %d bytes of key material, need at least %d", len(c.CookieKey), MinCookieKeyBytes)
	}
	if c.Claims.AdminOrg != "" && !validOrg(c.Claims.AdminOrg) {
		return fmt.Errorf("IAM_ADMIN_ORG: %q is not a valid organization name (lower-case letters, digits and '-')", c.Claims.AdminOrg)
	}
	return nil
}

// checkIssuer accepts an absolute https URL, or http for a loopback host.
func checkIssuer(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q is not an absolute issuer URL", s)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if IsLoopbackHost(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("%q must be https (plain http is allowed only for a loopback issuer)", s)
	default:
		return fmt.Errorf("%q must be an https URL", s)
	}
}

// publicURL is a parsed DEPLOY_PUBLIC_URL.
type publicURL struct {
	origin string // scheme://host[:port], lower-case, no default port
	secure bool   // cookies carry the Secure attribute
}

func parsePublicURL(s string) (publicURL, error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || u.Opaque != "" {
		return publicURL{}, fmt.Errorf("%q is not an absolute URL like https://deploy.example.com", s)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return publicURL{}, fmt.Errorf("%q must be an origin only (no path, query or fragment)", s)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !IsLoopbackHost(u.Hostname()) {
			return publicURL{}, fmt.Errorf("%q must be https (plain http is allowed only for 127.0.0.1, [::1] or localhost)", s)
		}
	default:
		return publicURL{}, fmt.Errorf("%q must be an https URL", s)
	}
	o, ok := Origin(s)
	if !ok {
		return publicURL{}, fmt.Errorf("%q is not an absolute URL", s)
	}
	return publicURL{origin: o, secure: u.Scheme == "https"}, nil
}

// Origin returns the normalized origin (scheme://host[:port], lower-case,
// default port dropped) of an absolute http(s) URL.
func Origin(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", false
	}
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host, true
}

// IsLoopbackHost reports whether a host (no port) names this machine:
// localhost or a loopback IP.
func IsLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
