package main

import (
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// cgroupMemoryMax is where a cgroup v2 container reads its memory limit.
const cgroupMemoryMax = "/sys/fs/cgroup/memory.max"

// setMemoryLimit gives the garbage collector a soft limit below the
// container's memory limit, so a fleet that grows the heap toward the
// limit makes the collector work harder instead of getting the process
// killed. GOMEMLIMIT, when set, is the runtime's business and wins. It
// returns the limit set, 0 when none was.
func setMemoryLimit(log *slog.Logger, path string) int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0 // not in a cgroup v2 container
	}
	limit, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil || limit <= 0 { // "max": no limit
		return 0
	}
	soft := limit / 10 * 9
	debug.SetMemoryLimit(soft)
	log.Info("memory limit for the garbage collector", "container_limit_bytes", limit, "soft_limit_bytes", soft)
	return soft
}
