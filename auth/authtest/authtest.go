// Package authtest helps tests sign in against an in-process mockoidc
// provider: User is an identity whose ID token carries the claims the test
// chose, IDToken signs a token as the provider's token endpoint would, and
// LogBuffer captures the log lines of the code under test.
//
// It imports nothing of this module, so the auth package's own tests can use
// it as well as every package above auth.
package authtest

import (
	"bytes"
	"encoding/json"
	"maps"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"
)

// User is a mockoidc user whose ID token carries extra claims.
type User struct {
	Subject string
	// Extra are the ID token's claims besides the registered ones (for
	// deployd, e.g. {"owner": "acme", "isAdmin": true}). The field is not
	// named Claims because mockoidc.User has a method of that name.
	Extra map[string]any
}

var _ mockoidc.User = User{}

// ID is the subject.
func (u User) ID() string { return u.Subject }

// Userinfo is the userinfo answer: the subject only.
func (u User) Userinfo([]string) ([]byte, error) {
	return json.Marshal(map[string]string{"sub": u.Subject})
}

// Claims are mockoidc's base claims with u.Extra laid over them.
func (u User) Claims(_ []string, base *mockoidc.IDTokenClaims) (jwt.Claims, error) {
	b, err := json.Marshal(base)
	if err != nil {
		return nil, err
	}
	m := jwt.MapClaims{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	maps.Copy(m, u.Extra)
	return m, nil
}

// IDToken is an ID token for u signed by m's key, as m's token endpoint
// would issue it at now, valid for ttl (negative: already expired). Its
// claims are iss, aud, sub, iat and exp, then u.Extra, then each of extra
// in order; a later claim replaces an earlier one of the same name (so extra
// can name another issuer or audience).
func IDToken(m *mockoidc.MockOIDC, u User, now time.Time, ttl time.Duration, extra ...map[string]any) (string, error) {
	claims := jwt.MapClaims{
		"iss": m.Issuer(), "aud": m.ClientID, "sub": u.Subject,
		"iat": now.Unix(), "exp": now.Add(ttl).Unix(),
	}
	maps.Copy(claims, u.Extra)
	for _, e := range extra {
		maps.Copy(claims, e)
	}
	return m.Keypair.SignJWT(claims)
}

// LogBuffer is a bytes.Buffer that a logger (or a process's output) writes
// to while the test reads it. It is safe for concurrent use; the zero value
// is empty and ready.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
