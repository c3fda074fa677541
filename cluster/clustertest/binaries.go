package clustertest

import (
	"os"
	"path/filepath"
	"testing"
)

// The environment the harness reads.
const (
	// ToolsEnv names the folder holding the real binaries (hack/build-tools.sh --dir).
	ToolsEnv = "DEPLOYD_TOOLS"
	// RequireEnv, when "1", turns a missing binary into a test failure
	// instead of a skip (make test sets it).
	RequireEnv = "DEPLOYD_REQUIRE_TOOLS"
)

// ToolsDir is the folder the binaries are taken from: $DEPLOYD_TOOLS, else
// ~/.cache/deployd/tools (the default of hack/build-tools.sh).
func ToolsDir() string {
	if d := os.Getenv(ToolsEnv); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "deployd", "tools")
}

// binary returns the path of a built tool, or skips (fails when the tools
// are required) when it is not there.
func binary(t testing.TB, name string) string {
	t.Helper()
	dir := ToolsDir()
	path := filepath.Join(dir, name)
	fi, err := os.Stat(path)
	if err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
		return path
	}
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s not found at %s (%s=1): run make tools (it builds the real components)", name, path, RequireEnv)
	}
	t.Skipf("%s not found in %s: run make test (it builds the real components)", name, dir)
	return ""
}
