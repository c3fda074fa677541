//go:build tools

// Package tools pins the OCI registry (distribution's registry server) the
// release source's integration tests push images to and list tags from.
package tools

import _ "github.com/distribution/distribution/v3/cmd/registry"
