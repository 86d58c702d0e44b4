# Every target sets up what it needs: a fresh clone needs only Python 3.11+ and make. Each
# installs only its own share into .venv (the shares add up): serving the game and its web
# page, testing, or all a contributor runs (lint, types, generated code, benchmarks).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.run-stamp
TEST_STAMP := $(VENV)/.test-stamp
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=
TEST_WORKERS ?= 4

.PHONY: run web simulate test lint typecheck proto proto-check proto-lint proto-breaking bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# The server, the clients and the web gateway.
$(RUN_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[web]'
	touch $@

# What the tests need besides.
$(TEST_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[web,test]'
	touch $@

# Everything: linters, the code generator, the benchmarks' references.
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

## run: the server on 127.0.0.1:50051 with the embedded SQLite store (./bergen.db)
run: $(RUN_STAMP)
	$(VENV)/bin/bergen serve

## web: the web page on http://127.0.0.1:8080/ for the server of `make run`
web: $(RUN_STAMP)
	$(VENV)/bin/bergen web

## simulate: one simulated match between the play policies, printed hand by hand
simulate: $(RUN_STAMP)
	$(VENV)/bin/bergen simulate --matches 1 --players 2 --seed demo --out out/demo --show

## test: every test (PostgreSQL ones need BERGEN_TEST_DATABASE_URL or Docker; see README), in
## TEST_WORKERS processes (most tests wait on servers, sockets and PostgreSQL; 0: in this one)
# The tests start Python processes by the hundred (servers, gateways, the CLI): with
# PYTHONDONTWRITEBYTECODE set, each would compile every module it imports from source again.
test: $(TEST_STAMP)
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

## lint: ruff, mypy --strict, the generated code's freshness, buf lint and buf breaking
lint: $(STAMP) typecheck proto-check proto-lint proto-breaking
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# mypy resolves `bergen.*` through a tree of links that mirrors the installed layout.
typecheck: $(STAMP)
	rm -rf build/typecheck && mkdir -p build/typecheck/bergen
	ln -s ../../../domain build/typecheck/bergen/domain
	ln -s ../../../server build/typecheck/bergen/server
	ln -s ../../../cli_client build/typecheck/bergen/cli_client
	ln -s ../../../proto/bergen/v1 build/typecheck/bergen/v1
	ln -s ../../../proto/bergen/api build/typecheck/bergen/api
	ln -s ../../bench build/typecheck/bench
	cd build/typecheck && MYPYPATH=. ../../$(VENV)/bin/mypy --config-file ../../pyproject.toml -p bergen.domain -p bergen.api -p bergen.cli_client -p bergen.server -p bench

PROTOC = $(PY) -m grpc_tools.protoc -Iproto --python_out=$(1) --pyi_out=$(1) --grpc_python_out=$(1) proto/bergen/v1/bergen.proto

## proto: regenerate the committed gRPC code from proto/bergen/v1/bergen.proto
proto: $(STAMP)
	$(call PROTOC,proto)

## proto-check: fail when the committed generated code differs from a fresh generation
proto-check: $(STAMP)
	rm -rf build/proto-check && mkdir -p build/proto-check
	$(call PROTOC,build/proto-check)
	for f in bergen_pb2.py bergen_pb2.pyi bergen_pb2_grpc.py; do \
	  diff -u proto/bergen/v1/$$f build/proto-check/bergen/v1/$$f || { echo "proto/bergen/v1/$$f is stale: run make proto"; exit 1; }; \
	done

# buf from npm, at the exact version pinned in proto/package.json and proto/package-lock.json
# (the platform's binary comes as an npm package too: no other download).
BUF := build/buf/node_modules/.bin/buf
$(BUF): proto/package.json proto/package-lock.json
	rm -rf build/buf && mkdir -p build/buf
	cp proto/package.json proto/package-lock.json build/buf/
	cd build/buf && npm ci --no-audit --no-fund --ignore-scripts
	touch $(BUF)

## proto-lint: buf lint, the STANDARD rules (proto/buf.yaml)
proto-lint: $(BUF)
	$(BUF) lint proto

## proto-breaking: buf breaking, the API against the API before the latest change; a
## deliberate break is a commit with a line `API-Break: <why>` (see proto/check-breaking)
proto-breaking: $(BUF)
	proto/check-breaking $(BUF)

## bench: the benchmarks (ratios against their references, measured in one run)
# Its servers, clients and workers are processes too: each reads its modules' bytecode, as
# on a machine without PYTHONDONTWRITEBYTECODE, rather than compiling them at every start.
bench: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(PY) -m bench

clean:
	rm -rf build .mypy_cache .ruff_cache .pytest_cache
