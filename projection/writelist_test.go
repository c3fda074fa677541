package projection

import (
	"bytes"
	"io"
	"testing"
)

// TestWriteApplicationListReusesItsBuffer: writing a list allocates no
// buffer of its own once one has been used (a fresh buffer a request was
// most of what the collector did at a thousand small lists a second), and
// writes exactly what AppendApplicationList appends, whose length
// ApplicationListSize counts without assembling it.
func TestWriteApplicationListReusesItsBuffer(t *testing.T) {
	s := loadedStore(t, benchFleet(200))
	snap := s.Snapshot()
	want := AppendApplicationList(nil, snap.Position, snap.Apps())
	var got bytes.Buffer
	if err := WriteApplicationList(&got, snap.Position, snap.Apps()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatal("WriteApplicationList wrote other bytes than AppendApplicationList appends")
	}
	for _, rows := range []int{0, 1, 2, 200} {
		seq := func(yield func(*App) bool) {
			i := 0
			for a := range snap.Apps() {
				if i++; i > rows || !yield(a) {
					return
				}
			}
		}
		if got, want := ApplicationListSize(snap.Position, seq), len(AppendApplicationList(nil, snap.Position, seq)); got != want {
			t.Errorf("%d rows: ApplicationListSize %d, the list is %d bytes", rows, got, want)
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		_ = WriteApplicationList(io.Discard, snap.Position, snap.Apps())
	})
	if allocs > 2 {
		t.Fatalf("%.0f allocations a list, want at most 2 (the iterator's)", allocs)
	}
}
