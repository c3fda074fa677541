package projection

import (
	"strings"
	"testing"
)

// TestPositionVector: a position of several clusters is ordered part by
// part, written "<cluster>=<rv>,…", and read back; the one-cluster form
// stays a decimal.
func TestPositionVector(t *testing.T) {
	names := []string{"in-cluster", "staging", "eu"}
	z := ZeroPosition(names)
	a := z.With(0, 10).With(1, 5)
	b := z.With(0, 8).With(1, 7)
	if a.Covers(b) || b.Covers(a) {
		t.Errorf("%s and %s: neither covers the other", a, b)
	}
	m := a.Max(b)
	if got := m.String(); got != "in-cluster=10,staging=7,eu=0" {
		t.Errorf("Max = %s", got)
	}
	if !m.Covers(a) || !m.Covers(b) || !m.Covers(z) || z.Covers(m) {
		t.Error("Max covers both, zero covers neither")
	}
	if a.Of(1) != 5 || a.Of(2) != 0 || a.Of(9) != 0 {
		t.Errorf("parts %d %d %d", a.Of(1), a.Of(2), a.Of(9))
	}
	if z.With(1, 3).Of(1) != 3 || z.Of(1) != 0 {
		t.Error("With modified its receiver")
	}
	for _, s := range []string{m.String(), " in-cluster=10, staging=7 ,eu=0", "staging=7,in-cluster=10,gone=99"} {
		p, err := ParsePosition(s, names)
		if err != nil || !p.Equal(m) {
			t.Errorf("ParsePosition(%q) = %s, %v; want %s", s, p, err, m)
		}
	}
	if p, err := ParsePosition("42", names); err != nil || p.String() != "in-cluster=42,staging=0,eu=0" {
		t.Errorf("a decimal is the first cluster's: %s %v", p, err)
	}
	for _, s := range []string{"staging", "=4", "staging=x", "staging=-1", "staging=99999999999999999999", strings.Repeat("a=1,", 2000)} {
		if _, err := ParsePosition(s, names); err == nil {
			t.Errorf("ParsePosition(%q) accepted", s)
		}
	}
	one, err := ParsePosition("17", nil)
	if err != nil || one.String() != "17" || one.First() != 17 || !one.Covers(At(17)) || one.Covers(At(18)) {
		t.Errorf("one cluster: %s %v", one, err)
	}
	if !(Position{}).IsZero() || !z.IsZero() || a.IsZero() {
		t.Error("IsZero")
	}
}

// FuzzParsePosition: anything parses or is refused with a message; what
// parses is written in a form that parses to the same position.
func FuzzParsePosition(f *testing.F) {
	for _, s := range []string{"", "0", "12", "in-cluster=1,staging=2", "staging=3", "x=1", "a=,b=2", ",,"} {
		f.Add(s)
	}
	names := []string{"in-cluster", "staging"}
	f.Fuzz(func(t *testing.T, s string) {
		for _, ns := range [][]string{nil, names} {
			p, err := ParsePosition(s, ns)
			if err != nil {
				if err.Error() == "" {
					t.Fatal("an empty error")
				}
				continue
			}
			again, err := ParsePosition(p.String(), ns)
			if err != nil || !again.Equal(p) {
				t.Fatalf("%q → %s → %s, %v", s, p, again, err)
			}
		}
	})
}
