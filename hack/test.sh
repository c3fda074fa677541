#!/usr/bin/env bash
# make test (and so .ci/run): every test of the project against real
# components, set-up included, in the order that keeps both cores busy:
#   1. the Debian packages (hack/install-packages.sh);
#   2. in two lanes at once: the Kubernetes components, then go vet and the
#      deployd binary (hack/build.sh), whose compiled packages the tests and
#      the end-to-end tests' builds then take from the cache; the other real
#      components (hack/build-tools.sh), then the stock Argo CD UI
#      (hack/build-argo-ui.sh);
#   3. every package's tests, three packages at once (go test -json through
#      hack/testreport), with DEPLOYD_REQUIRE_TOOLS=1 so that a missing
#      component fails, never skips;
#   4. the race run and every fuzz target briefly (FUZZTIME, default 5s),
#      their builds made beside step 3, at a lower priority.
# At its end it prints how long each step took, each package's time and the
# ten slowest tests, so that a slow newcomer shows.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
# The tests build as the image does (hack/build.sh: static, -trimpath), so
# that vet, go test and the deployd binary the end-to-end tests run share
# one compile of every dependency instead of two. The race run needs cgo and
# sets it back.
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"
read -ra race_pkgs <<<"${RACE_PKGS:?the race packages, from the Makefile: run make test}"
export DEPLOYD_TOOLS=${DEPLOYD_TOOLS:-$(hack/build-tools.sh --dir)}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
summary=$work/summary
began=$SECONDS

# step NAME CMD...: runs CMD, noting its time; a failure ends make test.
step() {
	local name=$1 s=$SECONDS rc=0
	shift
	"$@" || rc=$?
	printf '  %6ds  %s%s\n' $((SECONDS - s)) "$name" "$([ $rc = 0 ] || echo " (failed, exit $rc)")" >>"$work/steps"
	if [ $rc != 0 ]; then
		echo "make test: $name failed (exit $rc)" >&2
		report
		exit $rc
	fi
}

# together NAME:CMD...: runs each "NAME:shell command" at once, their output
# prefixed by NAME; waits for all and fails when any failed.
together() {
	local pids=() names=() i rc=0 spec
	for spec in "$@"; do
		local name=${spec%%:*} cmd=${spec#*:}
		names+=("$name")
		(
			s=$SECONDS
			r=0
			bash -o pipefail -c "$cmd" 2>&1 | sed -u "s/^/[$name] /" || r=$?
			printf '  %6ds  %s%s\n' $((SECONDS - s)) "$name" "$([ $r = 0 ] || echo " (failed, exit $r)")" >>"$work/steps"
			exit $r
		) &
		pids+=($!)
	done
	for i in "${!pids[@]}"; do
		wait "${pids[$i]}" || { echo "make test: ${names[$i]} failed" >&2; rc=1; }
	done
	return $rc
}

report() {
	echo
	echo "make test: steps ($((SECONDS - began))s in all)"
	cat "$work/steps" 2>/dev/null || true
	cat "$summary" 2>/dev/null || true
}

# DEPLOYD_TEST_LOG, when set, is a folder that keeps each go test run's
# -json stream (LABEL.json): every test's log, for a slow or failed test.
gotest() { # gotest LABEL go-test-args...: go test -json through the report
	local label=$1 keep=/dev/null
	shift
	if [ -n "${DEPLOYD_TEST_LOG:-}" ]; then
		mkdir -p "$DEPLOYD_TEST_LOG"
		keep=$DEPLOYD_TEST_LOG/$label.json
	fi
	$GO test -json "$@" | tee "$keep" | $work/testreport -label "$label" -summary "$summary"
}

step packages hack/install-packages.sh
$GO build -o "$work/testreport" ./hack/testreport
# Two lanes, one per core: the Kubernetes components, then go vet and the
# deployd binary (which find the packages they share with the control plane
# compiled: client-go, the API types); the other components, then the UI.
step "set-up" together \
	"kube:hack/build-tools.sh kube-apiserver kube-controller-manager kube-scheduler kubectl && GO=$GO make -s vet && GO=$GO hack/build.sh $work/deployd" \
	"tools:hack/build-tools.sh etcd hydra docker-compose registry promtool && hack/build-argo-ui.sh"
export DEPLOYD_REQUIRE_TOOLS=1

# prebuild compiles what the race run and the fuzz targets need (their own
# builds of every dependency: race-instrumented, fuzz-instrumented) at a
# lower priority while go test runs: its end-to-end tests wait on real
# components for much of their time, and the builds take that idle time. A
# failure here is reported by the step that builds it again.
prebuild() {
	local s=$SECONDS r=0
	{ CGO_ENABLED=1 nice -n 10 $GO test -race -vet=off -c -o "$work/race/" "${race_pkgs[@]}" &&
		nice -n 10 hack/fuzz-all.sh --build "$work/fuzz"; } >"$work/prebuild.log" 2>&1 || r=$?
	printf '  %6ds  %s%s\n' $((SECONDS - s)) "race and fuzz builds (beside go test)" "$([ $r = 0 ] || echo " (failed, exit $r)")" >>"$work/steps"
}
prebuild &
prebuilt=$!
# go vet ran in the set-up (make vet, the test files too): go test's own
# vet pass would repeat it. Three packages at once: the two end-to-end
# packages (cmd/deployd, cmd/deployd/load) take most of the time and wait on
# real components for much of it, and the others run beside them.
step "go test" gotest "go test" -count=1 -vet=off -p 3 -timeout 25m ./...
wait "$prebuilt" || true
CGO_ENABLED=1 step race gotest race -race -count=1 -vet=off "${race_pkgs[@]}"
step fuzz hack/fuzz-all.sh --from "$work/fuzz" "${FUZZTIME:-5s}"
report
