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
	"sync"
	"time"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/hanzoai/deploy/auth"
)

// UserParam is the query parameter the sign-in page adds to the
// authorization request: the subject of the chosen user.
const UserParam = "demo_user"

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
	if err := m.AddMiddleware(p.front); err != nil {
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
