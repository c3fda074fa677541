package projection

import (
	"bytes"
	"testing"
)

// TestSnapshotEncode: Encode encodes each row not yet encoded, once, to
// the bytes ApplicationJSON would have made on first use.
func TestSnapshotEncode(t *testing.T) {
	s := loadedStore(t, benchFleet(1500))
	snap := s.Snapshot()
	first := snap.Tenant(TenantPrefix, "org002")[0]
	first.ApplicationJSON() // one row a reader encoded already
	rows := 0
	for a := range snap.Apps() {
		rows++
		if a != first && a.argo.p.Load() != nil {
			t.Fatalf("%s was encoded before Encode", a.Key())
		}
	}
	if n := snap.Encode(2); n != rows-1 {
		t.Fatalf("Encode encoded %d rows, want %d (all but the one encoded already)", n, rows-1)
	}
	for a := range snap.Apps() {
		p := a.argo.p.Load()
		if p == nil {
			t.Fatalf("%s is not encoded after Encode", a.Key())
		}
		if want := mustJSON(a.Application()); !bytes.Equal(*p, want) {
			t.Fatalf("%s encoded as\n%s\nwant\n%s", a.Key(), *p, want)
		}
	}
	if n := snap.Encode(2); n != 0 {
		t.Errorf("a second Encode encoded %d rows, want 0", n)
	}
}
