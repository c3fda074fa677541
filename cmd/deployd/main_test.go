package main

import (
	"os"
	"testing"

	"github.com/hanzoai/deploy/cmd/deployd/internal/deploydbin"
)

// TestMain removes the deployd binary the end-to-end tests share.
func TestMain(m *testing.M) {
	code := m.Run()
	deploydbin.Cleanup()
	os.Exit(code)
}
