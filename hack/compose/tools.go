//go:build tools

// Package tools pins docker compose, used to validate docker-compose.yaml without an engine.
package tools

import _ "github.com/docker/compose/v5/cmd"
