package load

import (
	"fmt"
	"github.com/hanzoai/deploy/cmd/deployd/internal/deploydbin"
	"os"
	"testing"
)

// roleEnv, when set, makes the test binary a helper program of the
// harness instead of running tests: the harness re-executes itself with it
// so the helper's CPU and memory are its own process's, read from /proc.
const roleEnv = "DEPLOYD_LOAD_ROLE"

// roles are the helper programs by name; each returns its exit code.
var roles = map[string]func() int{
	fanoutRole:    runFanoutLimit,
	listLimitRole: runListLimit,
}

func TestMain(m *testing.M) {
	if name := os.Getenv(roleEnv); name != "" {
		run, ok := roles[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "%s=%q: no such role\n", roleEnv, name)
			os.Exit(2)
		}
		os.Exit(run())
	}
	code := m.Run()
	deploydbin.Cleanup()
	os.Exit(code)
}
