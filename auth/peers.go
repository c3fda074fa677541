package auth

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// PeerSet is where this deployd's replicas may be reached: the only
// addresses a request is forwarded to. It is configuration
// (DEPLOY_PEERS), never cluster state: the engine's state ConfigMap names
// which replica leads and where it says it is, and a place outside this
// set is refused whatever the ConfigMap says.
//
// Each entry is a base URL, http:// or https://, with a port or its
// scheme's. An entry whose host is a name also admits every address the
// name resolves to, at the entry's scheme and port: a headless Service of
// the Deployment's own pods (deployd-peers.deployd.svc.cluster.local)
// names every replica's pod IP, which is what a replica advertises
// (DEPLOYD_ADVERTISE_URL, else http://$POD_IP:<port>).
type PeerSet struct {
	entries []peerEntry
	// lookup resolves a name (net.DefaultResolver's when nil); ttl is how
	// long an answer is kept.
	lookup func(ctx context.Context, host string) ([]string, error)
	ttl    time.Duration
	now    func() time.Time

	mu    sync.Mutex
	cache map[string]resolved
}

type peerEntry struct {
	scheme, host, port string
	name               bool // host is a DNS name, not an address
}

type resolved struct {
	addrs []string
	at    time.Time
}

// ParsePeers reads DEPLOY_PEERS: base URLs separated by commas (spaces
// around them are ignored). Empty: nil, no peers.
func ParsePeers(s string) (*PeerSet, error) {
	ps := &PeerSet{ttl: 10 * time.Second, now: time.Now, cache: map[string]resolved{}}
	for raw := range strings.SplitSeq(s, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		e, err := parsePeerURL(raw)
		if err != nil {
			return nil, fmt.Errorf("peer %q: %s", raw, err)
		}
		ps.entries = append(ps.entries, e)
	}
	if len(ps.entries) == 0 {
		return nil, nil
	}
	return ps, nil
}

// parsePeerURL reads one base URL: scheme, host and port only.
func parsePeerURL(raw string) (peerEntry, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return peerEntry{}, fmt.Errorf("not a URL: write http://host:port or https://host:port")
	case u.Scheme != "http" && u.Scheme != "https":
		return peerEntry{}, fmt.Errorf("scheme %q: write http:// or https://", u.Scheme)
	case u.User != nil:
		return peerEntry{}, fmt.Errorf("a peer's URL carries no user or password")
	case u.Host == "" || u.Hostname() == "":
		return peerEntry{}, fmt.Errorf("no host: write http://host:port")
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "":
		return peerEntry{}, fmt.Errorf("a peer is a base URL: scheme, host and port, no path or query")
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	host := strings.ToLower(u.Hostname())
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	}
	return peerEntry{scheme: u.Scheme, host: host, port: port, name: net.ParseIP(host) == nil}, nil
}

// String lists the entries as configured (normalized), for logs and
// messages.
func (ps *PeerSet) String() string {
	if ps == nil {
		return "none"
	}
	out := make([]string, len(ps.entries))
	for i, e := range ps.entries {
		out[i] = e.scheme + "://" + net.JoinHostPort(e.host, e.port)
	}
	return strings.Join(out, ",")
}

// Admits reports whether target, a replica's base URL, is one of the
// peers: an entry's scheme and port, and its host or (an entry naming a
// host) one of the addresses the name resolves to now. A name that does
// not resolve admits nothing but itself.
func (ps *PeerSet) Admits(ctx context.Context, target string) bool {
	if ps == nil {
		return false
	}
	t, err := parsePeerURL(target)
	if err != nil {
		return false
	}
	for _, e := range ps.entries {
		if e.scheme != t.scheme || e.port != t.port {
			continue
		}
		if e.host == t.host {
			return true
		}
		if e.name && !t.name && slices.Contains(ps.resolve(ctx, e.host), t.host) {
			return true
		}
	}
	return false
}

// resolve is the addresses host names now (kept for ttl).
func (ps *PeerSet) resolve(ctx context.Context, host string) []string {
	ps.mu.Lock()
	r, ok := ps.cache[host]
	ps.mu.Unlock()
	if ok && ps.now().Sub(r.at) < ps.ttl {
		return r.addrs
	}
	lookup := ps.lookup
	if lookup == nil {
		lookup = net.DefaultResolver.LookupHost
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	addrs, err := lookup(ctx, host)
	if err != nil {
		return r.addrs // the last answer, until the name answers again
	}
	for i, a := range addrs {
		if ip := net.ParseIP(a); ip != nil {
			addrs[i] = ip.String()
		}
	}
	ps.mu.Lock()
	ps.cache[host] = resolved{addrs: addrs, at: ps.now()}
	ps.mu.Unlock()
	return addrs
}

// Bases are the peers' base URLs now: an entry naming an address as it
// is, one naming a host once per address it resolves to (the name itself
// while it resolves to none).
func (ps *PeerSet) Bases(ctx context.Context) []string {
	if ps == nil {
		return nil
	}
	var out []string
	for _, e := range ps.entries {
		addrs := []string{e.host}
		if e.name {
			if r := ps.resolve(ctx, e.host); len(r) > 0 {
				addrs = r
			}
		}
		for _, a := range addrs {
			if u := e.scheme + "://" + net.JoinHostPort(a, e.port); !slices.Contains(out, u) {
				out = append(out, u)
			}
		}
	}
	return out
}
