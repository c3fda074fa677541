//go:build tools

// Package tools pins promtool, which make test runs to check and unit-test
// deploy/monitoring's alert rules. It is built by hack/build-tools.sh,
// never imported.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
