package handlers

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
)

// The git webhook's signature headers: GitHub signs the body as
// "sha256=<hex>", Gitea as bare hex. Both are HMAC-SHA256 of the raw body
// with the shared secret.
const (
	headerGitHubSignature = "X-Hub-Signature-256"
	headerGiteaSignature  = "X-Gitea-Signature"
	headerGitHubEvent     = "X-GitHub-Event"
	headerGiteaEvent      = "X-Gitea-Event"
	headerGitHubDelivery  = "X-GitHub-Delivery"
	headerGiteaDelivery   = "X-Gitea-Delivery"
)

// maxDeliveryLen bounds a delivery id (GitHub's and Gitea's are UUIDs).
const maxDeliveryLen = 128

// webhookDelivery is the id the delivery names (Gitea's header first, as
// for the event), "" when it names none or one longer than maxDeliveryLen.
func webhookDelivery(h http.Header) string {
	for _, k := range []string{headerGiteaDelivery, headerGitHubDelivery} {
		if v := strings.TrimSpace(h.Get(k)); v != "" && len(v) <= maxDeliveryLen {
			return v
		}
	}
	return ""
}

// webhookReplayWindow is how long a delivery's id is remembered.
const webhookReplayWindow = time.Hour

// deliveries remembers the webhook deliveries this replica ran, by
// cluster and id, for webhookReplayWindow (at most 4,096 of them).
type deliveries struct {
	mu   sync.Mutex
	once sync.Once
	lru  *expirable.LRU[string, time.Time]
}

// seen records the delivery id of cluster's engine as received at now,
// and reports whether (and when) it was received before.
func (d *deliveries) seen(cluster, id string, now time.Time) (time.Time, bool) {
	d.once.Do(func() { d.lru = expirable.NewLRU[string, time.Time](4096, nil, webhookReplayWindow) })
	key := cluster + "\x00" + id
	d.mu.Lock()
	defer d.mu.Unlock()
	if at, ok := d.lru.Get(key); ok {
		return at, true
	}
	d.lru.Add(key, now)
	return time.Time{}, false
}

const signatureUsage = "send " + headerGitHubSignature + ": sha256=<hex> (GitHub) or " + headerGiteaSignature +
	": <hex> (Gitea), the HMAC-SHA256 of the body with the configured secret"

// verifyWebhook checks the delivery's signatures against secret. Every
// signature header present must verify (one good and one bad is refused);
// at least one must be present. Comparisons are in constant time. An empty
// secret verifies nothing. The error is a 401 that does not say which part
// of a signature was wrong.
func verifyWebhook(secret []byte, h http.Header, body []byte) error {
	if len(secret) == 0 {
		return errorf(http.StatusUnauthorized, "the git webhook has no secret configured: every delivery is refused")
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	want := mac.Sum(nil)
	seen := false
	for _, sig := range []struct {
		header, prefix string
	}{{headerGitHubSignature, "sha256="}, {headerGiteaSignature, ""}} {
		values := h.Values(sig.header)
		if len(values) == 0 {
			continue
		}
		seen = true
		if len(values) > 1 {
			return errorf(http.StatusUnauthorized, "the webhook carries "+sig.header+" more than once: "+signatureUsage)
		}
		hexSum, ok := strings.CutPrefix(strings.TrimSpace(values[0]), sig.prefix)
		got, err := hex.DecodeString(hexSum)
		if !ok || err != nil || !hmac.Equal(got, want) {
			return errorf(http.StatusUnauthorized, "the webhook signature does not match the body: "+signatureUsage)
		}
	}
	if !seen {
		return errorf(http.StatusUnauthorized, "the webhook is not signed: "+signatureUsage)
	}
	return nil
}

// webhookEvent is the event a delivery names: Gitea's header first (Gitea
// sends GitHub's too), then GitHub's; "push" when neither is sent (a signed
// delivery without one is taken for a push).
func webhookEvent(h http.Header) string {
	for _, k := range []string{headerGiteaEvent, headerGitHubEvent} {
		if v := strings.TrimSpace(h.Get(k)); v != "" {
			return strings.ToLower(v)
		}
	}
	return "push"
}

// maxRefLen bounds a pushed ref name (git's own limit is the file system's
// name length).
const maxRefLen = 255

// pushPayload is what deployd reads of a GitHub or Gitea push payload.
type pushPayload struct {
	Ref     string `json:"ref"`
	After   string `json:"after"`
	Deleted bool   `json:"deleted"`
}

// parsePush reads a push payload: a JSON object whose "ref" names the
// pushed ref. Anything else is a 400 saying what to send.
func parsePush(body []byte) (pushPayload, error) {
	var p pushPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return p, errorf(http.StatusBadRequest, "the push payload is not a JSON object: set the webhook's content type to application/json")
	}
	if p.Ref == "" {
		return p, errorf(http.StatusBadRequest, `the push payload names no ref: a push event carries "ref": "refs/heads/<branch>"`)
	}
	if len(p.Ref) > maxRefLen {
		return p, errorf(http.StatusBadRequest, "the push payload's ref is longer than 255 bytes: it names no branch or tag")
	}
	return p, nil
}

// refMatches reports whether a pushed ref (refs/heads/main) is the ref the
// engine follows, configured as a branch (main), a tag (v1) or a full ref
// name.
func refMatches(pushed, configured string) bool {
	if configured == "" {
		return false
	}
	return pushed == configured || pushed == "refs/heads/"+configured || pushed == "refs/tags/"+configured
}
