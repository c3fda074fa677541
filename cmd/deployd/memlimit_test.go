package main

import (
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestSetMemoryLimit(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	log := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	write := func(content string) string {
		p := filepath.Join(dir, "memory.max")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	if got := setMemoryLimit(log, write("1073741824\n")); got != 1073741824/10*9 || debug.SetMemoryLimit(-1) != got {
		t.Fatalf("1 GiB container: soft limit %d, runtime has %d", got, debug.SetMemoryLimit(-1))
	}
	debug.SetMemoryLimit(math.MaxInt64)
	for _, content := range []string{"max\n", "", "garbage"} {
		if got := setMemoryLimit(log, write(content)); got != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
			t.Fatalf("memory.max %q: set %d", content, got)
		}
	}
	if got := setMemoryLimit(log, filepath.Join(dir, "absent")); got != 0 {
		t.Fatalf("no cgroup file: set %d", got)
	}
	t.Setenv("GOMEMLIMIT", "512MiB")
	if got := setMemoryLimit(log, write("1073741824")); got != 0 {
		t.Fatalf("GOMEMLIMIT set: overridden with %d", got)
	}
}

// TestSettleMemory: once ready, the collector's target is lowered to
// gcPercentServing, unless GOGC set one.
func TestSettleMemory(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	log := slog.New(slog.DiscardHandler)

	t.Setenv("GOGC", "")
	if got := settleMemory(log); got != gcPercentServing || debug.SetGCPercent(100) != gcPercentServing {
		t.Fatalf("GOGC unset: got %d, want the runtime's target %d", got, gcPercentServing)
	}
	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150) // as the runtime read it at start
	if got := settleMemory(log); got != 150 || debug.SetGCPercent(100) != 150 {
		t.Fatalf("GOGC=150: got %d, want it left at 150", got)
	}
}
