#!/usr/bin/env bash
# Builds the deployd binary: static (CGO_ENABLED=0), reproducible paths
# (-trimpath), stripped, and stamped with its version, commit and build date.
# make build and the Dockerfile both run this script, so a binary built by
# hand, in CI or in the image is built the same way.
#
# Usage: hack/build.sh OUTPUT            e.g. hack/build.sh bin/deployd
#
# VERSION, COMMIT and BUILD_DATE override what git and the clock say (the
# image build passes them as build arguments: it has no .git). GOOS and
# GOARCH cross-compile as usual; GO names the go command (default go).
set -euo pipefail
out=${1:?usage: hack/build.sh OUTPUT}
case $out in /*) ;; *) out=$PWD/$out ;; esac
cd "$(dirname "$0")/.."

version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
commit=${COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
if [ -z "${BUILD_DATE:-}" ]; then
	if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
		BUILD_DATE=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
	else
		BUILD_DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	fi
fi

export CGO_ENABLED=0
exec "${GO:-go}" build -trimpath \
	-ldflags "-s -w -X main.version=$version -X main.commit=$commit -X main.buildDate=$BUILD_DATE" \
	-o "$out" ./cmd/deployd
