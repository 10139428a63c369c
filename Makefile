# Two commands for a newcomer: `make demo` and `make test`. Both build the environment first.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
LOCAL := .local
export AIRFLOW__CORE__LOAD_EXAMPLES := False
export PYSPARK_PYTHON := $(abspath $(PY))
export PATH := $(abspath $(VENV)/bin):$(PATH)
# Test processes (pytest-xdist): each has its own Airflow home, endpoint, Azurite and Spark; a test
# file stays on one process. Most integration tests wait on subprocesses, so 2 pay off even on 2 cores.
TEST_WORKERS ?= 2

.PHONY: help check-tools venv node test test-unit demo services-up services-down services-status bench clean

help:
	@echo "make demo            run the example pipeline end to end on the local stack"
	@echo "make test            run the whole test suite (unit, integration, DAGs)"
	@echo "make services-up     start Azurite and the local Event Hubs endpoint on 127.0.0.1"
	@echo "make services-down   stop what services-up started"
	@echo "make bench           run every benchmark and write bench/results.md"

check-tools:
	@command -v $(PYTHON) >/dev/null || { echo "missing: $(PYTHON) (Python 3.11+). Install it, or run make PYTHON=/path/to/python3.11"; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "missing: Python 3.11+ ($(PYTHON) is older)"; exit 1; }
	@command -v java >/dev/null || { echo "missing: java (Java 17 runs Spark local mode). Install openjdk-17-jre-headless"; exit 1; }
	@command -v node >/dev/null && command -v npm >/dev/null || { echo "missing: node and npm (Node 18+ runs Azurite). Install nodejs and npm"; exit 1; }
	@node -e 'process.exit(parseInt(process.versions.node) < 18 ? 1 : 0)' || { echo "missing: Node 18+ (found $$(node --version))"; exit 1; }

venv: $(VENV)/.installed
$(VENV)/.installed: requirements/dev.lock pyproject.toml | check-tools
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check uv
	$(VENV)/bin/uv pip install --quiet -p $(PY) -r requirements/dev.lock
	$(VENV)/bin/uv pip install --quiet -p $(PY) --no-deps -e .
	touch $@

node: node_modules/.installed
node_modules/.installed: package.json package-lock.json | check-tools
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The suite's temporary folders live in the checkout: pytest prunes /tmp/pytest-of-$USER by age, so
# another pytest session on the machine would delete files from under a running test there.
test: venv node
	mkdir -p $(LOCAL)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --basetemp=$(abspath $(LOCAL))/pytest --durations=15 tests

test-unit: venv
	$(PY) -m pytest tests/unit

services-up: venv node
	$(PY) -m airflow_provider_eh.testing.stack up

services-down:
	@test -x $(PY) && $(PY) -m airflow_provider_eh.testing.stack down || true

services-status: venv
	$(PY) -m airflow_provider_eh.testing.stack status

demo: venv node
	$(PY) scripts/demo.py

bench: venv node
	$(PY) bench/run_all.py

clean: services-down
	rm -rf $(LOCAL) .airflow
