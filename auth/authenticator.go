package auth

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/hashicorp/golang-lru/v2/expirable"
	"golang.org/x/oauth2"
)

// Authenticator signs users in with OIDC and turns tokens into Principals.
// It is safe for concurrent use. Build it with New; stop it with Close (or by
// cancelling the context given to New).
type Authenticator struct {
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	public  publicURL
	flow    *sealer
	session *sealer

	// reason is why sign-in is off for good (configuration); "" otherwise.
	reason string
	// ready holds what discovery produced; nil until it succeeded.
	ready   atomic.Pointer[provider]
	readyCh chan struct{}

	verified *expirable.LRU[[32]byte, cachedPrincipal]
	// sessions caches opened session cookies the same way, keyed by the
	// SHA-256 of the sealed value (login.go, SessionPrincipal).
	sessions *expirable.LRU[[32]byte, cachedPrincipal]
	consumed *consumedFlows
	// cacheHits and cacheMisses count Verify's answers from and past the
	// cache; a session answered from its cache counts as a hit.
	cacheHits, cacheMisses atomic.Uint64

	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed sync.Once
}

// firstDiscoveryTimeout bounds the discovery attempt New makes before it
// returns; later attempts run in the background.
const firstDiscoveryTimeout = 5 * time.Second

// provider is the result of a successful discovery.
type provider struct {
	oauth    oauth2.Config
	verifier *oidc.IDTokenVerifier
	issuer   string
}

// Status says whether sign-in works and, when it does not, why.
type Status struct {
	Enabled bool
	// Reason names the missing or failing setting when Enabled is false,
	// e.g. "sign-in disabled: DEPLOY_PUBLIC_URL is not set".
	Reason string
	// Issuer is the configured issuer URL.
	Issuer string
}

// New builds an Authenticator. It never fails and never falls back to a
// weaker mode: a missing public URL or a bad setting disables sign-in for
// good, and an issuer that cannot be discovered disables it until a
// background retry succeeds. While disabled, logins answer ErrDisabled and
// every token and cookie is refused. Status says which case applies.
//
// The retry goroutine is the only goroutine New starts; it exits when
// discovery succeeds, when ctx is cancelled, or on Close.
func New(ctx context.Context, cfg Config, log *slog.Logger) *Authenticator {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(ctx)
	a := &Authenticator{
		cfg:      cfg,
		log:      log,
		now:      cfg.Now,
		readyCh:  make(chan struct{}),
		cancel:   cancel,
		consumed: newConsumedFlows(consumedFlowsSize),
		// TTL 0: the package's TTL sweeper is a goroutine that never exits,
		// so each entry carries its own deadline, checked on every hit with
		// the injected clock. Size bounds memory.
		verified: expirable.NewLRU[[32]byte, cachedPrincipal](cfg.CacheSize, nil, 0),
		sessions: expirable.NewLRU[[32]byte, cachedPrincipal](cfg.CacheSize, nil, 0),
	}

	if err := cfg.validate(); err != nil {
		a.disable("sign-in disabled: " + err.Error())
		return a
	}
	if cfg.PublicURL == "" {
		a.disable("sign-in disabled: DEPLOY_PUBLIC_URL is not set")
		return a
	}
	a.public, _ = parsePublicURL(cfg.PublicURL) // validated above

	key := cfg.CookieKey
	if len(key) == 0 {
		key = make([]byte, 32)
		rand.Read(key)
		log.Warn("DEPLOY_COOKIE_KEY is not set: generated a random cookie key; sign-ins end when this process stops and are not shared with other replicas")
	}
	var err error
	if a.flow, err = newSealer(key, "flow"); err == nil {
		a.session, err = newSealer(key, "session")
	}
	if err != nil {
		a.disable("sign-in disabled: cookie key: " + err.Error())
		return a
	}

	first, cancelFirst := context.WithTimeout(ctx, firstDiscoveryTimeout)
	err = a.discover(first)
	cancelFirst()
	if err != nil {
		log.Warn("identity provider not reachable; sign-in disabled until it is, retrying in the background",
			slog.String("issuer", cfg.Issuer), slog.String("cause", truncate(err.Error(), 200)))
		a.wg.Add(1)
		go a.retryDiscovery(ctx)
	}
	return a
}

func (a *Authenticator) disable(reason string) {
	a.reason = reason
	a.log.Warn(reason)
}

// Status reports whether sign-in is enabled and why not.
func (a *Authenticator) Status() Status {
	s := Status{Issuer: a.cfg.Issuer}
	switch {
	case a.reason != "":
		s.Reason = a.reason
	case a.ready.Load() == nil:
		s.Reason = fmt.Sprintf("sign-in disabled: the identity provider %s (IAM_ENDPOINT) is not reachable yet", a.cfg.Issuer)
	default:
		s.Enabled = true
	}
	return s
}

// Ready is closed once sign-in is enabled. It never closes when sign-in is
// disabled by configuration.
func (a *Authenticator) Ready() <-chan struct{} { return a.readyCh }

// PublicOrigin is the normalized origin of DEPLOY_PUBLIC_URL ("" when unset
// or invalid).
func (a *Authenticator) PublicOrigin() string { return a.public.origin }

// ClientInfo is what a sign-in page may show of the configured client: the
// issuer, the client id and the scopes requested (no secret).
type ClientInfo struct {
	Issuer   string
	ClientID string
	// CLIClientID is the client `deployd login` uses ("" : ClientID).
	CLIClientID string
	Scopes      []string
}

// Client describes the configured OIDC client (the zero value when a is nil).
func (a *Authenticator) Client() ClientInfo {
	if a == nil {
		return ClientInfo{}
	}
	return ClientInfo{Issuer: a.cfg.Issuer, ClientID: a.cfg.ClientID, CLIClientID: a.cfg.CLIClientID, Scopes: slices.Clone(a.cfg.Scopes)}
}

// Close stops the discovery retry, if running, and waits for it. It is
// idempotent.
func (a *Authenticator) Close() {
	a.closed.Do(a.cancel)
	a.wg.Wait()
}

// current returns the discovered provider or ErrDisabled with the reason.
func (a *Authenticator) current() (*provider, error) {
	if p := a.ready.Load(); p != nil && a.reason == "" {
		return p, nil
	}
	return nil, &disabledError{reason: a.Status().Reason}
}

// discover runs OIDC discovery once and, on success, enables sign-in.
func (a *Authenticator) discover(ctx context.Context) error {
	ctx = oidc.ClientContext(ctx, a.cfg.HTTPClient)
	p, err := oidc.NewProvider(ctx, a.cfg.Issuer)
	if err != nil {
		return err
	}
	endpoint := p.Endpoint()
	if a.cfg.ClientSecret == "" {
		// A public client authenticates with client_id in the body and PKCE.
		endpoint.AuthStyle = oauth2.AuthStyleInParams
	}
	prov := &provider{
		issuer: a.cfg.Issuer,
		oauth: oauth2.Config{
			ClientID:     a.cfg.ClientID,
			ClientSecret: a.cfg.ClientSecret,
			Endpoint:     endpoint,
			RedirectURL:  strings.TrimSuffix(a.cfg.PublicURL, "/") + CallbackPath,
			Scopes:       a.cfg.Scopes,
		},
		// The audience is checked by verify itself (ClientID or one of
		// ExtraAudiences), hence SkipClientIDCheck.
		verifier: p.VerifierContext(ctx, &oidc.Config{
			SkipClientIDCheck:    true,
			SupportedSigningAlgs: a.cfg.Algorithms,
			Now:                  a.now,
		}),
	}
	a.ready.Store(prov)
	close(a.readyCh)
	a.log.Info("sign-in enabled", slog.String("issuer", a.cfg.Issuer),
		slog.String("clientID", a.cfg.ClientID), slog.String("publicURL", a.public.origin))
	return nil
}

// retryDiscovery retries discovery with exponential backoff (doubling from
// Config.DiscoveryRetry up to a minute) until it succeeds or ctx ends.
func (a *Authenticator) retryDiscovery(ctx context.Context) {
	defer a.wg.Done()
	wait := a.cfg.DiscoveryRetry
	t := time.NewTimer(wait)
	defer t.Stop()
	for attempt := 2; ; attempt++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := a.discover(ctx)
		if err == nil {
			return
		}
		wait = min(2*wait, time.Minute)
		a.log.Warn("identity provider still not reachable", slog.String("issuer", a.cfg.Issuer),
			slog.Int("attempt", attempt), slog.Duration("retryIn", wait), slog.String("cause", truncate(err.Error(), 200)))
		t.Reset(wait)
	}
}
