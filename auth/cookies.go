package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

// Cookie names. With a Secure (https) public URL the session cookies carry
// the __Host- prefix (the browser then refuses them unless Secure, Path=/
// and host-only) and the flow cookie the __Secure- prefix; with a loopback
// http public URL they are used without prefix.
const (
	flowCookieName    = "deploy_flow"
	sessionCookieName = "deploy_session"

	// FlowCookiePath scopes the flow cookie to the sign-in routes.
	FlowCookiePath = "/v1/deploy"
	// FlowLifetime is how long a started sign-in may take.
	FlowLifetime = 10 * time.Minute
	// MaxSessionLifetime caps a session whatever the token's exp.
	MaxSessionLifetime = 24 * time.Hour

	// A session too large for one cookie is split over numbered cookies
	// deploy_session.0, .1, … of at most sessionChunkSize characters each
	// (well under the 4096 bytes browsers keep per cookie, attributes
	// included), and at most maxSessionChunks of them; a larger token is
	// ErrSessionTooLarge.
	sessionChunkSize = 3800
	maxSessionChunks = 4
)

func (a *Authenticator) cookieName(base string, hostOnly bool) string {
	if !a.public.secure {
		return base
	}
	if hostOnly {
		return "__Host-" + base
	}
	return "__Secure-" + base
}

func (a *Authenticator) flowName() string { return a.cookieName(flowCookieName, false) }

func (a *Authenticator) sessionName(i int) string {
	if a.public.secure {
		return sessionNames[1][i]
	}
	return sessionNames[0][i]
}

// sessionNames are the session cookies' names, made once: without the
// __Host- prefix ([0]) and with it ([1]).
var sessionNames = func() (names [2][maxSessionChunks]string) {
	for i := range maxSessionChunks {
		names[0][i] = sessionCookieName + "." + strconv.Itoa(i)
		names[1][i] = "__Host-" + names[0][i]
	}
	return names
}()

// flowState is what the flow cookie carries between login and callback.
type flowState struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Return   string `json:"r"`
	IssuedAt int64  `json:"t"` // unix seconds
}

func (a *Authenticator) flowCookie(f flowState) *http.Cookie {
	b, _ := json.Marshal(f)
	return &http.Cookie{
		Name:     a.flowName(),
		Value:    a.flow.seal(b),
		Path:     FlowCookiePath,
		MaxAge:   int(FlowLifetime / time.Second),
		Expires:  a.now().Add(FlowLifetime),
		HttpOnly: true,
		Secure:   a.public.secure,
		SameSite: http.SameSiteLaxMode,
	}
}

// ClearFlowCookie returns the cookie that deletes the flow cookie. The
// callback sets it whatever its outcome: a flow is used once.
func (a *Authenticator) ClearFlowCookie() *http.Cookie {
	return expired(a.flowName(), FlowCookiePath, a.public.secure)
}

// openFlow reads and checks the flow cookie of r.
func (a *Authenticator) openFlow(r *http.Request) (flowState, error) {
	c, err := r.Cookie(a.flowName())
	if err != nil || c.Value == "" {
		return flowState{}, wrapKind(ErrNoFlow, errors.New("no flow cookie"))
	}
	return a.openFlowValue(c.Value)
}

// openFlowValue opens a sealed flow value and checks its age.
func (a *Authenticator) openFlowValue(v string) (flowState, error) {
	if a.flow == nil {
		return flowState{}, wrapKind(ErrNoFlow, errors.New("sign-in not configured"))
	}
	b, err := a.flow.open(v)
	if err != nil {
		return flowState{}, wrapKind(ErrNoFlow, err)
	}
	var f flowState
	if err := json.Unmarshal(b, &f); err != nil || f.State == "" || f.Nonce == "" || f.Verifier == "" {
		return flowState{}, wrapKind(ErrNoFlow, errors.New("malformed flow"))
	}
	age := a.now().Sub(time.Unix(f.IssuedAt, 0))
	if age > FlowLifetime || age < -time.Minute {
		return flowState{}, wrapKind(ErrFlowExpired, fmt.Errorf("flow issued %s ago", age.Round(time.Second)))
	}
	return f, nil
}

// sessionState is what the session cookies carry.
type sessionState struct {
	Token string `json:"tok"`
	Until int64  `json:"u"` // unix seconds; min(token exp, sign-in + 24 h)
}

// sessionCookies seals raw and splits it over as many cookies as needed;
// stale chunks of an earlier, larger session are deleted.
func (a *Authenticator) sessionCookies(raw string, until time.Time) ([]*http.Cookie, error) {
	b, _ := json.Marshal(sessionState{Token: raw, Until: until.Unix()})
	v := a.session.seal(b)
	n := (len(v) + sessionChunkSize - 1) / sessionChunkSize
	if n > maxSessionChunks {
		return nil, wrapKind(ErrSessionTooLarge, fmt.Errorf("sealed session is %d bytes, at most %d fit", len(v), maxSessionChunks*sessionChunkSize))
	}
	maxAge := int(until.Sub(a.now()) / time.Second)
	if maxAge < 1 {
		maxAge = 1
	}
	out := make([]*http.Cookie, 0, maxSessionChunks)
	for i := range maxSessionChunks {
		if i >= n {
			out = append(out, expired(a.sessionName(i), "/", a.public.secure))
			continue
		}
		end := min((i+1)*sessionChunkSize, len(v))
		out = append(out, &http.Cookie{
			Name:     a.sessionName(i),
			Value:    v[i*sessionChunkSize : end],
			Path:     "/",
			MaxAge:   maxAge,
			Expires:  until,
			HttpOnly: true,
			Secure:   a.public.secure,
			SameSite: http.SameSiteLaxMode,
		})
	}
	return out, nil
}

// ClearSessionCookies returns the cookies that end a session (every chunk).
func (a *Authenticator) ClearSessionCookies() []*http.Cookie {
	out := make([]*http.Cookie, 0, maxSessionChunks)
	for i := range maxSessionChunks {
		out = append(out, expired(a.sessionName(i), "/", a.public.secure))
	}
	return out
}

// sessionToken reassembles and opens the session cookies of r.
func (a *Authenticator) sessionToken(r *http.Request) (sessionState, error) {
	chunks, n := a.sessionChunks(r)
	if n == 0 {
		return sessionState{}, ErrNoSession
	}
	return a.openSession(chunks[:n])
}

// sessionChunks are the values of r's session cookies .0, .1, … up to the
// first one missing, and how many there are. Reading them allocates
// nothing.
func (a *Authenticator) sessionChunks(r *http.Request) (chunks [maxSessionChunks]string, n int) {
	for n < maxSessionChunks {
		v, ok := cookieValue(r, a.sessionName(n))
		if !ok {
			break
		}
		chunks[n] = v
		n++
	}
	return chunks, n
}

// openSession opens the sealed session made of chunks and checks its
// lifetime.
func (a *Authenticator) openSession(chunks []string) (sessionState, error) {
	if a.session == nil {
		return sessionState{}, wrapKind(ErrSessionInvalid, errors.New("sign-in not configured"))
	}
	b, err := a.session.open(strings.Join(chunks, ""))
	if err != nil {
		return sessionState{}, wrapKind(ErrSessionInvalid, err)
	}
	var s sessionState
	if err := json.Unmarshal(b, &s); err != nil || s.Token == "" {
		return sessionState{}, wrapKind(ErrSessionInvalid, errors.New("malformed session"))
	}
	if !a.now().Before(time.Unix(s.Until, 0)) {
		return sessionState{}, wrapKind(ErrSessionInvalid, errors.New("session lifetime over"))
	}
	return s, nil
}

// maxCookies is net/http's default limit of cookies a request: past it,
// Request.Cookie finds none, and neither does cookieValue.
const maxCookies = 3000

// cookieValue is r.Cookie(name)'s value without its allocations (a slice
// and a Cookie for each call): the first cookie called name in r's Cookie
// headers, read as net/http reads it. Surrounding double quotes are
// removed, a value holding a byte RFC 6265 does not allow is skipped, and a
// request of more than maxCookies cookies has none.
func cookieValue(r *http.Request, name string) (string, bool) {
	lines := r.Header["Cookie"]
	count := 0
	for _, line := range lines {
		count += strings.Count(line, ";") + 1
	}
	if count > maxCookies || name == "" {
		return "", false
	}
	for _, line := range lines {
		line = textproto.TrimString(line)
		for len(line) > 0 {
			var part string
			part, line, _ = strings.Cut(line, ";")
			k, v, _ := strings.Cut(textproto.TrimString(part), "=")
			if textproto.TrimString(k) != name {
				continue
			}
			if len(v) > 1 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			if validCookieValue(v) {
				return v, true
			}
		}
	}
	return "", false
}

// validCookieValue reports whether every byte of v may appear in a cookie
// value (RFC 6265 as net/http reads it): printable ASCII, except the double
// quote, the semicolon and the backslash.
func validCookieValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; b < 0x20 || b >= 0x7f || b == '"' || b == ';' || b == '\\' {
			return false
		}
	}
	return true
}

func expired(name, path string, secure bool) *http.Cookie {
	return &http.Cookie{
		Name:     name,
		Value:    "",
		Path:     path,
		MaxAge:   -1,
		Expires:  time.Unix(0, 0),
		HttpOnly: true,
		Secure:   secure,
		SameSite: http.SameSiteLaxMode,
	}
}

// CarriesSessionCookie reports whether r carries a deployd session cookie
// (under either name form), without opening it. Middleware that must know
// whether a request relies on ambient credentials uses it.
func CarriesSessionCookie(r *http.Request) bool {
	for _, names := range sessionNames {
		if _, ok := cookieValue(r, names[0]); ok {
			return true
		}
	}
	return false
}
