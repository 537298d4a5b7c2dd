# leasestore — run `make help` for the list of targets.

GO          ?= go
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
# -race also turns on checkptr, the compiler's checks of unsafe.Pointer
# rules, in every package. modernc.org's SQLite is C translated to Go, all
# pointer arithmetic: there the checks took about half the CPU of the
# SQLite tests. They stay on for every other package (ours use no unsafe);
# the race detector itself stays on everywhere.
NOCHECKPTR  := -gcflags='modernc.org/...=-d=checkptr=0'
TEST_FLAGS  ?= -race $(NOCHECKPTR) -count=1 -timeout 20m
# The longest test packages first: go test starts packages in the order
# given, two at a time on two cores, and the last ones to start decide when
# the run ends; the packages that mostly wait on timers (memstore's and the
# scheduler's suites) are among the first, so that they wait while others
# work. (-p 4 ran faster on two cores, but loaded the machine enough to
# fail timing-bound cases: SQLite's single writer, a fork/exec of a
# just-written binary.)
TEST_PKGS   ?= ./sqlstore/postgres ./sqlstore/sqlite ./cmd/leasectl ./kvstore/etcd ./memstore ./httpapi \
               ./cmd/leasectl/cli ./scheduler ./examples/scanner ./...
# Builds leave the checkout's path out of their cache keys (and of the
# binaries), so a fresh clone reuses what an earlier one compiled and vetted.
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)
BENCH       ?= .
BENCH_FLAGS ?= -run '^$$' -benchmem -benchtime 2s
PG_DSN      ?= postgres://root@127.0.0.1:5432/test?sslmode=disable

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-12s %s\n", $$1, $$2}'

.PHONY: test
test: test-note lint ## gofmt check, go vet, staticcheck, then every test with -race.
	$(GO) test $(TEST_FLAGS) $(TEST_PKGS)

# test-note tells, before lint's first step (minutes on a fresh machine),
# that the PostgreSQL tests may be skipped. Lint's steps wait for it under
# make test (order-only, so that -j keeps the order), not under make lint.
.PHONY: test-note
test-note:
	@if [ -z "$$LEASESTORE_TEST_POSTGRES_DSN" ]; then \
	  echo "note: LEASESTORE_TEST_POSTGRES_DSN is not set: the PostgreSQL tests start a testcontainer if Docker answers, else they are SKIPPED"; \
	  echo "      (export LEASESTORE_TEST_POSTGRES_DSN='$(PG_DSN)' for a local server; see docs/testing.md)"; \
	fi
fmt-check vet cross staticcheck: | $(if $(filter test,$(MAKECMDGOALS)),test-note)

.PHONY: lint
lint: fmt-check vet cross staticcheck ## gofmt check, go vet, the other systems' builds and staticcheck.

.PHONY: fmt
fmt: ## Format every Go file in place.
	gofmt -w $$(git ls-files '*.go')

.PHONY: fmt-check
fmt-check: ## Fail if gofmt would change a file.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

.PHONY: vet
vet: ## go vet.
	$(GO) vet ./...

.PHONY: cross
cross: ## leasectl builds, and every package and its tests vet, for macOS and Windows too (run keeps CMD alone there: no process groups on Windows), and for 32-bit Linux (386, arm).
	GOOS=darwin $(GO) build -o /dev/null ./cmd/leasectl
	GOOS=windows $(GO) build -o /dev/null ./cmd/leasectl
	GOOS=darwin $(GO) vet ./...
	GOOS=windows $(GO) vet ./...
	GOOS=linux GOARCH=386 CGO_ENABLED=0 $(GO) vet ./...
	GOOS=linux GOARCH=arm CGO_ENABLED=0 $(GO) vet ./...

.PHONY: staticcheck
staticcheck: ## staticcheck (pinned version, fetched through the module proxy).
	$(STATICCHECK) ./...

.PHONY: bench
bench: ## Run the benchmarks (backends beside their raw-statement baselines), then print a table with ratios to raw.
	LEASESTORE_TEST_POSTGRES_DSN=$${LEASESTORE_TEST_POSTGRES_DSN:-$(PG_DSN)} $(GO) test $(BENCH_FLAGS) -bench '$(BENCH)' ./... 2>&1 \
	  | $(GO) run ./internal/testkit/benchtable

.PHONY: bench-peers
bench-peers: ## leasestore beside the raw pgx pair and cirello.io/pglock (module bench/peers), interleaved rounds; PEERS_FLAGS adds flags.
	cd bench/peers && $(GO) run . -dsn "$${LEASESTORE_TEST_POSTGRES_DSN:-$(PG_DSN)}" -sqlite $(PEERS_FLAGS)

.PHONY: fuzz
fuzz: ## Fuzz the key encoding for 30s.
	$(GO) test -run '^$$' -fuzz FuzzKeyEncoding -fuzztime 30s ./protocol

.PHONY: chaos
chaos: ## Linearizability checks under faults: a throwaway PostgreSQL cluster (initdb; needs the server binaries) crashing mid-run, and 3-member etcd clusters losing members, leaders and quorum; several minutes.
	LEASESTORE_CHAOS=1 $(GO) test $(TEST_FLAGS) -v -run 'Chaos' ./sqlstore/postgres/
	LEASESTORE_CHAOS=1 $(GO) test $(TEST_FLAGS) -v -run 'Chaos|Fault' ./kvstore/etcd/

.PHONY: demo
demo: ## Run the demo on the embedded SQLite store.
	$(GO) run ./cmd/leasectl demo

.PHONY: db-up
db-up: ## Start a PostgreSQL 15 and a one-member etcd for development (docker compose) and wait until healthy.
	docker compose up -d --wait

.PHONY: db-down
db-down: ## Stop the development PostgreSQL and etcd and delete their data.
	docker compose down -v
