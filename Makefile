# deployd — build and test.
#   make test    every test the project has, against real components
#                (kube-apiserver + etcd, controller-manager, scheduler, Hydra,
#                Chromium, docker compose, an OCI registry, promtool for the
#                alert rules, the stock Argo CD UI), installing and building
#                them first; then make race, and every fuzz target briefly
#                (hack/test.sh); it ends with the ten slowest tests.
#   make tools   build the real components into $(TOOLS) (skips what is built),
#                and the stock Argo CD web UI from its sources (hack/build-argo-ui.sh)
#   make bench   the benchmarks recorded in BENCHMARKS.md (make bench-fold: the
#                fold's one-core throughput alone; make bench-engine: the engine
#                beside kubectl apply --server-side on a real API server)
#   make bench-compare  deployd beside the API server and beside a bare server
#                writing the same bytes: lists, watch fan-out, API-server load,
#                on a 10,000-App fleet (sizes from DEPLOYD_COMPARE_*)
#   make fuzz    a longer run of every fuzz target
#   make chaos   faults under load (kill -9, a reconnect storm, an API server
#                restart with etcd compacted, slow clients, bad input) on the
#                10,000-App fleet, each judged against the API server's LIST
#   make bench-scale  50,000 Apps over 500 clusters (aliases of five real API
#                servers): time to ready, memory, the lists, an App's detail

SHELL := /usr/bin/env bash
GO ?= go
TOOLS ?= $(shell hack/build-tools.sh --dir)
FUZZTIME ?= 5s
export DEPLOYD_TOOLS := $(TOOLS)

.PHONY: all build test unit race tools packages vet fuzz fuzz-short bench bench-fold bench-engine bench-compare coldstart sse-clients chaos bench-memory bench-scale

all: build

# hack/build.sh is the one build command: the Dockerfile runs it too.
build:
	GO=$(GO) hack/build.sh bin/deployd

packages:
	hack/install-packages.sh

tools:
	hack/build-tools.sh
	hack/build-argo-ui.sh

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

# unit runs what needs no real component (the rest skip with a message naming make test).
unit:
	$(GO) test ./...

# test never skips an integration test: DEPLOYD_REQUIRE_TOOLS turns a missing
# binary into a failure. hack/test.sh builds what the tests need (the tools,
# the UI) beside go vet, then runs the tests, the race run and the
# fuzz targets, and ends with each step's time, each package's and the ten
# slowest tests.
test:
	GO=$(GO) FUZZTIME=$(FUZZTIME) RACE_PKGS="$(RACE_PKGS)" hack/test.sh

# race runs the packages whose readers share the writer's data, and the engine
# (callers sharing one run), under the race detector.
RACE_PKGS := ./projection/ ./stream/ ./handlers/ ./engine/
race:
	$(GO) test -race -count=1 $(RACE_PKGS)

# Each fuzz target for FUZZTIME (short in test, longer by hand: make fuzz FUZZTIME=2m).
fuzz-short:
	hack/fuzz-all.sh $(FUZZTIME)

fuzz:
	hack/fuzz-all.sh $(FUZZTIME)

# The figures of BENCHMARKS.md (those against a real API server run on
# their own: make coldstart, make sse-clients).
# The fold's throughput on one core, over 1.6 million changes a run (several
# collections of the 200 MB heap), at the writer's largest batch and at 512.
bench-fold:
	$(GO) test -cpu 1 -run '^$$' -bench '^BenchmarkApply$$/batch=4096$$' -benchtime 400x -count 3 ./projection/
	$(GO) test -cpu 1 -run '^$$' -bench '^BenchmarkApply$$/batch=512$$' -benchtime 3125x -count 3 ./projection/

# 1,000 Apps from a git server into a real API server, cold (all created) and
# warm (one tag changed), the engine and kubectl apply --server-side of the
# same files side by side in one run.
# Then the engine as a replicated service: App writes per change with one
# replica and with three, and the fail-over time after a kill -9 of the
# leader (median of 5).
bench-engine: tools
	DEPLOYD_REQUIRE_TOOLS=1 $(GO) test -run '^$$' -bench '^BenchmarkEngineVsKubectl$$' -benchtime 1x -count 3 -timeout 30m ./engine/
	DEPLOYD_REQUIRE_TOOLS=1 $(GO) test -run '^$$' -bench '^BenchmarkEngineReplicas$$' -benchtime 1x -timeout 30m -v ./cmd/deployd/load/

bench: bench-fold
	$(GO) test -run '^$$' -bench 'Apply|List|Derive' -benchmem -benchtime 300x ./projection/
	$(GO) test -run '^$$' -bench 'Load' -benchmem -benchtime 3x ./projection/
	$(GO) test -run '^$$' -bench ListRoute -benchmem -benchtime 200x ./handlers/
	$(GO) test -run '^$$' -bench Fanout -benchtime 5s ./stream/

coldstart: tools
	DEPLOYD_REQUIRE_TOOLS=1 $(GO) test -run '^$$' -bench ColdStart -benchtime 1x -timeout 2h ./cmd/deployd/

# The serve binary over 10,000 Apps in one cluster and in two of 5,000 (three
# real API servers), alternated five times: time to ready, RSS and the lists;
# then the lists with the second cluster's API server stopped, and a start
# while it is down.
.PHONY: coldstart-clusters
coldstart-clusters: tools
	DEPLOYD_REQUIRE_TOOLS=1 $(GO) test -v -run '^$$' -bench '^BenchmarkServeClusters$$' -benchtime 1x -timeout 3h ./cmd/deployd/

# A ready deployd's memory at the 10,000-App fleet, alone and with 2,000
# streams: resident set, the runtime's account and the heap by owner (the
# heap profiles are saved; the log says where). BASELINE=<deployd binary>
# measures that binary first, on the same fleet.
bench-memory: tools
	DEPLOYD_REQUIRE_TOOLS=1 DEPLOYD_MEMORY_BASELINE=$(BASELINE) $(GO) test -v -run '^$$' -bench '^BenchmarkMemory$$' -benchtime 1x -timeout 2h ./cmd/deployd/

# 10,000 concurrent streams on one deployd process: memory per client and
# the latency of one change to all of them.
sse-clients: tools
	DEPLOYD_REQUIRE_TOOLS=1 $(GO) test -run '^$$' -bench SSEClients -benchtime 1x -timeout 30m ./cmd/deployd/

# deployd, the API server and the limit side by side on one fleet in one
# run (cmd/deployd/load): DEPLOYD_COMPARE_APPS, _REPLICAS, _WATCHERS,
# _RATES and _SECONDS size it; DEPLOYD_COMPARE_OUT receives the tables.
bench-compare: tools
	DEPLOYD_REQUIRE_TOOLS=1 $(GO) test -run '^$$' -bench '^BenchmarkSideBySide$$' -benchtime 1x -timeout 90m -v ./cmd/deployd/load/

# 500 clusters of 100 Apps (50,000), aliases of five real API servers:
# readiness, memory, the lists and an App's detail (BENCHMARKS.md, "At Argo
# CD's largest scale"; sizes from DEPLOYD_SCALE_*).
bench-scale: tools
	DEPLOYD_REQUIRE_TOOLS=1 $(GO) test -run '^$$' -bench '^BenchmarkServeScale$$' -benchtime 1x -timeout 2h -v ./cmd/deployd/

# The fault scenarios at the issue's scale: 10,000 Apps × 10 pods, thousands
# of clients (make test runs a smoke of the same test). The summary table is
# also written to $DEPLOYD_CHAOS_OUT when set.
chaos: tools
	DEPLOYD_REQUIRE_TOOLS=1 DEPLOYD_CHAOS_SCALE=full $(GO) test -run '^TestChaos$$' -count=1 -v -timeout 90m ./cmd/deployd/load/
