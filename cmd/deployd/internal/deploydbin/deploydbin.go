// Package deploydbin builds the deployd binary for the end-to-end tests the
// way the image does (hack/build.sh), once per test process: the tests of a
// package share it instead of linking it again each (a link costs seconds of
// both cores). TestMain removes it with Cleanup.
package deploydbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	once sync.Once
	dir  string
	bin  string
	err  error
)

// Path returns the built binary, building it on the first call.
func Path(tb testing.TB) string {
	tb.Helper()
	bin, err := Build()
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

// Build is Path for a goroutine (one that builds while a test starts its
// clusters): the binary, or why it did not build.
func Build() (string, error) {
	once.Do(func() { bin, err = build() })
	return bin, err
}

func build() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	if dir, err = os.MkdirTemp("", "deployd-bin-"); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "deployd")
	if b, err := exec.Command("bash", filepath.Join(root, "hack", "build.sh"), out).CombinedOutput(); err != nil {
		return "", fmt.Errorf("build deployd: %v\n%s", err, b)
	}
	return out, nil
}

// moduleRoot is the folder holding go.mod, above the working directory.
func moduleRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		up := filepath.Dir(d)
		if up == d {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		d = up
	}
}

// Cleanup removes the binary; TestMain calls it after m.Run.
func Cleanup() {
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}
