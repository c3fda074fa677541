package auth

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
)

// Requests forwarded between replicas (to the engine's leader) carry no
// end-user credential: the forwarding replica has verified the caller, and
// it sends the Principal it verified as a signed assertion instead. The
// assertion is an HMAC-SHA256, keyed by a key derived from the cookie key
// every replica shares (DEPLOY_COOKIE_KEY), over the request it is for
// (method, request target, body digest), the replica it is from and the
// one it is meant for, a time and a random nonce. The receiving replica
// accepts it once, within ForwardWindow of its time, and signs its answer
// to that nonce, so the forwarding replica relays only an answer a replica
// of the same deployd gave.

// ForwardHeader carries the assertion of a forwarded request;
// ForwardAnswerHeader the receiving replica's proof of its answer.
const (
	ForwardHeader       = "X-Deployd-Forward"
	ForwardAnswerHeader = "X-Deployd-Forward-Answer"
)

// ForwardWindow is how far an assertion's time may be from the receiving
// replica's clock, either way.
const ForwardWindow = 30 * time.Second

// forwardVersion starts every assertion, so the format can change.
const forwardVersion = "v1"

// maxForwardBytes bounds an assertion header (a Principal with many groups
// stays far below it).
const maxForwardBytes = 16 << 10

// ForwardedPrincipal is the Principal as an assertion carries it.
type ForwardedPrincipal struct {
	Subject    string    `json:"sub"`
	Username   string    `json:"user,omitempty"`
	Name       string    `json:"name,omitempty"`
	Email      string    `json:"email,omitempty"`
	Org        string    `json:"org,omitempty"`
	Groups     []string  `json:"groups,omitempty"`
	SuperAdmin bool      `json:"superAdmin,omitempty"`
	OrgAdmin   bool      `json:"orgAdmin,omitempty"`
	Issuer     string    `json:"iss,omitempty"`
	Expiry     time.Time `json:"exp"`
}

// Forward is a verified assertion: who forwarded which request for whom.
type Forward struct {
	// From is the forwarding replica's identity, To the replica it is for.
	From string `json:"from"`
	To   string `json:"to"`
	// Method and Target (the request target: path and query, as sent) of
	// the request; BodySHA256 the hex digest of its body.
	Method     string `json:"method"`
	Target     string `json:"target"`
	BodySHA256 string `json:"body"`
	// IssuedAt is when the forwarding replica signed it (Unix
	// milliseconds), Nonce a random value seen once.
	IssuedAt int64  `json:"iat"`
	Nonce    string `json:"nonce"`
	// Principal is the caller the forwarding replica verified; nil for a
	// request that authenticates otherwise (the git webhook, by its
	// signature, which the receiving replica checks again).
	Principal *ForwardedPrincipal `json:"principal,omitempty"`
}

// AsPrincipal is the assertion's caller as a Principal (nil without one).
func (f *Forward) AsPrincipal() *Principal {
	if f == nil || f.Principal == nil {
		return nil
	}
	p := f.Principal
	return &Principal{Subject: p.Subject, Username: p.Username, Name: p.Name, Email: p.Email, Org: p.Org,
		Groups: append([]string(nil), p.Groups...), SuperAdmin: p.SuperAdmin, OrgAdmin: p.OrgAdmin, Issuer: p.Issuer, Expiry: p.Expiry}
}

// ForwardOf is what an assertion carries of p (nil for nil).
func ForwardOf(p *Principal) *ForwardedPrincipal {
	if p == nil {
		return nil
	}
	return &ForwardedPrincipal{Subject: p.Subject, Username: p.Username, Name: p.Name, Email: p.Email, Org: p.Org,
		Groups: append([]string(nil), p.Groups...), SuperAdmin: p.SuperAdmin, OrgAdmin: p.OrgAdmin, Issuer: p.Issuer, Expiry: p.Expiry}
}

// ErrNoPeerKey refuses every forward, sent or received, of a replica
// whose cookie key is not configured (a random key shares nothing).
var ErrNoPeerKey = errors.New("replicas authenticate each other with DEPLOY_COOKIE_KEY, which is not set: set the same key on every replica")

// Peering signs the requests this replica forwards and verifies those it
// receives. The zero value and nil refuse both.
type Peering struct {
	key  []byte
	self string
	now  func() time.Time

	mu   sync.Mutex // spends a nonce at once: seen and added in one step
	seen *expirable.LRU[string, struct{}]
}

// NewPeering is the peering of the replica named self (its Lease
// identity), keyed by the shared cookie key; nil key: every forward is
// refused with ErrNoPeerKey. now is the clock (time.Now when nil).
func NewPeering(cookieKey []byte, self string, now func() time.Time) (*Peering, error) {
	if now == nil {
		now = time.Now
	}
	p := &Peering{self: self, now: now}
	if len(cookieKey) == 0 {
		return p, nil
	}
	key, err := hkdf.Key(sha256.New, cookieKey, nil, "deployd peer forward "+forwardVersion, 32)
	if err != nil {
		return nil, fmt.Errorf("derive the peer key: %w", err)
	}
	p.key = key
	// Nonces are kept for twice the window: an assertion older than that
	// is refused by its time.
	p.seen = expirable.NewLRU[string, struct{}](1<<16, nil, 2*ForwardWindow)
	return p, nil
}

// Self is this replica's identity ("" for nil).
func (p *Peering) Self() string {
	if p == nil {
		return ""
	}
	return p.self
}

// Ready reports why this replica can neither send nor receive forwards
// (nil when it can).
func (p *Peering) Ready() error {
	if p == nil || len(p.key) == 0 {
		return ErrNoPeerKey
	}
	return nil
}

// BodyDigest is the hex SHA-256 of a body, as an assertion names it.
func BodyDigest(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// Sign is the assertion (ForwardHeader's value) for a request to the
// replica to, and its nonce (the answer's proof names it).
func (p *Peering) Sign(to, method, target string, body []byte, caller *Principal) (header, nonce string, err error) {
	if err := p.Ready(); err != nil {
		return "", "", err
	}
	var n [16]byte
	_, _ = rand.Read(n[:])
	f := Forward{From: p.self, To: to, Method: method, Target: target, BodySHA256: BodyDigest(body),
		IssuedAt: p.now().UnixMilli(), Nonce: hex.EncodeToString(n[:]), Principal: ForwardOf(caller)}
	return p.SignForward(f), f.Nonce, nil
}

// SignForward encodes and signs f as it is (Sign fills it in; tests of the
// receiving side make stale or replayed ones with it).
func (p *Peering) SignForward(f Forward) string {
	b, _ := json.Marshal(f)
	payload := forwardVersion + "." + base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + base64.RawURLEncoding.EncodeToString(p.mac("request", payload))
}

func (p *Peering) mac(purpose, s string) []byte {
	m := hmac.New(sha256.New, p.key)
	m.Write([]byte("deployd forward " + purpose + " " + forwardVersion + "\n"))
	m.Write([]byte(s))
	return m.Sum(nil)
}

// ForwardError is why a forwarded request was refused; the text is safe
// for a client (it names no key material).
type ForwardError struct{ Reason string }

func (e *ForwardError) Error() string { return e.Reason }

func refuse(format string, a ...any) error { return &ForwardError{Reason: fmt.Sprintf(format, a...)} }

// Verify checks the assertion header of a request received as method and
// target with body: its signature, that it is for this replica and for
// this very request, its time, and that its nonce was not seen before
// (the nonce is then spent). f is the assertion whenever its signature
// verified, also when a later check refused it, so that the refusal can be
// proven to the replica that sent it.
func (p *Peering) Verify(header, method, target string, body []byte) (f *Forward, err error) {
	if err := p.Ready(); err != nil {
		return nil, &ForwardError{Reason: err.Error()}
	}
	if len(header) > maxForwardBytes {
		return nil, refuse("the forward assertion is larger than %d bytes", maxForwardBytes)
	}
	version, rest, ok := strings.Cut(header, ".")
	enc, sig, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || version != forwardVersion {
		return nil, refuse("the forward assertion is not of this deployd's form (%s.<payload>.<signature>)", forwardVersion)
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, p.mac("request", version+"."+enc)) {
		return nil, refuse("the forward assertion's signature does not verify: it was not made by a replica sharing this one's DEPLOY_COOKIE_KEY")
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return nil, refuse("the forward assertion's payload is not base64url")
	}
	f = &Forward{}
	if err := json.Unmarshal(raw, f); err != nil {
		return nil, refuse("the forward assertion's payload is not JSON of the expected shape")
	}
	now := p.now()
	switch at := time.UnixMilli(f.IssuedAt); {
	case f.To != p.self:
		return f, refuse("the forwarded request is meant for replica %q, not this one (%q)", f.To, p.self)
	case f.Method != method || f.Target != target:
		return f, refuse("the forward assertion is for %s %s, not for this request", f.Method, f.Target)
	case f.BodySHA256 != BodyDigest(body):
		return f, refuse("the forwarded request's body is not the one its assertion was signed for")
	case now.Sub(at) > ForwardWindow || at.Sub(now) > ForwardWindow:
		return f, refuse("the forward assertion was made at %s, more than %s from this replica's clock (%s)",
			at.UTC().Format(time.RFC3339), ForwardWindow, now.UTC().Format(time.RFC3339))
	case f.Nonce == "":
		return f, refuse("the forward assertion has no nonce")
	}
	p.mu.Lock()
	spent := p.seen.Contains(f.Nonce)
	if !spent {
		p.seen.Add(f.Nonce, struct{}{})
	}
	p.mu.Unlock()
	if spent {
		return f, refuse("the forward assertion was already used: a forwarded request is carried out once")
	}
	return f, nil
}

// ProveAnswer is the receiving replica's proof (ForwardAnswerHeader) of
// its answer to the forward of nonce: the status and the body's digest.
func (p *Peering) ProveAnswer(nonce string, status int, body []byte) string {
	if p.Ready() != nil {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(p.mac("answer", answerText(nonce, status, body)))
}

// CheckAnswer reports whether proof is a replica's proof of this answer to
// the forward of nonce.
func (p *Peering) CheckAnswer(nonce string, status int, body []byte, proof string) bool {
	if p.Ready() != nil {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(proof)
	return err == nil && hmac.Equal(got, p.mac("answer", answerText(nonce, status, body)))
}

func answerText(nonce string, status int, body []byte) string {
	return nonce + "\n" + fmt.Sprint(status) + "\n" + BodyDigest(body)
}

// LookupHeader carries a replica's proof on a question it asks its peers
// (the position a compact stream id names): "<unix ms>.<mac>".
const LookupHeader = "X-Deployd-Peer"

// SignLookup is the LookupHeader of a question about what (the path
// asked): the time and an HMAC over both, with the key forwards use.
func (p *Peering) SignLookup(what string) (string, error) {
	if err := p.Ready(); err != nil {
		return "", err
	}
	ms := strconv.FormatInt(p.now().UnixMilli(), 10)
	return ms + "." + base64.RawURLEncoding.EncodeToString(p.mac("lookup", ms+"\n"+what)), nil
}

// VerifyLookup checks the LookupHeader of a question about what: signed
// by a replica and within ForwardWindow of this one's clock. A question
// changes nothing, so one seen twice is answered twice.
func (p *Peering) VerifyLookup(header, what string) error {
	if err := p.Ready(); err != nil {
		return err
	}
	ms, mac, ok := strings.Cut(header, ".")
	at, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil {
		return refuse("%s is not a replica's: want <unix ms>.<signature>", LookupHeader)
	}
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if err != nil || !hmac.Equal(got, p.mac("lookup", ms+"\n"+what)) {
		return refuse("%s does not verify: the replicas do not share DEPLOY_COOKIE_KEY", LookupHeader)
	}
	if d := p.now().Sub(time.UnixMilli(at)); d > ForwardWindow || d < -ForwardWindow {
		return refuse("%s is %s from this replica's clock: more than %s", LookupHeader, d.Round(time.Second), ForwardWindow)
	}
	return nil
}
