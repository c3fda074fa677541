package idp

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/hanzoai/deploy/auth"
)

// UserParam is the query parameter the sign-in page adds to the
// authorization request: the subject of the chosen user.
const UserParam = "demo_user"

// CLIClientID is the public client `deployd login` signs in with: it
// uses PKCE and no secret, and may redirect only to a loopback address.
const CLIClientID = "deployd-cli"

// TokenLifetime is how long the ID tokens the provider issues are valid.
const TokenLifetime = 8 * time.Hour

// IdP is a running demo identity provider.
type IdP struct {
	m     *mockoidc.MockOIDC
	users []User
	log   *slog.Logger

	// mu serializes every request to mockoidc: its session store is a plain
	// map, and a chosen user must reach the authorization that chose it.
	mu sync.Mutex

	closeOnce sync.Once
	closeErr  error
	done      chan struct{}
	wg        sync.WaitGroup
}

// Start runs the provider on a free port of 127.0.0.1 until ctx ends or
// Close is called. It logs, loudly, that its identities are for the demo.
func Start(ctx context.Context, log *slog.Logger) (*IdP, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	m, err := mockoidc.NewServer(key)
	if err != nil {
		return nil, fmt.Errorf("identity provider: %w", err)
	}
	m.AccessTTL, m.RefreshTTL = TokenLifetime, TokenLifetime
	m.CodeChallengeMethodsSupported = []string{"S256"}
	p := &IdP{m: m, users: Users(), log: log, done: make(chan struct{})}
	if err := m.AddMiddleware(func(next http.Handler) http.Handler { return auth.LoopbackHostOnly(p.front(next)) }); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("identity provider: listen: %w", err)
	}
	if err := m.Start(ln, nil); err != nil {
		ln.Close()
		return nil, fmt.Errorf("identity provider: %w", err)
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		select {
		case <-ctx.Done():
			p.shutdown()
		case <-p.done:
		}
	}()
	var names []string
	for _, u := range p.users {
		names = append(names, u.Username+" ("+u.Org+")")
	}
	log.Warn("DEMO IDENTITY PROVIDER: these are demo identities, not real accounts; anyone who can open its sign-in page can sign in as any of them, including a SuperAdmin. It exists only in `deployd demo`.",
		"issuer", p.Issuer(), "users", names)
	return p, nil
}

// Issuer is the provider's issuer URL (plain http on loopback, which
// auth.Config accepts).
func (p *IdP) Issuer() string { return p.m.Issuer() }

// ClientID is the one client the provider knows, random per Start.
func (p *IdP) ClientID() string { return p.m.ClientID }

// ClientSecret is the client's secret, random per Start.
func (p *IdP) ClientSecret() string { return p.m.ClientSecret }

// Users are the demo identities the sign-in page offers.
func (p *IdP) Users() []User { return append([]User(nil), p.users...) }

// AuthConfig is the sign-in configuration of a deployd reachable at
// publicURL (e.g. http://127.0.0.1:8080) that signs in with this provider.
// The claim mapping is auth's default (org from owner, SuperAdmin for org
// admin, OrgAdmin from isAdmin), which the demo users carry.
func (p *IdP) AuthConfig(publicURL string) auth.Config {
	return auth.Config{
		Issuer:       p.Issuer(),
		ClientID:     p.ClientID(),
		ClientSecret: p.ClientSecret(),
		CLIClientID:  CLIClientID,
		PublicURL:    publicURL,
		Scopes:       []string{"openid", "profile", "email", "groups"},
	}
}

// Close stops the provider. Idempotent.
func (p *IdP) Close() error {
	p.shutdown()
	p.wg.Wait()
	return p.closeErr
}

func (p *IdP) shutdown() {
	p.closeOnce.Do(func() {
		close(p.done)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.m.Server.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.closeErr = err
		}
	})
}

func (p *IdP) user(subject string) (User, bool) {
	for _, u := range p.users {
		if u.Subject == subject {
			return u, true
		}
	}
	return User{}, false
}

// front is the middleware in front of every mockoidc endpoint: the sign-in
// page at the authorization endpoint, and one request at a time into
// mockoidc.
func (p *IdP) front(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == mockoidc.AuthorizationEndpoint {
			p.authorize(w, r, next)
			return
		}
		if r.URL.Path == mockoidc.TokenEndpoint && !p.cliToken(w, r) {
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// authorize shows the sign-in page for an authorization request mockoidc
// would accept; once a user is chosen, it queues that user and lets
// mockoidc answer the same request (which redirects back with a code).
// Requests mockoidc would refuse go to it unchanged, so its error answers
// stay as they are.
func (p *IdP) authorize(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "malformed authorization request", http.StatusBadRequest)
		return
	}
	if r.Form.Get("client_id") == CLIClientID {
		if !loopbackRedirect(r.Form.Get("redirect_uri")) {
			http.Error(w, "the CLI's client redirects to a loopback address only, like "+auth.CLIRedirectURI, http.StatusBadRequest)
			return
		}
		r.Form.Set("client_id", p.m.ClientID) // mockoidc knows one client
	}
	subject := r.Form.Get(UserParam)
	if subject == "" && p.acceptable(r) {
		p.page(w, r)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.clearQueue() // a refused authorization must not leave its user for the next one
	if subject != "" {
		u, ok := p.user(subject)
		if !ok {
			http.Error(w, "unknown demo user", http.StatusBadRequest)
			return
		}
		p.log.Info("demo sign-in: a demo identity was chosen", "user", u.Username, "org", u.Org, "orgAdmin", u.OrgAdmin)
		p.m.QueueUser(u)
	}
	next.ServeHTTP(w, r)
}

// acceptable reports whether mockoidc would grant r once a user is chosen
// (its own checks, in its order, short of the user).
func (p *IdP) acceptable(r *http.Request) bool {
	for _, k := range []string{"scope", "state", "client_id", "response_type", "redirect_uri"} {
		if r.Form.Get(k) == "" {
			return false
		}
	}
	return r.Form.Get("client_id") == p.m.ClientID && r.Form.Get("response_type") == "code"
}

func (p *IdP) clearQueue() {
	q := p.m.UserQueue
	q.Lock()
	q.Queue = nil
	q.Unlock()
}

// cliToken lets the CLI's public client use mockoidc's token endpoint,
// which knows one confidential client: a request from CLIClientID without
// a secret is made as that client (PKCE still binds the code to the CLI's
// verifier). It answers false when it has answered the request itself.
func (p *IdP) cliToken(w http.ResponseWriter, r *http.Request) bool {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "malformed token request", http.StatusBadRequest)
		return false
	}
	if r.PostForm.Get("client_id") != CLIClientID {
		return true
	}
	if r.PostForm.Get("client_secret") != "" {
		http.Error(w, "the CLI's client is public: it sends no secret", http.StatusUnauthorized)
		return false
	}
	if r.PostForm.Get("grant_type") == "authorization_code" && r.PostForm.Get("code_verifier") == "" {
		http.Error(w, "the CLI's client must use PKCE", http.StatusBadRequest)
		return false
	}
	for _, f := range []url.Values{r.Form, r.PostForm} {
		f.Set("client_id", p.m.ClientID)
		f.Set("client_secret", p.m.ClientSecret)
	}
	return true
}

// loopbackRedirect reports whether u is an http URL on a loopback address
// (any port) at auth.CLIRedirectURI's path.
func loopbackRedirect(u string) bool {
	ru, err := url.Parse(u)
	if err != nil || ru.Scheme != "http" || ru.User != nil {
		return false
	}
	want, _ := url.Parse(auth.CLIRedirectURI)
	return auth.IsLoopbackHost(ru.Hostname()) && ru.Path == want.Path
}
