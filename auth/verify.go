package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/hashicorp/golang-lru/v2/expirable"
)

// maxCacheEntryLife bounds how long a verified token is trusted without
// checking its signature again, whatever its exp says.
const maxCacheEntryLife = 10 * time.Minute

// cachedPrincipal is a verified token's Principal and the instant the entry
// stops being usable (never after the token's exp).
type cachedPrincipal struct {
	p     *Principal
	until time.Time
}

// Verify checks a raw ID token (signature by the issuer's keys with an
// allowed algorithm, issuer, audience = ClientID or an extra audience,
// expiry) and maps its claims to a Principal. Results are cached by the
// token's SHA-256 until the token's exp (at most 10 minutes), and exp is
// checked again on every hit. Errors are ErrDisabled, ErrTokenExpired or
// ErrTokenRefused, wrapped with the cause. The Principal is the caller's
// own copy.
func (a *Authenticator) Verify(ctx context.Context, raw string) (*Principal, error) {
	p, err := a.VerifyShared(ctx, raw)
	if err != nil {
		return nil, err
	}
	return p.clone(), nil
}

// VerifyShared is Verify without the copy: the Principal is the cache's,
// shared with every request presenting the same token, and must not be
// changed (Principal is immutable by contract). The request path uses it,
// so a request signed in by a cached token allocates nothing here.
func (a *Authenticator) VerifyShared(ctx context.Context, raw string) (*Principal, error) {
	prov, err := a.current()
	if err != nil {
		return nil, err
	}
	if raw == "" {
		return nil, wrapKind(ErrTokenRefused, errors.New("empty token"))
	}
	key := credentialKey(raw)
	now := a.now()
	if p := a.cached(a.verified, key, now); p != nil {
		return p, nil
	}
	a.cacheMisses.Add(1)
	p, _, err := a.verifyToken(ctx, prov, raw, now)
	if err != nil {
		return nil, err
	}
	a.verified.Add(key, cachedPrincipal{p: p, until: minTime(p.Expiry, now.Add(maxCacheEntryLife))})
	return p, nil
}

// keyBufs are the buffers credentialKey hashes in.
var keyBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxKeyBuf is the largest buffer credentialKey keeps for the next call:
// the largest session (maxSessionChunks cookies) fits.
const maxKeyBuf = 16 << 10

// credentialKey is the SHA-256 of parts, concatenated: the key under which
// a token or a session is cached, so that no cache holds a credential
// itself. The bytes are hashed in a pooled buffer, wiped before it goes
// back, rather than in a copy made per call.
func credentialKey(parts ...string) [32]byte {
	bp := keyBufs.Get().(*[]byte)
	b := (*bp)[:0]
	for _, s := range parts {
		b = append(b, s...)
	}
	key := sha256.Sum256(b)
	clear(b)
	if cap(b) <= maxKeyBuf {
		*bp = b
		keyBufs.Put(bp)
	}
	return key
}

// verifyToken does the uncached verification and returns the Principal and
// the token's nonce.
func (a *Authenticator) verifyToken(ctx context.Context, prov *provider, raw string, now time.Time) (*Principal, string, error) {
	tok, err := prov.verifier.Verify(oidc.ClientContext(ctx, a.cfg.HTTPClient), raw)
	if err != nil {
		var exp *oidc.TokenExpiredError
		if errors.As(err, &exp) {
			return nil, "", wrapKind(ErrTokenExpired, err)
		}
		return nil, "", wrapKind(ErrTokenRefused, err)
	}
	if !a.audienceAllowed(tok.Audience) {
		return nil, "", wrapKind(ErrTokenRefused, fmt.Errorf("audience %q is not %q or an extra audience", tok.Audience, a.cfg.ClientID))
	}
	// go-oidc accepts exp == now; a token at its exp is over here.
	if !now.Before(tok.Expiry) {
		return nil, "", wrapKind(ErrTokenExpired, fmt.Errorf("expired at %s", tok.Expiry.UTC().Format(time.RFC3339)))
	}
	var raws rawClaims
	if err := tok.Claims(&raws); err != nil {
		return nil, "", wrapKind(ErrTokenRefused, fmt.Errorf("claims: %w", err))
	}
	p, err := a.cfg.Claims.principalFromClaims(raws, tok.Issuer, tok.Subject, tok.Expiry)
	if err != nil {
		return nil, "", wrapKind(ErrTokenRefused, fmt.Errorf("claims: %w", err))
	}
	if p.Subject == "" {
		return nil, "", wrapKind(ErrTokenRefused, errors.New("no subject"))
	}
	return p, tok.Nonce, nil
}

// rawClaims keeps the token payload as is for principalFromClaims.
type rawClaims []byte

func (r *rawClaims) UnmarshalJSON(b []byte) error {
	*r = append((*r)[:0], b...)
	return nil
}

func (a *Authenticator) audienceAllowed(aud []string) bool {
	for _, v := range aud {
		if v == a.cfg.ClientID || (v == a.cfg.CLIClientID && v != "") || slices.Contains(a.cfg.ExtraAudiences, v) {
			return true
		}
	}
	return false
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// CacheStats are the verified-token cache's counters since start: a hit is
// a token answered from the cache, a miss one verified against the
// issuer's keys.
type CacheStats struct {
	Hits, Misses uint64
}

// CacheStats returns the token cache's counters. Safe for concurrent use.
func (a *Authenticator) CacheStats() CacheStats {
	return CacheStats{Hits: a.cacheHits.Load(), Misses: a.cacheMisses.Load()}
}

// cached is the Principal cache holds under key while it is still good at
// now (a hit, counted), nil otherwise; an entry past its end is removed.
func (a *Authenticator) cached(cache *expirable.LRU[[32]byte, cachedPrincipal], key [32]byte, now time.Time) *Principal {
	c, ok := cache.Get(key)
	if !ok {
		return nil
	}
	if !now.Before(c.until) {
		cache.Remove(key)
		return nil
	}
	a.cacheHits.Add(1)
	return c.p
}
