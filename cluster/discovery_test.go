package cluster

import (
	"testing"
	"time"

	"github.com/hanzoai/deploy/projection"
)

// TestFleetDiscovery: a fleet's discoveries stay near FleetDiscoveryRate
// clusters a second, however many clusters it has; one cluster, or a
// hundred, keep the 10 s of one.
func TestFleetDiscovery(t *testing.T) {
	for _, c := range []struct {
		n    int
		want time.Duration
	}{{1, 10 * time.Second}, {100, 10 * time.Second}, {101, 10100 * time.Millisecond}, {500, 50 * time.Second}, {1000, 100 * time.Second}} {
		if got := FleetDiscovery(c.n); got != c.want {
			t.Errorf("FleetDiscovery(%d) = %s, want %s", c.n, got, c.want)
		}
	}
}

// TestNextDiscovery: the wait is within ±25 % of the interval, spread (not
// the same each time), and at most DiscoveryRetry while discovery fails,
// the App CRD is not served, or the initial lists are held or not pushed
// yet.
func TestNextDiscovery(t *testing.T) {
	w, err := NewWatcher(nil, "unconfigured", NewFeed(), Options{Discovery: 50 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	w.served, w.hold = map[projection.Kind]bool{projection.KindApp: true}, holdOff
	seen := map[time.Duration]bool{}
	for range 200 {
		d := w.nextDiscovery()
		if d < 37500*time.Millisecond || d > 62500*time.Millisecond {
			t.Fatalf("healthy: wait %s, want within 37.5s..62.5s", d)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Errorf("healthy: %d different waits of 200, want them spread", len(seen))
	}
	for _, c := range []struct {
		name string
		set  func()
	}{
		{"failing", func() { w.discErr = "connection refused" }},
		{"no App CRD", func() { w.served = map[projection.Kind]bool{} }},
		{"never answered", func() { w.served = nil }},
		{"lists held", func() { w.hold = holdOn }},
		{"nothing pushed yet", func() { w.hold = holdUndecided }},
	} {
		w.discErr, w.served, w.hold = "", map[projection.Kind]bool{projection.KindApp: true}, holdOff
		c.set()
		for range 50 {
			if d := w.nextDiscovery(); d > DiscoveryRetry*5/4 || d < DiscoveryRetry*3/4 {
				t.Fatalf("%s: wait %s, want within 25 %% of %s", c.name, d, DiscoveryRetry)
			}
		}
	}
}
