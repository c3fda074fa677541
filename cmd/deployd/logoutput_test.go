package main

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hanzoai/deploy/auth/authtest"
)

// TestLogOutputHoldsAccessLines: batched lines are held until a line is
// written through (which writes them first, in order), until the held
// bytes reach the bound, until Flush, or until the period has passed.
func TestLogOutputHoldsAccessLines(t *testing.T) {
	var out authtest.LogBuffer
	o := newLogOutput(&out, time.Hour, 16)
	access := o.Batched()
	fmt.Fprint(access, "get a\n")
	fmt.Fprint(access, "get b\n")
	if got := out.String(); got != "" {
		t.Fatalf("access lines written at once: %q", got)
	}
	fmt.Fprint(o, "warn c\n")
	if got, want := out.String(), "get a\nget b\nwarn c\n"; got != want {
		t.Fatalf("a line written through: output %q, want %q (the held lines first)", got, want)
	}
	fmt.Fprint(access, "get d\n")
	fmt.Fprint(access, "get e\n")
	if got := out.String(); got != "get a\nget b\nwarn c\n" {
		t.Fatalf("12 held bytes of a 16-byte bound written: %q", got)
	}
	fmt.Fprint(access, "get f\n")
	if got, want := out.String(), "get a\nget b\nwarn c\nget d\nget e\nget f\n"; got != want {
		t.Fatalf("18 held bytes of a 16-byte bound: output %q, want %q", got, want)
	}
	fmt.Fprint(access, "get g\n")
	o.Flush()
	if got := out.String(); !strings.HasSuffix(got, "get f\nget g\n") {
		t.Fatalf("Flush: output %q, want it to end with the held line", got)
	}

	var timed authtest.LogBuffer
	o = newLogOutput(&timed, 20*time.Millisecond, 1<<20)
	fmt.Fprint(o.Batched(), "get h\n")
	deadline := time.Now().Add(5 * time.Second)
	for timed.String() != "get h\n" {
		if time.Now().After(deadline) {
			t.Fatalf("a held line was not written within 5s of a 20ms period: %q", timed.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLogOutputKeepsLinesWhole: lines written from many goroutines, held
// and through, each reach the output once and whole.
func TestLogOutputKeepsLinesWhole(t *testing.T) {
	var out authtest.LogBuffer
	o := newLogOutput(&out, time.Millisecond, 4096)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				line := fmt.Sprintf("g%d line %d %s\n", g, i, strings.Repeat("x", i%40))
				if i%10 == 0 {
					fmt.Fprint(o, line)
				} else {
					fmt.Fprint(o.Batched(), line)
				}
			}
		})
	}
	wg.Wait()
	o.Flush()
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		var g, i int
		var pad string
		if n, _ := fmt.Sscanf(l, "g%d line %d %s", &g, &i, &pad); n < 2 || seen[l] || len(pad) != i%40 && i%40 != 0 {
			t.Fatalf("line %q: torn or repeated", l)
		}
		seen[l] = true
	}
	if len(seen) != 8*500 {
		t.Fatalf("%d lines reached the output, want %d", len(seen), 8*500)
	}
}
