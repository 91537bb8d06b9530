# Metastore: `make demo` and `make test` set everything up (scripts/bootstrap.sh)
# and run. Bootstrapping is idempotent and takes a second when nothing changed.
#
#   make demo                   the end-to-end demo (.venv/bin/metastore demo)
#   make test                   lint (ruff), format check, layer contracts (lint-imports), types (mypy), import cycles, then the test suite;
#                               extra pytest options: make test ARGS="-k redis -x"; in one process: make test TEST_WORKERS=0
#   make lint                   only ruff, the layer contracts, the type checker (docs/TYPES.md) and the import-cycle check
#   make bench                  the benchmarks (bench/run_all.py)
#   make bench ARGS="--baseline DIR"  also in another checkout, compared (bench/compare.py)
#   make bootstrap              only set up .venv, redis-server and check Java
#   make clean                  remove .venv, build output and caches

ROOT   := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
VENV   := $(ROOT)/.venv
PYTHON := $(VENV)/bin/python
ARGS   ?=

.DEFAULT_GOAL := help
.PHONY: help bootstrap demo lint test bench clean
LINTED := engine flight_server spark_bridge tests bench scripts

help:
	@sed -n 's/^#   //p' $(lastword $(MAKEFILE_LIST))

bootstrap:
	@bash $(ROOT)/scripts/bootstrap.sh

demo: bootstrap
	cd $(ROOT) && $(VENV)/bin/metastore demo $(ARGS)

lint: bootstrap
	cd $(ROOT) && $(VENV)/bin/ruff check $(LINTED) && $(VENV)/bin/ruff format --check $(LINTED) && $(VENV)/bin/lint-imports && $(VENV)/bin/mypy && $(PYTHON) scripts/import_cycles.py

# two pytest-xdist workers (the machine's two cores: one pytest process left a core idle
# during every single-threaded test); tests using Spark share one worker (tests/conftest.py)
TEST_WORKERS ?= 2

test: lint
	cd $(ROOT) && $(PYTHON) -m pytest -n $(TEST_WORKERS) --dist loadgroup $(ARGS)

bench: bootstrap
	cd $(ROOT) && $(PYTHON) bench/run_all.py $(ARGS)

clean:
	rm -rf $(VENV) $(ROOT)/build $(ROOT)/dist $(ROOT)/.pytest_cache $(ROOT)/.hypothesis $(ROOT)/.mypy_cache $(ROOT)/.ruff_cache
	rm -f $(ROOT)/flight_server/_gather.*.so
	find $(ROOT) -path $(ROOT)/.git -prune -o \( -name '*.egg-info' -o -name __pycache__ \) -prune -exec rm -rf {} +
