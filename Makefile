# rara: `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# Tests create scratch databases on this server (sqlx::test); any existing database works.
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

.PHONY: lint
lint: ## cargo fmt --check and clippy -D warnings
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings

.PHONY: proto
proto: ## Regenerate the Rust and Python code of proto/ (never edit generated code)
	scripts/proto-python.sh
	cargo build -p rara-remote

.PHONY: build
build: ## Build every crate (debug)
	cargo build --workspace

.PHONY: explain
explain: ## Show the plan of the lease statement on DATABASE_URL (uses the partial index steps_due)
	@scripts/explain-lease.sh
