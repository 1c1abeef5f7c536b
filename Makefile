# Test entry points. Needs Go, a C compiler (go test -race uses cgo), and
# either DATABASE_URL or local PostgreSQL server binaries: the tests run
# through scripts/test-postgres.sh, which starts a throwaway cluster.
#
#   make test                              gofmt check, then go test -race -vet=all of the core, then of the
#                                          stores and the payments packages on PostgreSQL and SQLite
#   make test GOTESTFLAGS='-run TestX -v'  extra go test flags
#   make test PKGS=./pgstore/...           only some packages (of any module of go.work)
#   make test-short                        same, with -short
#   make test-cmd                          paymentsd's, idem-gateway's and bankd's end-to-end tests, and the tools'
#   make test-adapters                     the adapters (gin, echo, gRPC, NATS, OpenTelemetry, Prometheus), the
#                                          routers' and repository libraries' tests (GORM, sqlx, lib/pq)
#   make test-readme                       README.md's commands as they are, in a scratch module outside the tree
#                                          with an empty module cache, on a throwaway PostgreSQL (scripts/readme-test.sh)
#   make vet | make fmt                    go vet of every module but consoletest | gofmt -w
#   make lint-openapi                      api/openapi.yaml against Redocly's recommended-strict rules (needs npm)
#   make chaos                             the chaos harness, short profile (docs/chaos.md)
#   make chaos-long                        the chaos soak: 10 minutes per idempotency mode
#   make test-failover                     the chaos harness on a pg_auto_failover formation, its primary
#                                          SIGKILLed 3 times (installs pg_auto_failover with apt-get when missing)
#   make chaos-citus                       the chaos harness on a Citus cluster (a coordinator, two workers), a worker
#                                          restarted and a shard moved under payments (builds Citus first, as test-citus)
#   make test-rabbitmq                     the RabbitMQ adapter's tests, against AMQP_URL
#                                          (default amqp://guest:guest@127.0.0.1:5672/), then
#                                          paymentsd's commands over it (go test -tags rabbitmq);
#                                          its broker restart needs rabbitmqctl (run as root)
#   make test-mysql                        the MySQL store's and wallet's tests, and paymentsd's end-to-end tests,
#                                          against MariaDB: MYSQL_URL, a server on 127.0.0.1:3306, or a throwaway
#                                          mariadbd (scripts/test-mysql.sh); PostgreSQL as for make test
#   make test-pgbouncer                    pgstore's tests through a real PgBouncer (transaction mode)
#   make test-partitioned                  pgstore's, the wallet's and paymentsd's end-to-end tests on a key table
#                                          and wallet hash-partitioned by user (16 partitions, PG_PARTITIONS)
#   make test-citus                        pgstore's, the wallet's, paymentsd's and idem-gateway's tests on a Citus cluster
#                                          (a coordinator, two workers), every table distributed by user (PG_CITUS;
#                                          builds Citus into the local PostgreSQL 15 first: ../shared/citus/build.sh)
#   make test-console                      the operator console in a real headless Chromium against paymentsd and
#                                          idem-gateway on PostgreSQL and SQLite (installs chromium with apt-get when
#                                          missing; writes docs/console/*.png)
#   make test-clients                      the client recipes (docs/clients.md) in Python, Node and Go against
#                                          paymentsd and idem-gateway on PostgreSQL (installs python3-requests with
#                                          apt-get and the pinned npm packages when missing)
#   make model                             model-check the key protocol and the payout flow with SPIN
#                                          (docs/model.md; installs spin with apt-get when missing)
#   make bench                             the benchmark: paymentsd on a durable PostgreSQL (results/bench)
#   make bench-growth                      the benchmark with 10 million keys against an empty table
#   make bench-gateway                     only idem-gateway on PostgreSQL in front of upstreams in Go and Node (results/bench/gateway.md)
#   make bench-memory                      paymentsd's peak memory under hostile uploads (results/bench/memory.md)
#   make bench-citus                       fresh and replay on a durable Citus cluster (a coordinator, two workers,
#                                          32 shards) beside one durable PostgreSQL (results/bench/citus)
#   make bench-sweep                       paymentsd's latency while 'paymentsd keys sweep' deletes 1 million of
#                                          10 million keys (results/bench-sweep; about 10 minutes, up to 16 GB of disk)
#   make check-modules                     each adapter and store in a scratch module outside the tree:
#                                          go mod tidy, go build, its module graph (scripts/check-modules.sh)
#   make release                           paymentsd, bankd, idem-gateway for linux and darwin, amd64 and arm64:
#                                          dist/*.tar.gz and dist/SHA256SUMS (VERSION, COMMIT; docs/releasing.md)
#   make release-tags VERSION=v0.1.0       print the tags of every module for a release (docs/releasing.md)
#   DATABASE_URL=postgres://... make test  use an existing server

GO          ?= go
GOFMT       ?= gofmt
GOTESTFLAGS ?=
# make test runs two sets, smallest module graph first, so that from an
# empty module cache the first results come before the stores' graphs are
# downloaded and built: the core (the
# standard library and uuid; no database), then the stores and the payments
# packages (pgx, pure-Go SQLite) on PostgreSQL. A pattern names one module's
# packages (./... alone the root's). go test builds and prints in the order
# given, a package named twice counting once: ./internal/... (its JSON
# canonicalizer needs a third of the standard library the others need)
# comes first. PKGS, when given, replaces both.
CORE_PKGS  ?= ./internal/... ./... ./idemshared/...
STORE_PKGS ?= ./pgstore/... ./sqlstore/... ./sqlitestore/... ./payments/...
PKGS       ?=
# make test-cmd: the commands' module, whose graph holds every door's
# dependencies (gRPC, NATS and its embedded server, OpenTelemetry,
# Prometheus, the MySQL and AMQP clients) and the tools' (toxiproxy, gonum).
CMD_PKGS   ?= ./cmd/...
# make test-adapters: the adapters whose frameworks pull large graphs (gin,
# echo, gRPC, NATS, OpenTelemetry, Prometheus), each testing itself on
# memstore, the routers' module (chi, echo v4), the repository libraries'
# (GORM, sqlx, lib/pq) and the tests that need what those modules must not
# require (module integration: sqlstore on PostgreSQL through pgx's
# database/sql driver, NATS's embedded server, OpenTelemetry's SDK), but
# for idemamqp's: RABBITMQ_PKGS.
ADAPTER_PKGS ?= ./idemecho/... ./idemgin/... ./idemgrpc/... ./idemnats/... ./idemotel/... ./idemprom/... ./routers/... ./repositories/... $(INTEGRATION_PKGS)
INTEGRATION_PKGS ?= ./integration/ ./integration/idemnats/... ./integration/idemotel/... ./integration/sqlstore/...
# Modules whose tests need a broker that is not embedded: make test-rabbitmq.
RABBITMQ_PKGS ?= ./idemamqp/... ./integration/idemamqp/...
# paymentsd's end-to-end tests over RabbitMQ, in files built with -tags rabbitmq.
RABBITMQ_E2E  ?= -tags rabbitmq -run AMQP ./cmd/paymentsd
# The modules whose tests need MySQL or MariaDB: make test-mysql runs them.
MYSQL_PKGS  ?= ./mysqlstore/... ./payments/mysqlledger/...
# Packages whose tests run on MySQL too when built with -tags mysql:
# paymentsd's end-to-end tests (their tests that name PostgreSQL need it,
# hence TEST_PG around them as well).
MYSQL_TAGGED_PKGS ?= ./cmd/paymentsd/...
# idem-gateway's keys commands (list, resolve, the audit entry) on MySQL.
MYSQL_GATEWAY ?= -run '^TestOperatorResolvesUnknownOutcomes$$' ./cmd/idem-gateway
TEST_MYSQL  ?= ./scripts/test-mysql.sh
TEST_PG     ?= ./scripts/test-postgres.sh
# go test vets each package it tests, with every analyzer go vet runs, on
# the build it tests: nothing is compiled twice.
GOTEST_NOPG  = CGO_ENABLED=1 $(GO) test -race -vet=all -count=1 -timeout 15m
GOTEST       = CGO_ENABLED=1 $(TEST_PG) $(GO) test -race -vet=all -count=1 -timeout 15m
# What make test-partitioned runs on the schema hash-partitioned by user:
# pgstore's conformance and sweep tests, the wallet's and paymentsd's tests.
PARTITIONED_STORE ?= -run '^(TestConformance|TestKeysInEveryQueryMode|TestSweep|TestSweepPartitioned|TestOnce|TestRun)$$' ./pgstore
PARTITIONED_PKGS  ?= ./payments/pgledger/...
# paymentsd's end-to-end tests of the key table and the wallet through each
# door (HTTP, gRPC, the queue, payouts and their completer, the keys and
# sweep commands, migrate); its bounds and flag tests touch no table.
PARTITIONED_E2E   ?= -run '^(TestAPI|TestMigrate|TestTypedClient|TestTypedClientPayouts|TestConcurrency|TestDepositMinuteNet|TestGRPC|TestGRPCReadsAndPayouts|TestInFlightWhileRunning|TestKeyAfterRetention|TestKeysShow|TestSweep|TestPayouts|TestPayoutSIGKILL|TestQueueCommands)$$' ./cmd/paymentsd

.DEFAULT_GOAL := test
.PHONY: test-console test-clients
.PHONY: check-modules release release-tags
.PHONY: test test-short test-cmd test-adapters test-readme test-rabbitmq test-mysql vet fmt fmt-check check-cc chaos chaos-long test-failover chaos-citus test-pgbouncer test-partitioned test-citus bench bench-citus bench-growth bench-gateway bench-memory bench-sweep model lint-openapi

# Prerequisites run one at a time, left to right: the C compiler check comes
# before anything else, and the tests run only if the checks pass.
.NOTPARALLEL:

test: check-cc fmt-check
ifeq ($(strip $(PKGS)),)
	$(GOTEST_NOPG) $(GOTESTFLAGS) $(CORE_PKGS)
	$(GOTEST) $(GOTESTFLAGS) $(STORE_PKGS)
	@echo "make test: not run here (CI runs them all, .ci/run):"
	@echo "  make test-cmd       paymentsd, idem-gateway, bankd and the tools, end to end ($(CMD_PKGS))"
	@echo "  make test-adapters  gin, echo, gRPC, NATS, OpenTelemetry, Prometheus, the routers, GORM, sqlx, lib/pq"
	@echo "  make test-mysql     $(MYSQL_PKGS) and paymentsd on MySQL (MariaDB or MySQL: MYSQL_URL, or apt-get install mariadb-server)"
	@echo "  make test-rabbitmq  $(RABBITMQ_PKGS) and paymentsd over AMQP (RabbitMQ: AMQP_URL, or apt-get install rabbitmq-server)"
else
	$(GOTEST) $(GOTESTFLAGS) $(PKGS)
endif

test-short:
	$(MAKE) test GOTESTFLAGS="-short $(GOTESTFLAGS)"

test-cmd: check-cc fmt-check
	$(GOTEST) $(GOTESTFLAGS) $(CMD_PKGS)

test-adapters: check-cc fmt-check
	$(GOTEST) $(GOTESTFLAGS) $(ADAPTER_PKGS)

# README.md's blocks as a new user pastes them: a scratch module outside the
# tree, a clone of this checkout, an empty module cache, the example on a
# throwaway PostgreSQL and its curl sent twice.
test-readme:
	./scripts/readme-test.sh

# The RabbitMQ adapter against a real RabbitMQ at AMQP_URL (default
# amqp://guest:guest@127.0.0.1:5672/): its tests fail, saying what to
# install, when none answers. Its broker restart (rabbitmqctl stop_app,
# start_app) needs that RabbitMQ on this machine and rabbitmqctl, run as
# root. Then paymentsd's commands over it, after the adapter's tests: the
# restart must not drop their connections. make test does not need RabbitMQ.
test-rabbitmq: check-cc
	$(GOTEST) $(GOTESTFLAGS) $(RABBITMQ_PKGS)
	$(GOTEST) $(GOTESTFLAGS) $(RABBITMQ_E2E)

# The MySQL store (mysqlstore) and wallet (mysqlledger) against a real
# MariaDB or MySQL, not in PKGS, so that make test needs only Go and
# PostgreSQL; then paymentsd's end-to-end tests on it (-tags mysql). The
# tests fail, never skip, when no server is reachable.
test-mysql: check-cc fmt-check
	$(GO) vet $(MYSQL_PKGS)
	$(GO) vet -tags mysql $(MYSQL_TAGGED_PKGS) ./cmd/idem-gateway
	CGO_ENABLED=1 $(TEST_MYSQL) $(GO) test -race -count=1 -timeout 15m $(GOTESTFLAGS) $(MYSQL_PKGS)
	CGO_ENABLED=1 $(TEST_PG) $(TEST_MYSQL) $(GO) test -tags mysql -race -count=1 -timeout 20m $(GOTESTFLAGS) $(MYSQL_TAGGED_PKGS)
	CGO_ENABLED=1 $(TEST_MYSQL) $(GO) test -tags mysql -race -count=1 -timeout 10m $(GOTESTFLAGS) $(MYSQL_GATEWAY)

# The key table and the wallet hash-partitioned by user (paymentsd migrate
# --partitions 16): the store's conformance suite and sweep tests, the
# wallet's tests and paymentsd's end-to-end tests on that schema
# (docs/operations.md). The rest of pgstore's tests run in make test.
test-partitioned: check-cc
	PG_PARTITIONS=16 $(GOTEST) $(GOTESTFLAGS) $(PARTITIONED_STORE)
	PG_PARTITIONS=16 $(GOTEST) $(GOTESTFLAGS) $(PARTITIONED_PKGS)
	PG_PARTITIONS=16 $(GOTEST) $(GOTESTFLAGS) $(PARTITIONED_E2E)

# The same tests on a Citus cluster (docs/operations.md, "Running on
# Citus"): a coordinator and two workers, throwaway clusters of
# scripts/test-citus.sh, each test's tables distributed by user as
# `paymentsd migrate --citus` does (PG_CITUS=1); and idem-gateway's tests
# on PostgreSQL, its key table distributed by `idem-gateway migrate
# --citus`; paymentsd over RabbitMQ when a broker answers at
# 127.0.0.1:5672 (AMQP_URL). Citus is built into the local PostgreSQL 15
# first (../shared/citus/build.sh: nothing to do once installed).
CITUS_BUILD   ?= ../shared/citus/build.sh
TEST_CITUS    ?= ./scripts/test-citus.sh
GOTEST_CITUS   = CGO_ENABLED=1 $(TEST_CITUS) $(GO) test -race -count=1 -timeout 20m
CITUS_STORE   ?= -run '^(TestConformance|TestSweep|TestOnce|TestRun|TestSweepDistributed)$$' ./pgstore
# The store in pgx's query modes but the simple protocol, which sends the
# store's SET LOCAL and its statement as one query string: Citus 13.2
# passes that whole string to the worker (docs/operations.md, "Running on
# Citus", limits).
CITUS_MODES   ?= -run '^TestKeysInEveryQueryMode$$/^(Exec|CacheDescribe)$$' ./pgstore
CITUS_E2E     ?= -run '^(TestAPI|TestMigrate|TestTypedClient|TestTypedClientPayouts|TestConcurrency|TestDepositMinuteNet|TestGRPC|TestGRPCReadsAndPayouts|TestInFlightWhileRunning|TestKeyAfterRetention|TestKeysShow|TestSweep|TestPayouts|TestPayoutSIGKILL|TestQueueCommands|TestMigrateCitus)$$' ./cmd/paymentsd
CITUS_GATEWAY ?= -run '^(TestResolveSeenByCachingReplicas|TestKeysListStates|TestSweepKeepsUnknownOutcomes|TestOperatorResolvesUnknownOutcomes|TestReplicasKilled)$$' ./cmd/idem-gateway
AMQP_ADDR     ?= 127.0.0.1:5672
test-citus: check-cc
	$(CITUS_BUILD) >/dev/null
	$(GOTEST_CITUS) $(GOTESTFLAGS) $(CITUS_STORE)
	$(GOTEST_CITUS) $(GOTESTFLAGS) $(CITUS_MODES)
	$(GOTEST_CITUS) $(GOTESTFLAGS) $(PARTITIONED_PKGS)
	$(GOTEST_CITUS) $(GOTESTFLAGS) $(CITUS_E2E)
	$(GOTEST_CITUS) $(GOTESTFLAGS) $(CITUS_GATEWAY)
	@if bash -c "exec 3<>/dev/tcp/$(subst :,/,$(AMQP_ADDR))" 2>/dev/null; then \
		$(GOTEST_CITUS) $(GOTESTFLAGS) $(RABBITMQ_E2E); \
	else echo "make test-citus: no RabbitMQ at $(AMQP_ADDR): paymentsd over AMQP not run (make test-rabbitmq needs one)"; fi

# The chaos harness: paymentsd replicas behind a retrying front proxy,
# SIGKILLs, broken database links and PostgreSQL restarts while payments
# flow, payouts through a faulty, restarted bankd, idem-gateway replicas
# in front of two upstreams under the same faults, then the invariants
# (docs/chaos.md). It starts its own throwaway
# PostgreSQL from the local server binaries. Extra flags: CHAOSFLAGS.
CHAOSFLAGS ?=
chaos:
	$(GO) run ./cmd/chaos -profile short $(CHAOSFLAGS)

chaos-long:
	$(GO) run ./cmd/chaos -profile long $(CHAOSFLAGS)

# The chaos harness on a pg_auto_failover formation (docs/operations.md,
# "Failover"): a monitor, a primary and two synchronous standbys on
# loopback; the primary SIGKILLed three times while payments flow; fails
# on any double effect, lost acknowledged write, key without a final answer
# or payout paid twice. FAILOVERFLAGS: e.g. -failover-async for the contrast.
FAILOVERFLAGS ?= -modes atomic
test-failover:
	./scripts/test-failover.sh $(FAILOVERFLAGS)

# The chaos harness on a Citus cluster of its own (docs/chaos.md,
# docs/operations.md "Running on Citus"): a coordinator and two workers on
# free loopback ports, every table distributed by migrate --citus; both
# modes and the gateway phase under the short profile's faults but the
# queue phase, plus the worker holding the busiest user's shard stopped
# (pg_ctl stop -m immediate) and started again, then that shard moved to
# the other worker (citus_move_shard_placement). CHAOSCITUSFLAGS: extra
# flags of cmd/chaos.
CHAOSCITUSFLAGS ?=
chaos-citus:
	CITUS_BUILD=$(CITUS_BUILD) ./scripts/test-chaos-citus.sh $(CHAOSCITUSFLAGS)

# The store's tests through a real PgBouncer in transaction pooling mode,
# in front of the throwaway cluster (scripts/with-pgbouncer.sh; needs
# pgbouncer: apt-get install pgbouncer): the store's suite and paymentsd's
# end-to-end tests. PGBOUNCER_PKGS names the packages.
PGBOUNCER_PKGS ?= ./pgstore/... ./cmd/paymentsd/...
test-pgbouncer: check-cc
	CGO_ENABLED=1 $(TEST_PG) ./scripts/with-pgbouncer.sh $(GO) test -race -count=1 -timeout 15m $(GOTESTFLAGS) $(PGBOUNCER_PKGS)

# The operator console (docs/console.md), driven in a real headless
# Chromium against real paymentsd and idem-gateway processes, on
# PostgreSQL and SQLite; a module of its own (consoletest), so the browser
# driver stays out of every library module's graph. Extra flags:
# GOTESTFLAGS.
test-console:
	./scripts/test-console.sh $(GOTESTFLAGS)

# The client recipes of docs/clients.md with the real libraries (Python's
# requests, Node's axios-retry, go-retryablehttp, idem's client) against
# paymentsd and idem-gateway on PostgreSQL; a module of its own
# (clienttest), so no retry library enters a library module's graph.
# Installs python3-requests (apt-get) and the pinned npm packages (npm ci)
# when missing. Extra flags: GOTESTFLAGS.
test-clients:
	./scripts/test-clients.sh $(GOTESTFLAGS)

# The protocol, model-checked (docs/model.md): every property holds on the
# Promela models in model/ and is violated by every broken variant.
# MODELFLAGS: a filter, e.g. MODELFLAGS=payout.
MODELFLAGS ?=
model:
	./scripts/model.sh $(MODELFLAGS)

# The benchmark (docs/benchmarks.md): a throwaway cluster with fsync and
# synchronous_commit on (PG_DURABLE=1), or DATABASE_URL. Writes the table
# and charts into results/bench. Extra flags: BENCHFLAGS (go run ./cmd/bench -h).
BENCHFLAGS ?=
bench:
	PG_DURABLE=1 $(TEST_PG) $(GO) run ./cmd/bench $(BENCHFLAGS)

# paymentsd on a Citus cluster (scripts/test-citus.sh, durable, Citus's
# default of 32 shards per table) and on one PostgreSQL started inside it,
# each variant's twins back to back in every round (docs/benchmarks.md).
# Citus must be installed (make test-citus builds it). Short by default:
# BENCHFLAGS='-rounds 5 -duration 10s' for the full length.
CITUS_BENCHFLAGS ?= -rounds 3 -duration 5s
bench-citus:
	PG_DURABLE=1 CITUS_SHARD_COUNT=$${CITUS_SHARD_COUNT:-32} scripts/test-citus.sh \
		sh -c 'export CITUS_URL="$$DATABASE_URL"; unset DATABASE_URL; exec "$$@"' sh \
		$(TEST_PG) $(GO) run ./cmd/bench -citus $(CITUS_BENCHFLAGS) $(BENCHFLAGS)

bench-growth:
	PG_DURABLE=1 $(TEST_PG) $(GO) run ./cmd/bench -growth $(BENCHFLAGS)

# idem-gateway alone (docs/benchmarks.md): fresh and replay through it in
# front of an upstream in Go and one in Node (npm installs pg for it), and
# each upstream called directly. Profiles: BENCHFLAGS='-pprof DIR'.
bench-gateway:
	PG_DURABLE=1 $(TEST_PG) $(GO) run ./cmd/bench -gateway $(BENCHFLAGS)

# paymentsd's peak resident memory (VmHWM) under hostile uploads: 1 MiB
# bodies, stalled bodies, idle keep-alive connections (results/bench/memory.md).
bench-memory:
	PG_DURABLE=1 $(TEST_PG) $(GO) run ./cmd/bench -memory $(BENCHFLAGS)

# The sweep under load (docs/operations.md): paymentsd serving an open-loop
# load while 'paymentsd keys sweep' deletes the expired million of 10
# million keys, in windows alternating with windows where it is stopped.
# Writes results/bench-sweep. Smaller: BENCHFLAGS='-sweep-rows 300000 -sweep-expired 30000'.
bench-sweep:
	PG_DURABLE=1 $(TEST_PG) $(GO) run ./cmd/bench -sweep $(BENCHFLAGS)

# What a user outside the repository gets: a scratch module per adapter and
# store, with replace lines for the idem modules it imports only; fails when
# its graph holds a driver, SQLite, gonum, toxiproxy or a test library that
# no built package imports.
check-modules:
	./scripts/check-modules.sh

# The release archives and their sums in dist/ (gitignored); VERSION and
# COMMIT default to git describe and HEAD.
release:
	./scripts/release.sh

release-tags:
	./scripts/release-tags.sh $(VERSION)

# Every module of go.work but consoletest (make test-console), as a whole;
# each test target vets what it tests (go test -vet=all).
vet:
	$(GO) vet $(CORE_PKGS) $(STORE_PKGS) $(CMD_PKGS) $(ADAPTER_PKGS) $(RABBITMQ_PKGS) $(MYSQL_PKGS)
	$(GO) vet -tags rabbitmq ./cmd/paymentsd
	$(GO) vet -tags mysql $(MYSQL_TAGGED_PKGS) ./cmd/idem-gateway

# api/openapi.yaml against Redocly's recommended-strict ruleset (redocly.yaml;
# known exceptions, each with its reason, in .redocly.lint-ignore.yaml). The
# pinned @redocly/cli is installed with npm into .cache/redocly when missing;
# npm's log is printed only when the install fails.
REDOCLY_VERSION ?= 2.77.0
REDOCLY_DIR     ?= .cache/redocly
REDOCLY          = $(REDOCLY_DIR)/node_modules/.bin/redocly
lint-openapi:
	@if [ ! -x "$(REDOCLY)" ]; then \
	  log=$$(mktemp); \
	  if ! npm install --prefix "$(REDOCLY_DIR)" --no-audit --no-fund "@redocly/cli@$(REDOCLY_VERSION)" >"$$log" 2>&1; then \
	    cat "$$log" >&2; rm -f "$$log"; exit 1; \
	  fi; \
	  rm -f "$$log"; \
	fi
	$(REDOCLY) lint --config redocly.yaml

# Go sources: tracked and untracked-but-not-ignored files of the git checkout;
# outside git (tarball, or git refusing a checkout owned by another user) all
# *.go files. Skips vendor/, testdata/ and files deleted from the work tree.
GOFILES_CMD = { git ls-files --cached --others --exclude-standard -- '*.go' 2>/dev/null \
	|| find . -name '*.go' -not -path './.git/*' | sed 's|^\./||'; } \
	| grep -v -e '^vendor/' -e '^testdata/' -e '/testdata/' \
	| while read -r f; do if [ -f "$$f" ]; then echo "$$f"; fi; done

fmt:
	@files=$$($(GOFILES_CMD)); \
	if [ -n "$$files" ]; then $(GOFMT) -l -w $$files; fi

fmt-check:
	@files=$$($(GOFILES_CMD)); \
	if [ -z "$$files" ]; then exit 0; fi; \
	bad=$$($(GOFMT) -l $$files) || exit 1; \
	if [ -n "$$bad" ]; then \
	  echo "gofmt: these files are not formatted (run 'make fmt'):" >&2; \
	  echo "$$bad" | sed 's/^/    /' >&2; \
	  exit 1; \
	fi

# -race needs cgo, i.e. the C compiler cgo will call (go env CC; gcc by default).
check-cc:
	@cc=$$($(GO) env CC 2>/dev/null); cc=$${cc%% *}; cc=$${cc:-gcc}; \
	if ! command -v "$$cc" >/dev/null 2>&1; then \
	  echo "error: go test -race needs cgo, but the C compiler '$$cc' was not found: install gcc (Debian/Ubuntu: apt-get install build-essential; macOS: xcode-select --install) or set CC" >&2; \
	  exit 1; \
	fi
