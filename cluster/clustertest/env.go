package clustertest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// EnvInt reads a positive number from the environment (a benchmark's
// size), def when unset; anything else fails tb.
func EnvInt(tb testing.TB, key string, def int) int {
	tb.Helper()
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a positive number", key, v)
	}
	return n
}

// ProcMemory reads a process's resident set and its peak from /proc.
func ProcMemory(tb testing.TB, pid int) (rss, hwm int64) {
	tb.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			hwm = kb << 10
		}
	}
	return rss, hwm
}
