# rara: `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# Tests create scratch databases on this server (sqlx::test); any existing database works.
# The samconfig.toml environment for `make deploy`.
ENV ?= default
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/postgres

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-z][a-z-]*:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

.PHONY: demo
demo: ## Run rara end to end on the local default stack
	@scripts/demo.sh

.PHONY: test
test: ## Run the whole test suite (Rust and Python) against real Postgres, SQS (LocalStack) and gRPC
	@TEST_DATABASE_URL=$(TEST_DATABASE_URL) scripts/test.sh

.PHONY: test-faults
test-faults: ## Fault suite (SIGKILL/SIGSTOP runners, duplicate/stale/poison messages, killed connections, long transaction)
	@rm -f "$${CARGO_TARGET_DIR:-target}/fault-summary.txt"
	@eval "$$(scripts/localstack.sh env)" && DATABASE_URL=$(TEST_DATABASE_URL) cargo test -p rara --test faults -- --nocapture --test-threads 4
	@cat "$${CARGO_TARGET_DIR:-target}/fault-summary.txt"

# `make fuzz`: seconds per target, and a seed to reproduce a failure (default: from the clock).
FUZZ_SECONDS ?= 60
FUZZ_SEED ?=

.PHONY: fuzz
fuzz: ## Fuzz the parsers of hostile input (workflow, message, retry, remote) FUZZ_SECONDS (60) each, two at a time; FUZZ_SEED=n reproduces a run
	cargo run --quiet --profile fuzz -p rara-fuzz -- --seconds $(FUZZ_SECONDS) --jobs 2 $(if $(FUZZ_SEED),--seed $(FUZZ_SEED))

.PHONY: lint
lint: ## fmt, clippy -D warnings, rustdoc, the book and its links, file/function/cycle bounds, commit subjects, no OpenSSL
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --quiet
	scripts/check-docs.sh
	scripts/check-shape.py
	scripts/check-commits.sh
	scripts/check-no-openssl.sh

.PHONY: proto
proto: ## Regenerate the Rust and Python code of proto/ (never edit generated code)
	scripts/proto-python.sh
	cargo build -p rara-remote

.PHONY: dev
dev: ## Keep a local stack up (LocalStack, the Python executor, rara dev) for your own workflows
	@scripts/dev.sh

.PHONY: check-proto
check-proto: ## Generated code fresh, buf lint, buf breaking against main
	@scripts/check-proto.sh

.PHONY: sqlx-prepare
sqlx-prepare: ## Regenerate .sqlx/ (offline query metadata) after changing a statement or a migration
	@scripts/check-sqlx.sh --write

.PHONY: explain
explain: ## Show the plan of the lease statement on DATABASE_URL (uses the partial index steps_due)
	@scripts/explain-lease.sh

.PHONY: lambdas
lambdas: ## Build the two Lambda bootstraps (arm64, release) with cargo-lambda
	@scripts/build-lambdas.sh

.PHONY: check-template
check-template: ## sam validate --lint, cfn-lint and the template property tests (offline)
	@scripts/check-template.sh

.PHONY: deploy
deploy: ## sam build + sam deploy of infra/template.yaml (ENV=default|staging; needs AWS credentials)
	@scripts/build-lambdas.sh --install-only
	@scripts/check-template.sh
	PATH="$(CURDIR)/.venv-tools/bin:$$PATH" SAM_CLI_TELEMETRY=0 sam build --config-env $(ENV)
	PATH="$(CURDIR)/.venv-tools/bin:$$PATH" SAM_CLI_TELEMETRY=0 sam deploy --config-env $(ENV)

.PHONY: deploy-localstack
deploy-localstack: ## Deploy queues, DLQ and roles into LocalStack and check them against the functions' settings
	@scripts/deploy-localstack.sh

.PHONY: bench
bench: ## Benchmark: pgbench baseline, Graphile Worker 0.18, rara-bench flat grid (noop/nothing/sleep × batch 1/10/100 × 1/10/100 steps per message, release), twice: steps/s, ratios, Postgres work per step (BENCH_PG=own|both: own cluster)
	@scripts/bench.sh

.PHONY: bench-postgres
bench-postgres: ## Start the benchmark's own Postgres on 127.0.0.1:55432 (scripts/bench-postgres.sh start|stop|env)
	@scripts/bench-postgres.sh start

BENCH_DB ?= postgres://postgres@127.0.0.1:5432/postgres
# The benchmark binary (tools/bench), built in release wherever cargo puts its target dir.
BENCH := cargo run --release -q -p rara-bench --

.PHONY: bench-wakeup
bench-wakeup: ## Newly due step -> enqueued, scheduler listening (NOTIFY) vs polling every second
	@DATABASE_URL=$(BENCH_DB) $(BENCH) rate --steps 10000 --rate 500 --poll-ms 1000
	@DATABASE_URL=$(BENCH_DB) $(BENCH) rate --steps 10000 --rate 500 --poll-ms 1000 --no-listen

.PHONY: bench-scale
bench-scale: ## Claim latency with 10 thousand and with 10 million finished steps (about 5 minutes, ~6 GB)
	@DATABASE_URL=$(BENCH_DB) $(BENCH) scale

.PHONY: bench-soak
bench-soak: ## 10 minutes of steady submit (3,000 steps/s) + execute, finished runs pruned after 2 minutes: steps/s, latency, history rows per minute
	@DATABASE_URL=$(BENCH_DB) $(BENCH) soak --minutes 10 --rate 3000 --prune-after 2m

.PHONY: bench-soak-graphile
bench-soak-graphile: ## Graphile Worker 0.18 under bench-soak's load (3,000 jobs/s for 10 minutes): add → start per minute
	@DATABASE_URL=$(BENCH_DB) scripts/graphile-bench.sh soak 10 3000

.PHONY: bench-backlog
bench-backlog: ## Lease churn on LocalStack's SQS: 200 one-second steps behind capacity 20, lease 3 s; then the old behaviour approximated (delivery timeout = lease)
	@eval "$$(scripts/localstack.sh env)" && DATABASE_URL=$(BENCH_DB) $(BENCH) backlog && \
	  RARA_DELIVERY_TIMEOUT_SECONDS=3 DATABASE_URL=$(BENCH_DB) $(BENCH) backlog

.PHONY: cold-start
cold-start: ## Process start -> ready of the release Lambda bootstraps, and their idle RSS
	@scripts/cold-start.sh
