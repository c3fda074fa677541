#!/usr/bin/env bash
# Builds the real components the integration tests run against into a cache
# folder outside the repository, skipping anything already built:
#   kube-apiserver, kube-controller-manager, kube-scheduler (v1.37.2),
#   etcd (v3.7.3), hydra (v2.3.0, sqlite in-memory), docker-compose (v5.6.0),
#   registry (distribution v3.1.2, the OCI registry of the release source's tests),
#   promtool (Prometheus v0.316.0, for deploy/monitoring's alert rules)
#   and kubectl (Kubernetes v1.37.2's, for make bench-engine and the CLI tests).
# Usage: hack/build-tools.sh [component...]   (default: all)
# The components build in two lanes at once (the Kubernetes ones, which share
# most of their packages, in one; the rest in the other), so that one lane's
# links and downloads fill the other's idle core.
# Each is static (CGO_ENABLED=0, as their releases are; hydra needs cgo for
# sqlite) and -trimpath, the way hack/build.sh builds deployd and make test
# builds the tests: hack/kube's go.mod requires the versions the project's own
# go.mod selects for what they share (client-go, the API types, x/net, grpc,
# otel...), so that those packages compile once for both.
# The folder is $DEPLOYD_TOOLS (default ~/.cache/deployd/tools); print it with --dir.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${DEPLOYD_TOOLS:-$HOME/.cache/deployd/tools}
if [ "${1:-}" = "--dir" ]; then echo "$dir"; exit 0; fi
mkdir -p "$dir"
kube_version=v1.37.2
kube_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean"

# build NAME MODULE_DIR PACKAGE [go build flags...]: builds once; a stamp file
# records the hash of the module's go.sum, cgo and the flags, so a version bump or a new flag rebuilds.
build() {
	local name=$1 mod=$2 pkg=$3; shift 3
	local stamp="$dir/.$name.stamp" want cgo=${tool_cgo:-0}
	want=$( (cat "$here/$mod/go.mod" "$here/$mod/go.sum"; echo "$pkg cgo=$cgo $*") | sha256sum | cut -c1-16)
	if [ -x "$dir/$name" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
		return 0
	fi
	echo "building $name ($pkg) into $dir" >&2
	local start=$SECONDS
	(cd "$here/$mod" && CGO_ENABLED=$cgo go build -trimpath "$@" -o "$dir/$name.tmp" "$pkg")
	mv "$dir/$name.tmp" "$dir/$name"
	echo "$want" > "$stamp"
	echo "built $name in $((SECONDS - start))s" >&2
}

# one builds one component.
one() {
	case $1 in
	etcd) build etcd etcd go.etcd.io/etcd/server/v3 -ldflags "-s -w" ;;
	kube-apiserver|kube-controller-manager|kube-scheduler)
		build "$1" kube "k8s.io/kubernetes/cmd/$1" -ldflags "$kube_ldflags" ;;
	hydra) tool_cgo=1 build hydra hydra github.com/ory/hydra/v2 -tags sqlite,sqlite_omit_load_extension -ldflags "-s -w" ;;
	docker-compose) build docker-compose compose github.com/docker/compose/v5/cmd -ldflags "-s -w" ;;
	registry) build registry registry github.com/distribution/distribution/v3/cmd/registry -ldflags "-s -w" ;;
	# remove_all_sd leaves out Prometheus's service discoveries (the cloud
	# SDKs, most of its build): check rules and test rules need none.
	promtool) build promtool promtool github.com/prometheus/prometheus/cmd/promtool -tags remove_all_sd -ldflags "-s -w" ;;
	# kubectl comes from the same module as the control plane, so that the
	# packages they share (client-go, the API types) compile once.
	kubectl) build kubectl kube k8s.io/kubernetes/cmd/kubectl -ldflags "$kube_ldflags" ;;
	*) echo "unknown component $1" >&2; return 2 ;;
	esac
}

# lane builds its components one after the other.
lane() {
	local c
	for c in "$@"; do one "$c" || return; done
}

[ $# -gt 0 ] || set -- etcd kube-apiserver kube-controller-manager kube-scheduler kubectl hydra docker-compose registry promtool
kube=() other=()
for c in "$@"; do
	case $c in
	kube-*|kubectl) kube+=("$c") ;;
	*) other+=("$c") ;;
	esac
done
lane "${kube[@]}" &
a=$!
rc=0
lane "${other[@]}" || rc=$?
wait "$a" || rc=$?
exit "$rc"
