package auth

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

var testPeerKey = bytes.Repeat([]byte{3}, 32)

func newTestPeering(t testing.TB, key []byte, self string, now func() time.Time) *Peering {
	t.Helper()
	p, err := NewPeering(key, self, now)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestForwardAssertion: an assertion verifies once, on the replica it is
// for, for the request it was made for, within the window; its answer's
// proof verifies only for its nonce, status and body.
func TestForwardAssertion(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	a := newTestPeering(t, testPeerKey, "a", clock)
	b := newTestPeering(t, testPeerKey, "b", clock)
	caller := &Principal{Subject: "u-root", Username: "root", Groups: []string{"admin"}, SuperAdmin: true, Expiry: now.Add(time.Hour)}
	h, nonce, err := a.Sign("b", "POST", "/v1/deploy/reconcile?dryRun=true", []byte("{}"), caller)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Verify(h, "POST", "/v1/deploy/reconcile", []byte("{}")); err == nil {
		t.Error("an assertion verified for another target")
	}
	if _, err := a.Verify(h, "POST", "/v1/deploy/reconcile?dryRun=true", []byte("{}")); err == nil {
		t.Error("an assertion verified on a replica it is not for")
	}
	f, err := b.Verify(h, "POST", "/v1/deploy/reconcile?dryRun=true", []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if p := f.AsPrincipal(); p.Subject != "u-root" || !p.SuperAdmin || p.Groups[0] != "admin" || !p.Expiry.Equal(caller.Expiry) || f.From != "a" {
		t.Errorf("the assertion's caller: %+v from %q", p, f.From)
	}
	if _, err := b.Verify(h, "POST", "/v1/deploy/reconcile?dryRun=true", []byte("{}")); err == nil || !strings.Contains(err.Error(), "already used") {
		t.Errorf("a replay: %v", err)
	}
	proof := b.ProveAnswer(nonce, 200, []byte("ok"))
	if !a.CheckAnswer(nonce, 200, []byte("ok"), proof) {
		t.Error("a proven answer did not check")
	}
	for _, bad := range []struct {
		nonce  string
		status int
		body   string
	}{{"other", 200, "ok"}, {nonce, 201, "ok"}, {nonce, 200, "ok!"}} {
		if a.CheckAnswer(bad.nonce, bad.status, []byte(bad.body), proof) {
			t.Errorf("a proof checked for %+v", bad)
		}
	}
	if other := newTestPeering(t, bytes.Repeat([]byte{4}, 32), "a", clock); other.CheckAnswer(nonce, 200, []byte("ok"), proof) {
		t.Error("a proof checked under another key")
	}
	h2, _, _ := a.Sign("b", "POST", "/x", nil, nil)
	now = now.Add(ForwardWindow + time.Second)
	if _, err := b.Verify(h2, "POST", "/x", nil); err == nil || !strings.Contains(err.Error(), "more than 30s") {
		t.Errorf("a stale assertion: %v", err)
	}
}

// TestPeeringWithoutKey: without the shared key nothing is signed and
// nothing verifies.
func TestPeeringWithoutKey(t *testing.T) {
	p := newTestPeering(t, nil, "a", nil)
	if _, _, err := p.Sign("b", "POST", "/x", nil, nil); !errors.Is(err, ErrNoPeerKey) {
		t.Errorf("Sign without a key: %v", err)
	}
	h, _, _ := newTestPeering(t, testPeerKey, "b", nil).Sign("a", "POST", "/x", nil, nil)
	if _, err := p.Verify(h, "POST", "/x", nil); err == nil {
		t.Error("an assertion verified without a key")
	}
	var nilP *Peering
	if nilP.Ready() == nil || nilP.CheckAnswer("n", 200, nil, "") {
		t.Error("a nil peering forwards")
	}
}

// TestPeerSet: DEPLOY_PEERS admits its entries' exact scheme, host and
// port, and the addresses a name among them resolves to; anything else is
// refused, and a bad entry is an error that says how to write one.
func TestPeerSet(t *testing.T) {
	ps, err := ParsePeers(" http://10.0.0.7:8080, https://deployd-peers.deployd.svc:8443 ,http://[::1]:9000")
	if err != nil {
		t.Fatal(err)
	}
	ps.lookup = func(_ context.Context, host string) ([]string, error) {
		if host == "deployd-peers.deployd.svc" {
			return []string{"10.1.0.4", "10.1.0.5"}, nil
		}
		return nil, errors.New("no such host")
	}
	ctx := context.Background()
	for target, want := range map[string]bool{
		"http://10.0.0.7:8080":                   true,
		"http://10.0.0.7:8080/":                  true,
		"https://10.1.0.5:8443":                  true,
		"https://deployd-peers.deployd.svc:8443": true,
		"http://[0:0:0:0:0:0:0:1]:9000":          true,
		"http://10.0.0.7:8081":                   false,
		"https://10.0.0.7:8080":                  false,
		"http://10.1.0.5:8443":                   false,
		"https://10.1.0.6:8443":                  false,
		"http://evil.example:8080":               false,
		"http://u:p@10.0.0.7:8080":               false,
		"http://10.0.0.7:8080/path":              false,
		"http://10.0.0.7:8080?q=1":               false,
		"10.0.0.7:8080":                          false,
		"":                                       false,
	} {
		if got := ps.Admits(ctx, target); got != want {
			t.Errorf("Admits(%q) = %v, want %v", target, got, want)
		}
	}
	if none, err := ParsePeers(" , "); none != nil || err != nil || none.Admits(ctx, "http://10.0.0.7:8080") {
		t.Errorf("no peers: %v %v", none, err)
	}
	for _, bad := range []string{"ftp://x:1", "http://", "http://x:1/path", "http://u@x:1", "://x"} {
		if _, err := ParsePeers(bad); err == nil {
			t.Errorf("ParsePeers(%q) accepted", bad)
		}
	}
}

// FuzzVerifyForward: any header, method, target and body are refused or
// verified without a panic, and only a header signed with the key
// verifies.
func FuzzVerifyForward(f *testing.F) {
	a := newTestPeering(f, testPeerKey, "a", nil)
	h, _, _ := a.Sign("b", "POST", "/x", []byte("{}"), &Principal{Subject: "s"})
	f.Add(h, "POST", "/x", []byte("{}"))
	f.Add("v1.e30.", "GET", "/", []byte(nil))
	f.Add("v1..", "POST", "/x", []byte("x"))
	b := newTestPeering(f, testPeerKey, "b", nil)
	f.Fuzz(func(t *testing.T, header, method, target string, body []byte) {
		fw, err := b.Verify(header, method, target, body)
		if err == nil && (fw == nil || fw.To != "b" || fw.Method != method || fw.Target != target) {
			t.Fatalf("verified %+v for %s %s", fw, method, target)
		}
		var fe *ForwardError
		if err != nil && !errors.As(err, &fe) {
			t.Fatalf("an error of another kind: %v", err)
		}
	})
}

// FuzzParsePeers: any DEPLOY_PEERS value is read or refused without a
// panic, and what is read admits its own entries.
func FuzzParsePeers(f *testing.F) {
	for _, s := range []string{"http://10.0.0.7:8080", "https://a.b:1,http://[::1]:2", " , ", "http://%zz", "http://a:99999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := ParsePeers(s)
		if err != nil || ps == nil {
			return
		}
		for e := range strings.SplitSeq(ps.String(), ",") {
			if !ps.Admits(context.Background(), e) {
				t.Fatalf("%q does not admit its entry %q", s, e)
			}
		}
	})
}
