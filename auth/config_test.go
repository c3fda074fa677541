package auth

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestConfigFromEnvDefaults(t *testing.T) {
	cfg, err := ConfigFromEnv(envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	got := struct {
		Issuer, ClientID, Secret, Public string
		Scopes, Algs                     []string
		Claims                           ClaimMapping
		Key                              []byte
	}{cfg.Issuer, cfg.ClientID, cfg.ClientSecret, cfg.PublicURL, cfg.Scopes, cfg.Algorithms, cfg.Claims, cfg.CookieKey}
	want := got
	want.Issuer, want.ClientID, want.Secret, want.Public = "https://hanzo.id", "admin-console", "", ""
	want.Scopes, want.Algs = []string{"openid", "profile", "email"}, []string{"RS256", "ES256"}
	want.Claims = ClaimMapping{OrgClaim: "owner", AdminOrg: "admin", OrgAdminClaim: "isAdmin", GroupsClaim: "groups"}
	want.Key = nil
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("defaults (-want +got):\n%s", diff)
	}
}

func TestConfigFromEnvValues(t *testing.T) {
	key := bytes.Repeat([]byte{0xab}, 32)
	cfg, err := ConfigFromEnv(envOf(map[string]string{
		"IAM_ENDPOINT":               "http://127.0.0.1:5556/dex",
		"DEPLOY_IAM_CLIENT_ID":       "deployd",
		"DEPLOY_IAM_CLIENT_SECRET":   "s3cret",
		"DEPLOY_PUBLIC_URL":          "https://deploy.example.com/",
		"DEPLOY_IAM_EXTRA_AUDIENCES": "cli, api",
		"DEPLOY_IAM_SCOPES":          "openid groups",
		"DEPLOY_IAM_SIGNING_ALGS":    "ES256,EdDSA",
		"DEPLOY_COOKIE_KEY":          hex.EncodeToString(key),
		"IAM_ORG_CLAIM":              "tenant",
		"IAM_ADMIN_ORG":              "ops",
		"IAM_ORG_ADMIN_CLAIM":        "tenant_admin",
		"IAM_GROUPS_CLAIM":           "roles",
		"IAM_ORG_GROUP_PREFIX":       "org:",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Issuer != "http://127.0.0.1:5556/dex" || cfg.ClientID != "deployd" || cfg.ClientSecret != "s3cret" ||
		cfg.PublicURL != "https://deploy.example.com/" ||
		!cmp.Equal(cfg.ExtraAudiences, []string{"cli", "api"}) || !cmp.Equal(cfg.Scopes, []string{"openid", "groups"}) ||
		!cmp.Equal(cfg.Algorithms, []string{"ES256", "EdDSA"}) || !bytes.Equal(cfg.CookieKey, key) ||
		cfg.Claims != (ClaimMapping{OrgClaim: "tenant", AdminOrg: "ops", OrgAdminClaim: "tenant_admin", GroupsClaim: "roles", OrgGroupPrefix: "org:"}) {
		t.Fatalf("got %+v", cfg)
	}
}

func TestConfigFromEnvErrors(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string // the variable the error must name
	}{
		{map[string]string{"IAM_ENDPOINT": "http://id.example.com"}, "IAM_ENDPOINT"},
		{map[string]string{"IAM_ENDPOINT": "id.example.com"}, "IAM_ENDPOINT"},
		{map[string]string{"IAM_ENDPOINT": "ftp://id.example.com"}, "IAM_ENDPOINT"},
		{map[string]string{"IAM_ENDPOINT": "https://id.example.com/?x=1"}, "IAM_ENDPOINT"},
		{map[string]string{"DEPLOY_PUBLIC_URL": "http://deploy.example.com"}, "DEPLOY_PUBLIC_URL"},
		{map[string]string{"DEPLOY_PUBLIC_URL": "https://deploy.example.com/prefix"}, "DEPLOY_PUBLIC_URL"},
		{map[string]string{"DEPLOY_PUBLIC_URL": "deploy.example.com"}, "DEPLOY_PUBLIC_URL"},
		{map[string]string{"DEPLOY_PUBLIC_URL": "https://u:p@deploy.example.com"}, "DEPLOY_PUBLIC_URL"},
		{map[string]string{"DEPLOY_IAM_SCOPES": "profile email"}, "DEPLOY_IAM_SCOPES"},
		{map[string]string{"DEPLOY_IAM_SIGNING_ALGS": "HS256"}, "DEPLOY_IAM_SIGNING_ALGS"},
		{map[string]string{"DEPLOY_IAM_SIGNING_ALGS": "none"}, "DEPLOY_IAM_SIGNING_ALGS"},
		{map[string]string{"DEPLOY_COOKIE_KEY": "short"}, "DEPLOY_COOKIE_KEY"},
		{map[string]string{"DEPLOY_COOKIE_KEY": hex.EncodeToString(make([]byte, 16))}, "DEPLOY_COOKIE_KEY"},
		{map[string]string{"DEPLOY_COOKIE_KEY": "!!not base64!!"}, "DEPLOY_COOKIE_KEY"},
		{map[string]string{"IAM_ADMIN_ORG": "Admins"}, "IAM_ADMIN_ORG"},
	}
	for _, tc := range tests {
		_, err := ConfigFromEnv(envOf(tc.env))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want+":") {
			t.Errorf("ConfigFromEnv(%v) error = %v, want one naming %s", tc.env, err, tc.want)
		}
	}
}

func TestParseCookieKey(t *testing.T) {
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i * 7)
	}
	for _, s := range []string{
		hex.EncodeToString(key),
		strings.ToUpper(hex.EncodeToString(key)),
		base64.StdEncoding.EncodeToString(key),
		base64.RawStdEncoding.EncodeToString(key),
		base64.URLEncoding.EncodeToString(key),
		base64.RawURLEncoding.EncodeToString(key),
		"  " + base64.StdEncoding.EncodeToString(key) + "\n",
	} {
		got, err := ParseCookieKey(s)
		if err != nil || !bytes.Equal(got, key) {
			t.Errorf("ParseCookieKey(%q) = %x, %v, want %x", s, got, err, key)
		}
	}
}

func TestOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"https://Deploy.Example.com":      "https://deploy.example.com",
		"https://deploy.example.com:443/": "https://deploy.example.com",
		"http://127.0.0.1:80/x?y":         "http://127.0.0.1",
		"http://127.0.0.1:8080":           "http://127.0.0.1:8080",
		"HTTP://[::1]:9/":                 "http://[::1]:9",
		"null":                            "",
		"ftp://x":                         "",
		"//x":                             "",
	} {
		got, ok := Origin(in)
		if got != want || ok != (want != "") {
			t.Errorf("Origin(%q) = %q, %v, want %q", in, got, ok, want)
		}
	}
}
