// Package hydratest runs ORY Hydra, a real OpenID Connect provider, for
// end-to-end sign-in tests. Start launches the hydra binary built by
// hack/build-tools.sh (in-memory database, loopback ports) together with the
// small login and consent app Hydra expects its operator to supply; that app
// accepts every login as the Identity the test chose, with the claims the
// test gave it in the ID token.
//
// Everything Start creates is stopped by t.Cleanup: the hydra process group
// is killed and waited for, and the login app is closed. A missing binary
// skips the test (naming make test), or fails it when DEPLOYD_REQUIRE_TOOLS=1
// (naming make tools).
package hydratest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hanzoai/deploy/auth/authtest"
)

// Identity is who the login app signs in, and the extra claims of the ID
// token (for deployd, e.g. {"owner":"acme","isAdmin":false}).
type Identity struct {
	Subject string
	Claims  map[string]any
}

// Client is an OAuth2 client registered with Hydra.
type Client struct {
	ID     string
	Secret string // empty for a public client
}

// ClientOptions describe a client to create.
type ClientOptions struct {
	// RedirectURIs are the test's callback URLs (the helper adds its own,
	// used by IDToken).
	RedirectURIs []string
	// Public makes a client without a secret (token endpoint auth "none"),
	// which must use PKCE.
	Public bool
	// TokenLifespan, when set, is how long the client's ID and access
	// tokens live, from a code grant and from a refresh alike (Hydra's
	// per-client lifespans).
	TokenLifespan time.Duration
}

// Server is a running Hydra.
type Server struct {
	// Issuer is the issuer URL exactly as the discovery document states it.
	Issuer string
	// AdminURL is the base of Hydra's admin API.
	AdminURL string

	publicURL string
	appURL    string // the login/consent app
	http      *http.Client

	mu         sync.Mutex
	identities map[string]Identity
	current    string // subject signed in when a login names none
	appErr     error  // the first error of the login/consent app
}

// Binary returns the path of the hydra binary in $DEPLOYD_TOOLS (default
// ~/.cache/deployd/tools), skipping t when it is absent — or failing t when
// DEPLOYD_REQUIRE_TOOLS=1.
func Binary(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("DEPLOYD_TOOLS")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatalf("hydratest: no home folder to find the tools in: %v", err)
		}
		dir = filepath.Join(home, ".cache", "deployd", "tools")
	}
	p := filepath.Join(dir, "hydra")
	if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
		return p
	}
	if os.Getenv("DEPLOYD_REQUIRE_TOOLS") == "1" {
		t.Fatalf("hydratest: hydra not found at %s: build it with make tools (hack/build-tools.sh hydra)", p)
	}
	t.Skipf("hydratest: hydra not found at %s; make test builds and runs it", p)
	return ""
}

// Start runs Hydra and its login/consent app on free loopback ports and
// waits (at most 30 s) until both answer.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)

	appLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("hydratest: listen: %v", err)
	}
	s := &Server{
		appURL:     "http://" + appLn.Addr().String(),
		http:       &http.Client{Timeout: 10 * time.Second},
		identities: map[string]Identity{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", s.login)
	mux.HandleFunc("GET /consent", s.consent)
	mux.HandleFunc("GET /callback", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "signed in")
	})
	app := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go app.Serve(appLn) // returns when app.Close is called at cleanup
	t.Cleanup(func() { app.Close() })

	publicPort, adminPort := freePort(t), freePort(t)
	s.publicURL = "http://127.0.0.1:" + strconv.Itoa(publicPort)
	s.AdminURL = "http://127.0.0.1:" + strconv.Itoa(adminPort)
	secret := make([]byte, 32)
	rand.Read(secret)

	cmd := exec.Command(bin, "serve", "all", "--dev", "--sqa-opt-out")
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"DSN=memory",
		"LOG_LEVEL=warn",
		"URLS_SELF_ISSUER=" + s.publicURL + "/",
		"URLS_LOGIN=" + s.appURL + "/login",
		"URLS_CONSENT=" + s.appURL + "/consent",
		"SECRETS_SYSTEM=" + base64.RawURLEncoding.EncodeToString(secret),
		"SERVE_PUBLIC_HOST=127.0.0.1",
		"SERVE_PUBLIC_PORT=" + strconv.Itoa(publicPort),
		"SERVE_ADMIN_HOST=127.0.0.1",
		"SERVE_ADMIN_PORT=" + strconv.Itoa(adminPort),
	}
	out := &authtest.LogBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	setProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("hydratest: start %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // returns when hydra exits (killed at cleanup)
	t.Cleanup(func() {
		killProcessGroup(cmd)
		<-exited
		if t.Failed() {
			t.Logf("hydra output:\n%s", tail(out.String(), 8000))
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.ready(ctx) {
			break
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("hydratest: hydra exited before it was ready (%v):\n%s", err, tail(out.String(), 8000))
		case <-ctx.Done():
			t.Fatalf("hydratest: hydra not ready within 30 s:\n%s", tail(out.String(), 8000))
		case <-tick.C:
		}
	}
	return s
}

// ready reports whether the admin API is ready and discovery answers; it
// records the issuer.
func (s *Server) ready(ctx context.Context) bool {
	if err := s.do(ctx, http.MethodGet, s.AdminURL+"/health/ready", nil, nil); err != nil {
		return false
	}
	var doc struct {
		Issuer string `json:"issuer"`
	}
	if err := s.do(ctx, http.MethodGet, s.publicURL+"/.well-known/openid-configuration", nil, &doc); err != nil || doc.Issuer == "" {
		return false
	}
	s.Issuer = doc.Issuer
	return true
}

// SetIdentity makes id the account every following login signs in as
// (unless a login names another registered subject in login_hint).
func (s *Server) SetIdentity(id Identity) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.identities[id.Subject] = id
	s.current = id.Subject
}

// CreateClient registers an OAuth2 client through the admin API.
func (s *Server) CreateClient(t testing.TB, o ClientOptions) Client {
	t.Helper()
	body := map[string]any{
		"client_name":    "deployd-test",
		"grant_types":    []string{"authorization_code", "refresh_token"},
		"response_types": []string{"code"},
		"scope":          "openid profile email groups offline_access",
		"redirect_uris":  append(append([]string{}, o.RedirectURIs...), s.appURL+"/callback"),
	}
	if o.Public {
		body["token_endpoint_auth_method"] = "none"
	} else {
		body["token_endpoint_auth_method"] = "client_secret_basic"
	}
	var c struct {
		ID     string `json:"client_id"`
		Secret string `json:"client_secret"`
	}
	if err := s.do(t.Context(), http.MethodPost, s.AdminURL+"/admin/clients", body, &c); err != nil {
		t.Fatalf("hydratest: create client: %v", err)
	}
	if c.ID == "" || (!o.Public && c.Secret == "") {
		t.Fatalf("hydratest: create client: no id or secret in the answer")
	}
	if o.TokenLifespan > 0 {
		d := o.TokenLifespan.String()
		if err := s.do(t.Context(), http.MethodPut, s.AdminURL+"/admin/clients/"+url.PathEscape(c.ID)+"/lifespans", map[string]any{
			"authorization_code_grant_access_token_lifespan": d, "authorization_code_grant_id_token_lifespan": d,
			"refresh_token_grant_access_token_lifespan": d, "refresh_token_grant_id_token_lifespan": d,
		}, nil); err != nil {
			t.Fatalf("hydratest: set the client's token lifespans: %v", err)
		}
	}
	return Client{ID: c.ID, Secret: c.Secret}
}

// IDToken runs an authorization-code flow (with PKCE) for client c as id,
// through Hydra and the login app, and returns the ID token Hydra issues.
func (s *Server) IDToken(t testing.TB, c Client, id Identity) string {
	t.Helper()
	s.mu.Lock()
	s.identities[id.Subject] = id
	s.mu.Unlock()

	jar, _ := cookiejar.New(nil)
	callback := s.appURL + "/callback"
	browser := &http.Client{
		Jar:     jar,
		Timeout: 10 * time.Second,
		CheckRedirect: func(r *http.Request, _ []*http.Request) error {
			if strings.HasPrefix(r.URL.String(), callback) {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
	state, nonce, verifier := random(), random(), random()
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{
		"client_id":             {c.ID},
		"response_type":         {"code"},
		"scope":                 {"openid profile email"},
		"redirect_uri":          {callback},
		"state":                 {state},
		"nonce":                 {nonce},
		"login_hint":            {id.Subject},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
	}
	resp, err := browser.Get(s.publicURL + "/oauth2/auth?" + q.Encode())
	if err != nil {
		t.Fatalf("hydratest: authorize: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode/100 != 3 || loc == nil || loc.Query().Get("code") == "" || loc.Query().Get("state") != state {
		where := ""
		if loc != nil {
			where = loc.Scheme + "://" + loc.Host + loc.Path
		}
		t.Fatalf("hydratest: authorize ended with %d to %q: %s (login app: %v)", resp.StatusCode, where, b, s.err())
	}

	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {loc.Query().Get("code")},
		"redirect_uri":  {callback},
		"code_verifier": {verifier},
	}
	if c.Secret == "" {
		form.Set("client_id", c.ID)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.publicURL+"/oauth2/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if c.Secret != "" {
		req.SetBasicAuth(url.QueryEscape(c.ID), url.QueryEscape(c.Secret))
	}
	resp, err = s.http.Do(req)
	if err != nil {
		t.Fatalf("hydratest: token: %v", err)
	}
	defer resp.Body.Close()
	var tok struct {
		IDToken string `json:"id_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || resp.StatusCode != http.StatusOK || tok.IDToken == "" {
		t.Fatalf("hydratest: token endpoint answered %d without an id_token", resp.StatusCode)
	}
	return tok.IDToken
}

// login accepts Hydra's login request as the hinted or current identity.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	challenge := r.URL.Query().Get("login_challenge")
	var req struct {
		Skip    bool   `json:"skip"`
		Subject string `json:"subject"`
		OIDC    struct {
			LoginHint string `json:"login_hint"`
		} `json:"oidc_context"`
	}
	if err := s.do(r.Context(), http.MethodGet, s.AdminURL+"/admin/oauth2/auth/requests/login?login_challenge="+url.QueryEscape(challenge), nil, &req); err != nil {
		s.fail(w, fmt.Errorf("get login request: %w", err))
		return
	}
	subject := req.Subject
	if !req.Skip {
		s.mu.Lock()
		subject = s.current
		if _, ok := s.identities[req.OIDC.LoginHint]; ok {
			subject = req.OIDC.LoginHint
		}
		s.mu.Unlock()
	}
	if subject == "" {
		s.fail(w, errors.New("login: no identity set (call SetIdentity)"))
		return
	}
	var out struct {
		RedirectTo string `json:"redirect_to"`
	}
	if err := s.do(r.Context(), http.MethodPut, s.AdminURL+"/admin/oauth2/auth/requests/login/accept?login_challenge="+url.QueryEscape(challenge),
		map[string]any{"subject": subject, "remember": false}, &out); err != nil {
		s.fail(w, fmt.Errorf("accept login: %w", err))
		return
	}
	http.Redirect(w, r, out.RedirectTo, http.StatusFound)
}

// consent grants what was asked and puts the identity's claims in the ID
// token.
func (s *Server) consent(w http.ResponseWriter, r *http.Request) {
	challenge := r.URL.Query().Get("consent_challenge")
	var req struct {
		Subject  string   `json:"subject"`
		Scope    []string `json:"requested_scope"`
		Audience []string `json:"requested_access_token_audience"`
	}
	if err := s.do(r.Context(), http.MethodGet, s.AdminURL+"/admin/oauth2/auth/requests/consent?consent_challenge="+url.QueryEscape(challenge), nil, &req); err != nil {
		s.fail(w, fmt.Errorf("get consent request: %w", err))
		return
	}
	s.mu.Lock()
	id, ok := s.identities[req.Subject]
	s.mu.Unlock()
	if !ok {
		s.fail(w, fmt.Errorf("consent: unknown subject %q", req.Subject))
		return
	}
	claims := id.Claims
	if claims == nil {
		claims = map[string]any{}
	}
	var out struct {
		RedirectTo string `json:"redirect_to"`
	}
	if err := s.do(r.Context(), http.MethodPut, s.AdminURL+"/admin/oauth2/auth/requests/consent/accept?consent_challenge="+url.QueryEscape(challenge),
		map[string]any{
			"grant_scope":                 req.Scope,
			"grant_access_token_audience": req.Audience,
			"remember":                    false,
			"session":                     map[string]any{"id_token": claims},
		}, &out); err != nil {
		s.fail(w, fmt.Errorf("accept consent: %w", err))
		return
	}
	http.Redirect(w, r, out.RedirectTo, http.StatusFound)
}

func (s *Server) fail(w http.ResponseWriter, err error) {
	s.mu.Lock()
	if s.appErr == nil {
		s.appErr = err
	}
	s.mu.Unlock()
	http.Error(w, "hydratest: "+err.Error(), http.StatusInternalServerError)
}

func (s *Server) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appErr
}

// do sends a JSON request and decodes a JSON answer into out (when set);
// any status other than 2xx is an error.
func (s *Server) do(ctx context.Context, method, u string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, u, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("hydratest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// random is 32 random bytes, base64url (43 characters; Hydra wants at least 8).
func random() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}
