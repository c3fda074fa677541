package main

import (
	"log/slog"
	"os"
	"runtime"
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

// gcPercentServing is the collector's target once the initial fold is
// done: the heap may grow 25 % over what is live before a collection,
// not the default 100 %. A ready deployd's live heap is its fleet and its
// clients, and changes slowly; what it allocates while serving (a fold
// allocates under 1 KB a change, a frame is encoded once for every client,
// lists are cached per scope and revision) is little against it, so the
// extra collections cost some CPU (BenchmarkMemory reports it) where the
// default would let the resident set reach twice the fleet. The start, which allocates several
// times the live heap in decoding garbage, keeps the default so time to
// ready does not move. A target, unlike a fixed soft limit, grows with the
// fleet: a fleet larger than any guessed limit is never collected back to
// back.
const gcPercentServing = 25

// servingGC lowers the collector's target to gcPercentServing unless GOGC
// says otherwise, and returns the target in force. Idempotent.
func servingGC() int {
	percent := gcPercentServing
	if os.Getenv("GOGC") != "" {
		// GOGC is the runtime's business: read its target back, unchanged.
		percent = debug.SetGCPercent(-1)
	}
	debug.SetGCPercent(percent)
	return percent
}

// settleMemory is run once, when the start is done (every cluster ready,
// every row encoded): it sets the serving target (servingGC), collects the
// start's garbage and returns the freed memory to the OS at once (the
// background scavenger would take minutes). It returns the target in
// force.
func settleMemory(log *slog.Logger) int {
	percent := servingGC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	log.Info("memory settled", "gcPercent", percent, "heapInuseBytes", ms.HeapInuse, "stackInuseBytes", ms.StackInuse, "heapReleasedBytes", ms.HeapReleased)
	return percent
}
