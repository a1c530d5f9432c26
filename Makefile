# zkd — common tasks. `make test` is the test command the README and CI use.
GO        ?= go
PKGS      ?= ./...
FUZZTIME  ?= 20s
BENCHTIME ?= 1s
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
# vet and staticcheck skip the forks of upstream code (internal/third_party), kept as upstream
# wrote it so that a rebase stays a diff of zkd's own changes.
LINTPKGS  ?= $(shell $(GO) list $(PKGS) | grep -v /internal/third_party/)

.PHONY: all build test test-recipes-cluster test-forks test-outside test-consensus-long test-short test-zookeeper soak-clients run cluster bench bench-compare bench-locks bench-scale bench-flood fuzz lint vet fmt-check staticcheck conformance compat client-matrix client-matrix-check clean

all: build

## build: compile every package and the binaries under cmd/ into bin/
build:
	$(GO) build $(PKGS)
	@if ls cmd/*/main.go >/dev/null 2>&1; then mkdir -p bin && $(GO) build -buildvcs=auto -o bin/ ./cmd/...; fi

## test: the full test suite with the race detector (needs ZooKeeper for the oracle checks; see README).
## Without ZooKeeper a banner says so before and after the run, and the oracle checks skip.
test:
	@./scripts/zk-banner.sh
	$(GO) test -race -count=1 -timeout 20m $(PKGS); status=$$?; ./scripts/zk-banner.sh; exit $$status

## test-recipes-cluster: the lock recipes' suite against an in-process 3-server zkd cluster (clients
## given every member), as `make test` runs it against a standalone server and test-zookeeper
## against real ZooKeeper
test-recipes-cluster:
	RECIPES_TARGET=cluster $(GO) test -race -count=1 -timeout 20m ./recipes/

## test-forks: upstream's own test suites of hashicorp/raft and raft-wal, run on zkd's forks of them
## (internal/third_party; `scripts/forks.sh diff` prints what the forks change)
test-forks:
	./scripts/forks.sh test

## test-outside: zkd as a dependency of a module outside this tree (the README's embedding
## examples, server/zkdtest/recipes), and `go install ...@latest` from a module proxy holding this tree
test-outside:
	./scripts/outside.sh

## test-consensus-long: consensus's porcupine linearizability check under faults for a minute per run
## (ZKD_SEED=<seed> replays a logged run)
test-consensus-long:
	$(GO) test -race -count=1 -timeout 30m -tags long -run 'TestLinearizability$$' ./consensus/

## test-short: quick tests without the race detector
test-short:
	$(GO) test -short -count=1 $(PKGS)

## test-zookeeper: the black-box suites against real Apache ZooKeeper as well (the oracle): the fault
## suite's short mix on a real 3-server ensemble, recipes and the zkbench smoke on a real ZooKeeper,
## conformance on a real ensemble too (needs Debian's zookeeper package)
test-zookeeper:
	@./scripts/zk-banner.sh
	CHAOS_TARGET=zookeeper $(GO) test -race -count=1 -timeout 20m -run '^TestFaults$$' ./internal/testkit/chaos/
	RECIPES_TARGET=zookeeper $(GO) test -race -count=1 -timeout 20m ./recipes/
	ZKBENCH_TARGET=zookeeper $(GO) test -race -count=1 -timeout 10m ./cmd/zkbench/
	CONFORMANCE_ZK_ENSEMBLE=1 $(GO) test -race -count=1 -timeout 20m ./conformance/...

## soak-clients: a long-lived Curator and kazoo client creating znodes beside churning sessions, locks,
## latches, semaphores, elections and expired sessions, with zoo.cfg's stock tickTime, for ZKD_SOAK
## (default 10m) on zkd standalone, a zkd cluster and real ZooKeeper (server and ensemble, if
## installed). `make test` runs a 75-second form with a short tickTime.
soak-clients:
	ZKD_SOAK=$${ZKD_SOAK:-10m} $(GO) test -race -count=1 -timeout 120m -v -run '^TestMixedClientsSoak$$' ./server/

## run: run zkd standalone with embedded defaults (./data, port 2181)
run:
	$(GO) run ./cmd/zkd

## cluster: three zkd servers on loopback (clients on 127.0.0.1:2181-2183); Ctrl-C stops them
cluster:
	./examples/cluster/run.sh

## bench: every Go benchmark, with allocations
bench:
	$(GO) test -run='^$$' -bench=. -benchmem -benchtime=$(BENCHTIME) $(PKGS)

## bench-compare: zkd against Apache ZooKeeper side by side; writes docs/benchmarks.md (about 40 minutes;
## BENCHFLAGS="-duration 3s -repeat 1 -memory 100000 -snapshot-znodes 100000" for a quick look)
bench-compare:
	./scripts/bench/run.sh $(BENCHFLAGS)

## bench-locks: LOCKS (default 10000) contenders on one lock, zkd beside Apache ZooKeeper: grants/s,
## enqueue-to-grant latency, notifications per release, server CPU and memory (scripts/bench/lockmem.sh;
## make test runs 1,000 in TestLockContenders)
bench-locks:
	$(GO) build -o $(or $(TMPDIR),/tmp)/zkd-bench-locks ./cmd/zkd
	./scripts/bench/lockmem.sh $(or $(TMPDIR),/tmp)/zkd-bench-locks $(or $(LOCKS),10000)

## bench-scale: zkd beside Apache ZooKeeper at scale: a ClickHouse-shaped tree of 10 M znodes (live heap,
## RSS, restart after kill -9, zkd import of ZooKeeper's data directory), a node of 1 M children, 10 k
## sessions holding 1 M watches; writes the scale section of docs/benchmarks.md (about half an hour;
## scripts/bench/scale.sh for the knobs; make test-zookeeper runs a small form, cmd/zkbench's TestScale)
bench-scale:
	./scripts/bench/scale.sh

## bench-flood: zkd and Apache ZooKeeper under the flood (pipelining flooders, a client that never
## reads, a connect storm) beside well-behaved probes; FLOODFLAGS="-flooders 200 -duration 5s" for a quick look
bench-flood:
	./scripts/bench/flood.sh $(FLOODFLAGS)

## fuzz: every Fuzz target in the module for FUZZTIME each
fuzz:
	./scripts/fuzz.sh $(FUZZTIME)

## lint: gofmt, go vet, staticcheck, and the import-rule tests
lint: fmt-check vet staticcheck
	$(GO) test -count=1 ./internal/lint/

fmt-check:
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(LINTPKGS)

staticcheck:
	$(STATICCHECK) $(LINTPKGS)

## conformance: the ZooKeeper conformance suite (CONFORMANCE_ADDR=host:port to aim it at any server)
conformance:
	$(GO) test -race -count=1 -v ./conformance/... 2>&1 | tee conformance.out | grep -E '^(---|===|ok|FAIL|PASS)' | grep -v '=== RUN' || true
	@! grep -q -- '--- FAIL' conformance.out

## compat: regenerate docs/compatibility.md from a run of the conformance suite against zkd
## (standalone and cluster) and real ZooKeeper (standalone and ensemble)
compat:
	CONFORMANCE_ZK_ENSEMBLE=1 $(GO) test -count=1 -json ./conformance/ > conformance.json || true
	$(GO) run ./conformance/matrix -keep docs/compatibility.md < conformance.json > compatibility.md.new
	mv compatibility.md.new docs/compatibility.md
	@echo "docs/compatibility.md written"

## client-matrix: drive every real client (Java, Curator, kazoo, go-zookeeper,
## node-zookeeper-client, the C client's cli_mt) through every adverse condition on zkd and real
## ZooKeeper and rewrite the "Clients under adverse conditions" section of docs/compatibility.md
## (about 3 minutes, alone and without the race detector: cells depend on timing, so `make test`
## skips it; needs every client: scripts/install-node-client.sh for the Node one)
client-matrix:
	./scripts/install-node-client.sh
	$(GO) test -count=1 -p 1 -timeout 10m -run '^TestClientMatrix$$' ./clientmatrix/ -update

## client-matrix-check: the same run, failing when the committed section is out of date (CI runs it)
client-matrix-check:
	./scripts/install-node-client.sh
	CLIENTMATRIX_CHECK=1 $(GO) test -count=1 -p 1 -timeout 10m -run '^TestClientMatrix$$' ./clientmatrix/

clean:
	rm -rf bin conformance.out conformance.json compatibility.md.new

## chaos: the fault suite of internal/testkit/chaos (needs root: network namespaces) for a long mix: per target,
## CHAOS_RUNS runs (default 3) of CHAOS_DURATION of faults (default 5m), so about 15 minutes of faults
## per target, against zkd and real Apache ZooKeeper (skipped if not installed); about 40 minutes in
## all. Prints a summary table (violations per check, time to serve again per fault kind).
## CHAOS_SEED=<seed> replays a logged schedule; CHAOS_TARGET=zkd or zookeeper runs one target;
## CHAOS_ZKD_BIN=<path> runs a prebuilt zkd. `make test` runs a short mix (about 2-3 minutes, zkd only).
.PHONY: chaos
chaos:
	CHAOS_TARGET=$${CHAOS_TARGET:-zkd,zookeeper} CHAOS_RUNS=$${CHAOS_RUNS:-3} CHAOS_DURATION=$${CHAOS_DURATION:-5m} \
		$(GO) test -race -count=1 -timeout 120m -v -run '^TestFaults$$' ./internal/testkit/chaos/
