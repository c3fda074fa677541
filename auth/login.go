package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/hashicorp/golang-lru/v2/expirable"
	"golang.org/x/oauth2"
)

// Login is the start of a sign-in: send the browser to AuthURL with Cookie
// set.
type Login struct {
	AuthURL string
	Cookie  *http.Cookie
}

// StartLogin begins an authorization-code flow with PKCE (S256), a fresh
// state and nonce (256 bits each from crypto/rand), and the sanitized return
// path, all kept in a sealed flow cookie valid for FlowLifetime. The error is
// ErrDisabled (with the reason) when sign-in is off.
func (a *Authenticator) StartLogin(returnTo string) (*Login, error) {
	prov, err := a.current()
	if err != nil {
		return nil, err
	}
	f := flowState{
		State:    randomToken(),
		Nonce:    randomToken(),
		Verifier: oauth2.GenerateVerifier(),
		Return:   SafeReturnPath(returnTo),
		IssuedAt: a.now().Unix(),
	}
	u := prov.oauth.AuthCodeURL(f.State, oidc.Nonce(f.Nonce), oauth2.S256ChallengeOption(f.Verifier))
	return &Login{AuthURL: u, Cookie: a.flowCookie(f)}, nil
}

// Completed is a finished sign-in: set Cookies (the session) and send the
// browser to ReturnTo, a safe same-site path.
type Completed struct {
	Principal *Principal
	Cookies   []*http.Cookie
	ReturnTo  string
}

// FinishLogin completes the flow started by StartLogin from the callback
// request r: the flow cookie must open and be fresh, the returned state must
// match, the flow must not have been completed before, the provider must
// have answered with a code, the code is exchanged with the PKCE verifier,
// and the ID token is verified (as Verify does) with the flow's nonce. The
// caller must also set ClearFlowCookie, whatever the outcome.
//
// Errors, by kind: ErrDisabled, ErrNoFlow, ErrFlowExpired, ErrStateMismatch,
// ErrReplayed, ErrProviderRefused, ErrMissingCode, ErrExchangeRefused,
// ErrProviderUnreachable, ErrTokenRefused, ErrTokenExpired,
// ErrSessionTooLarge.
func (a *Authenticator) FinishLogin(ctx context.Context, r *http.Request) (*Completed, error) {
	prov, err := a.current()
	if err != nil {
		return nil, err
	}
	f, err := a.openFlow(r)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.State)) != 1 {
		return nil, wrapKind(ErrStateMismatch, nil)
	}
	if !a.consumed.consume(f.State, time.Unix(f.IssuedAt, 0).Add(FlowLifetime), a.now()) {
		return nil, wrapKind(ErrReplayed, nil)
	}
	if e := q.Get("error"); e != "" {
		// The code is safe to log; the description is the provider's text.
		return nil, wrapKind(ErrProviderRefused, fmt.Errorf("error=%q", truncate(e, 64)))
	}
	code := q.Get("code")
	if code == "" {
		return nil, wrapKind(ErrMissingCode, nil)
	}
	tok, err := prov.oauth.Exchange(oidc.ClientContext(ctx, a.cfg.HTTPClient), code, oauth2.VerifierOption(f.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			status := 0
			if re.Response != nil {
				status = re.Response.StatusCode
			}
			return nil, wrapKind(ErrExchangeRefused, fmt.Errorf("token endpoint answered %d error=%q", status, truncate(re.ErrorCode, 64)))
		}
		return nil, wrapKind(ErrProviderUnreachable, errors.New("token endpoint not reachable"))
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, wrapKind(ErrTokenRefused, errors.New("no id_token in the token response"))
	}
	now := a.now()
	p, nonce, err := a.verifyToken(ctx, prov, raw, now)
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare([]byte(nonce), []byte(f.Nonce)) != 1 {
		return nil, wrapKind(ErrTokenRefused, errors.New("nonce mismatch"))
	}
	until := minTime(p.Expiry, now.Add(MaxSessionLifetime))
	cookies, err := a.sessionCookies(raw, until)
	if err != nil {
		return nil, err
	}
	p.Expiry = until
	return &Completed{Principal: p, Cookies: cookies, ReturnTo: f.Return}, nil
}

// SessionPrincipal resolves the Principal of r's session cookie: the cookie
// must open with this server's key and be within its lifetime, and the ID
// token inside is verified as Verify does. Errors: ErrNoSession (no cookie),
// ErrSessionInvalid, ErrDisabled, ErrTokenExpired, ErrTokenRefused.
//
// An opened session is cached by the SHA-256 of its sealed value, never by
// the token, until the earlier of the session's end and the token's exp (at
// most 10 minutes, as a verified token), checked on every hit; past it the
// cookie is opened and its token verified again. The Principal, whose
// Expiry is that earlier instant, is the cache's: shared with every request
// presenting the same cookie, it must not be changed.
func (a *Authenticator) SessionPrincipal(ctx context.Context, r *http.Request) (*Principal, error) {
	if _, err := a.current(); err != nil {
		if CarriesSessionCookie(r) {
			return nil, err
		}
		return nil, ErrNoSession
	}
	chunks, n := a.sessionChunks(r)
	if n == 0 {
		return nil, ErrNoSession
	}
	key := credentialKey(chunks[:n]...)
	now := a.now()
	if p := a.cached(a.sessions, key, now); p != nil {
		return p, nil
	}
	s, err := a.openSession(chunks[:n])
	if err != nil {
		return nil, err
	}
	shared, err := a.VerifyShared(ctx, s.Token)
	if err != nil {
		return nil, err
	}
	p := shared.clone()
	p.Expiry = minTime(p.Expiry, time.Unix(s.Until, 0))
	a.sessions.Add(key, cachedPrincipal{p: p, until: minTime(p.Expiry, now.Add(maxCacheEntryLife))})
	return p, nil
}

// randomToken is 256 bits from crypto/rand, base64url.
func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// consumedFlowsSize bounds the record of completed flows. A flow evicted
// early by a flood of sign-ins could be presented again, but its code is
// then refused by the provider (codes are single use).
const consumedFlowsSize = 100_000

// consumedFlows records the state of every completed flow until the flow
// cookie's own expiry, so a replayed cookie is refused even when the client
// re-sends it. It is per process: across replicas, the provider's single-use
// codes are the guard.
type consumedFlows struct {
	mu   sync.Mutex
	seen *expirable.LRU[string, time.Time] // state → when the record may go
}

func newConsumedFlows(size int) *consumedFlows {
	// TTL 0: no sweeper goroutine; each entry's deadline is checked on use.
	return &consumedFlows{seen: expirable.NewLRU[string, time.Time](size, nil, 0)}
}

// consume records state until until and reports whether it was new.
func (c *consumedFlows) consume(state string, until, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if exp, ok := c.seen.Get(state); ok && now.Before(exp) {
		return false
	}
	c.seen.Add(state, until)
	return true
}
