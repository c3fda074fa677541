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

// TestPositionDown: a part may mark its cluster as not answering since a
// time. Covers reads resourceVersions only; Equal, Saw and Max read the
// mark; the written form carries it and reads back; one cluster's
// position never carries it.
func TestPositionDown(t *testing.T) {
	names := []string{"home", "staging"}
	up := ZeroPosition(names).With(0, 10).With(1, 7)
	down := up.WithDown(1, 1764687600)
	if got := down.String(); got != "home=10,staging=7~1764687600" {
		t.Errorf("written %q", got)
	}
	if up.Down(1) != 0 || down.Down(1) != 1764687600 || down.Down(0) != 0 {
		t.Error("WithDown modified its receiver or marked the wrong part")
	}
	if !up.Covers(down) || !down.Covers(up) || up.Equal(down) {
		t.Error("Covers reads resourceVersions only; Equal reads the mark")
	}
	if !down.Saw(down, 1) || down.Saw(up, 1) || up.Saw(down, 1) || !down.Saw(up.With(1, 6), 1) || down.Saw(up.With(1, 8), 1) {
		t.Error("Saw: a change at the same resourceVersion is seen with the same mark only; an older one always, a newer one never")
	}
	if m := up.Max(down); !m.Equal(up) {
		t.Errorf("Max at a tie keeps its receiver's mark: %s", m)
	}
	if m := down.Max(up); !m.Equal(down) {
		t.Errorf("Max at a tie keeps its receiver's mark: %s", m)
	}
	newer := up.With(0, 12)
	if m := newer.Max(down); m.String() != "home=12,staging=7" {
		t.Errorf("Max: %s", m)
	}
	if m := down.Max(newer); m.String() != "home=12,staging=7~1764687600" {
		t.Errorf("Max: %s", m)
	}
	if m := down.Max(up.With(1, 9)); m.String() != "home=10,staging=9" {
		t.Errorf("Max takes the newer part with its mark: %s", m)
	}
	if p := down.With(0, 11); p.Down(1) != 1764687600 {
		t.Error("With dropped the mark")
	}
	p, err := ParsePosition(down.String(), names)
	if err != nil || !p.Equal(down) {
		t.Errorf("read back %s, %v", p, err)
	}
	for _, s := range []string{"staging=7~", "staging=7~x", "staging=7~99999999999999999999"} {
		if _, err := ParsePosition(s, names); err == nil || !strings.Contains(err.Error(), "Unix seconds") {
			t.Errorf("ParsePosition(%q): %v", s, err)
		}
	}
	if one := At(5).WithDown(0, 1764687600); one.String() != "5" {
		t.Errorf("one cluster's position carries the mark: %s", one)
	}
}

// FuzzParsePosition: anything parses or is refused with a message; what
// parses is written in a form that parses to the same position.
func FuzzParsePosition(f *testing.F) {
	for _, s := range []string{"", "0", "12", "in-cluster=1,staging=2", "staging=3", "x=1", "a=,b=2", ",,", "in-cluster=1,staging=2~1764687600", "staging=2~"} {
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
