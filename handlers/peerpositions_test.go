package handlers

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/projection"
)

// manyNames are the names of 60 clusters: a position of them is written
// longer than projection.CompactOver, so its id is compact.
func manyNames() []string {
	names := make([]string, 60)
	for i := range names {
		names[i] = fmt.Sprintf("cluster-%03d", i)
	}
	return names
}

// TestPeerPositions: a replica answers the position of a compact id it
// gave only to another replica (the shared key signs the question), and a
// replica asking its peers (DEPLOY_PEERS) gets it back; an answer that is
// not the id's is never used.
func TestPeerPositions(t *testing.T) {
	names := manyNames()
	var written strings.Builder
	for i, n := range names {
		if i > 0 {
			written.WriteByte(',')
		}
		fmt.Fprintf(&written, "%s=%d", n, 1000+i)
	}
	p, err := projection.ParsePosition(written.String(), names)
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("a shared cookie key of 32 bytes!")
	holder := projection.NewBook(names, 16)
	id := p.InBook(holder).ID()
	if !projection.IsID(id) {
		t.Fatalf("the id of a position of %d clusters is %q: want a compact one", len(names), id)
	}
	peering, err := auth.NewPeering(key, "replica-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	a := newServerEnvWith(t, func(d *Deps) { d.Positions, d.Peering = holder, peering })

	get := func(path, proof string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, a.URL+path, nil)
		if proof != "" {
			req.Header.Set(auth.LookupHeader, proof)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	path := peerPositionsPath + id[1:]
	sign := func(k []byte, what string) string {
		t.Helper()
		pr, err := auth.NewPeering(k, "replica-b", nil)
		if err != nil {
			t.Fatal(err)
		}
		h, err := pr.SignLookup(what)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	if code, body := get(path, ""); code != http.StatusUnauthorized || !strings.Contains(body, "only another replica") {
		t.Errorf("asked with no proof: %d %s, want 401", code, body)
	}
	if code, _ := get(path, sign([]byte("another key, of another fleet..."), path)); code != http.StatusUnauthorized {
		t.Errorf("asked with another key: %d, want 401", code)
	}
	if code, _ := get(path, sign(key, peerPositionsPath+"AAAAAAAAAAAAAAAAAAAAAA")); code != http.StatusUnauthorized {
		t.Errorf("asked with a proof of another question: %d, want 401", code)
	}
	if code, body := get(path, sign(key, path)); code != http.StatusOK || body != written.String() {
		t.Errorf("asked by a replica: %d %.80s, want 200 and the written position", code, body)
	}
	other := peerPositionsPath + "AAAAAAAAAAAAAAAAAAAAAA"
	if code, _ := get(other, sign(key, other)); code != http.StatusNotFound {
		t.Errorf("asked for an id it never gave: %d, want 404", code)
	}
	if code, body := get(peerPositionsPath+"short", sign(key, peerPositionsPath+"short")); code != http.StatusBadRequest || !strings.Contains(body, "compact") {
		t.Errorf("asked for a malformed id: %d %s, want 400", code, body)
	}

	// A replica that holds none asks its peers.
	peers, err := auth.ParsePeers(a.URL)
	if err != nil {
		t.Fatal(err)
	}
	asker := projection.NewBook(names, 16)
	askerPeering, _ := auth.NewPeering(key, "replica-b", nil)
	newServerEnvWith(t, func(d *Deps) { d.Positions, d.Peering, d.Peers = asker, askerPeering, peers })
	got, ok := asker.Resolve(context.Background(), id)
	if !ok || !got.Equal(p) {
		t.Fatalf("resolved through the peers: %v %.80s, want the position", ok, got.String())
	}
	if _, ok := asker.Held(id); !ok {
		t.Error("a position resolved through the peers is not kept")
	}

	// An answer that is not the id's is refused.
	liar := projection.NewBook(names, 16)
	liar.Lookup = func(context.Context, string) (string, error) { return "cluster-000=1", nil }
	if _, ok := liar.Resolve(context.Background(), id); ok {
		t.Error("a peer's answer whose digest is not the id's was used")
	}
}
