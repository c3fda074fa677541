package clustertest

import (
	"fmt"
	"strings"
	"testing"
)

// recorder is a testing.TB that records Skipf and Fatalf instead of ending
// the test (they stop the caller by panicking with stopped).
type recorder struct {
	testing.TB
	skipped, fatal string
}

type stopped struct{}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
	panic(stopped{})
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	panic(stopped{})
}

func (r *recorder) run(f func()) {
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(stopped); !ok {
				panic(v)
			}
		}
	}()
	f()
}

func TestMissingBinary(t *testing.T) {
	t.Setenv(ToolsEnv, "/nonexistent")

	t.Setenv(RequireEnv, "")
	r := &recorder{TB: t}
	r.run(func() { binary(r, "kube-apiserver") })
	want := "kube-apiserver not found in /nonexistent: run make test (it builds the real components)"
	if r.skipped != want || r.fatal != "" {
		t.Errorf("without %s: got skip %q fatal %q, want skip %q", RequireEnv, r.skipped, r.fatal, want)
	}

	t.Setenv(RequireEnv, "1")
	r = &recorder{TB: t}
	r.run(func() { binary(r, "etcd") })
	if r.skipped != "" || !strings.Contains(r.fatal, "/nonexistent/etcd") || !strings.Contains(r.fatal, "make tools") {
		t.Errorf("with %s=1: got skip %q fatal %q, want a failure naming /nonexistent/etcd and make tools", RequireEnv, r.skipped, r.fatal)
	}

	// Start itself skips before starting anything.
	t.Setenv(RequireEnv, "")
	r = &recorder{TB: t}
	r.run(func() { Start(r) })
	if !strings.HasPrefix(r.skipped, "kube-apiserver not found in /nonexistent") {
		t.Errorf("Start without binaries: got skip %q fatal %q, want a skip", r.skipped, r.fatal)
	}
}
