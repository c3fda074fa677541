package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestPrintLineDiff(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{"x\ny\nz", "x\ny\nz", "  x\n  y\n  z\n"},
		{"x\ny\nz", "x\nY\nz", "  x\n- y\n+ Y\n  z\n"},
		{"x\nz", "x\ny\nz", "  x\n+ y\n  z\n"},
		{"x\ny\nz", "y", "- x\n  y\n- z\n"},
	} {
		var b bytes.Buffer
		printLineDiff(&b, strings.Split(c.a, "\n"), strings.Split(c.b, "\n"))
		if b.String() != c.want {
			t.Errorf("diff of %q and %q:\n%s\nwant:\n%s", c.a, c.b, b.String(), c.want)
		}
	}
}

func TestExitCodes(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{flag.ErrHelp, 0},
		{failed("refused"), 1},
		{errors.New("usage"), 2},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

func TestShortCommit(t *testing.T) {
	for in, want := range map[string]string{
		"6f1d8e6955f2ab7644800da04e442363c30a0d2b": "6f1d8e6",
		"v2.5.0": "v2.5.0",
		"6F1D8E6955F2AB7644800DA04E442363C30A0D2B": "6F1D8E6955F2AB7644800DA04E442363C30A0D2B",
		"": "",
	} {
		if got := shortCommit(in); got != want {
			t.Errorf("shortCommit(%q) = %q, want %q", in, got, want)
		}
	}
}
