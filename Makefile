# Two commands for a newcomer: `make demo` and `make test`. Both build the environment first.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
LOCAL := .local
export AIRFLOW__CORE__LOAD_EXAMPLES := False
export PYSPARK_PYTHON := $(abspath $(PY))
# azurite-blob from npm's local install, for the local endpoint package's Azurite launcher
export PATH := $(abspath $(VENV)/bin):$(abspath node_modules/.bin):$(PATH)
# Test processes (pytest-xdist): each has its own Airflow home, endpoint, Azurite and Spark; a test
# file stays on one process. Most integration tests wait on subprocesses, so 2 pay off even on 2 cores
# (3 overload them: the load average reaches 17 and tasks' calls to Airflow's API server time out).
TEST_WORKERS ?= 2
# Prerequisites to run the tests without (`make test SKIP=mariadb,chromium`): their tests are skipped,
# and the end of the run lists them. Names: scripts/prerequisites.py (the one list of prerequisites).
SKIP ?=
# `make test SHUFFLE=<seed>`: test files in an order drawn from the seed (other neighbours on each process)
SHUFFLE ?=
PREREQS := $(PYTHON) scripts/prerequisites.py

.PHONY: help check-tools check-test-tools prerequisites venv node test test-unit test-fresh lint demo docs services-up services-down services-status deployment deployment-down deployment-status bench release clean

help:
	@echo "make demo            run the example pipeline end to end on the local stack"
	@echo "make test            run the whole test suite (unit, integration, DAGs); SKIP=mariadb,... to run without some"
	@echo "make prerequisites   install what make test needs from Debian's packages (Java, Node, Chromium, Postgres, MariaDB)"
	@echo "make test-fresh      make test in RUNS (default 5) fresh clones of HEAD (or COMMIT), one after another"
	@echo "make services-up     start Azurite and the local Event Hubs endpoint (with its Schema Registry) on 127.0.0.1"
	@echo "make services-down   stop what services-up started"
	@echo "make deployment      Airflow as deployed (Postgres, Redis, CeleryExecutor, two workers, each component its own process), from the built wheel"
	@echo "make deployment-down stop what make deployment started"
	@echo "make docs            build the documentation site into .local/site (warnings, broken links and anchors fail it)"
	@echo "make lint            ruff (lint, import order, docstrings) and mypy, as pyproject.toml configures them"
	@echo "make bench           run every benchmark and write bench/results.md"
	@echo "make release         build the sdists and wheels of the provider and the local endpoint into .local/dist and check them"

# Before anything runs: what is missing is installed from Debian's packages where this user may (root,
# or sudo without a password); elsewhere one line per missing prerequisite, with the command that installs it.
check-tools:
	@command -v $(PYTHON) >/dev/null || { echo "missing: $(PYTHON) (Python 3.11+). Install it, or run make PYTHON=/path/to/python3.11"; exit 1; }
	@$(PREREQS) ensure --for demo

check-test-tools: check-tools
	@$(PREREQS) ensure --for test --skip "$(SKIP)"

prerequisites:
	@command -v $(PYTHON) >/dev/null || { echo "missing: $(PYTHON) (Python 3.11+): apt-get install python3 python3-venv"; exit 1; }
	$(PREREQS) install --for test --skip "$(SKIP)"

venv: $(VENV)/.installed
# The provider and the local endpoint (endpoint/, a distribution of its own), both editable.
$(VENV)/.installed: requirements/dev.lock pyproject.toml endpoint/pyproject.toml | check-tools
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check uv
	$(VENV)/bin/uv pip install --quiet -p $(PY) -r requirements/dev.lock
	$(VENV)/bin/uv pip install --quiet -p $(PY) --no-deps -e . -e endpoint
	touch $@

node: node_modules/.installed
node_modules/.installed: package.json package-lock.json | check-tools
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The suite's temporary folders live in the checkout: pytest prunes /tmp/pytest-of-$USER by age, so
# another pytest session on the machine would delete files from under a running test there.
test: check-test-tools venv node
	mkdir -p $(LOCAL)
	EH_SKIP="$(SKIP)" EH_TEST_SHUFFLE="$(SHUFFLE)" $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --basetemp=$(abspath $(LOCAL))/pytest --durations=30 tests

# The proof that the suite is green on a fresh machine's checkout, every time: RUNS clones of one commit
# (HEAD when they start, or COMMIT),
# each built from nothing, tested one after another; a summary line per run in .local/fresh/.
RUNS ?= 5
test-fresh:
	$(PYTHON) scripts/test_fresh.py --runs $(RUNS) --skip "$(SKIP)" $(if $(FRESH_SHUFFLE),--shuffle) $(if $(COMMIT),--commit $(COMMIT))

test-unit: venv
	$(PY) -m pytest tests/unit

# The house rules, configured in pyproject.toml: ruff over the files its [tool.ruff] include names (the
# package, dags/, docs/examples/, scripts/, bench/), mypy over the package. make test runs both as well
# (tests/repo/test_house_rules.py).
lint: venv
	$(VENV)/bin/ruff check
	$(VENV)/bin/mypy

services-up: venv node
	$(PY) -m tests.support.stack up

services-down:
	@test -x $(PY) && $(PY) -m tests.support.stack down || true

services-status: venv
	$(PY) -m tests.support.stack status

# Airflow's components as separate processes on CeleryExecutor, the provider from its built wheel in a
# virtual environment of its own under .local/deployment/ (scripts/deployment.py).
deployment: venv node
	$(PY) scripts/deployment.py up

deployment-down:
	@test -x $(PY) && $(PY) scripts/deployment.py down || true

deployment-status: venv
	$(PY) scripts/deployment.py status

demo: venv node
	$(PY) scripts/demo.py

# The documentation site (mkdocs.yml, docs/) into .local/site. --strict makes every warning an error:
# a link or anchor between pages that does not exist (mkdocs.yml's validation settings) and a docstring
# :param: the code does not take (the API reference). Then the relative links of README.md,
# CONTRIBUTING.md and bench/README.md, which the site does not build. make test runs both (tests/docs).
docs: venv
	$(PY) -m mkdocs build --strict --site-dir $(abspath $(LOCAL))/site
	$(PY) scripts/doc_links.py

bench: venv node
	$(PY) bench/run_all.py

# The sdists and wheels of both distributions (the provider, and the local endpoint from endpoint/) into
# .local/dist, checked: twine check --strict, name and version, the license file, each file list against
# scripts/release/*.files (`$(PY) scripts/release.py --write-expected` rewrites them), no checkout paths.
release: venv
	$(PY) scripts/release.py --out $(abspath $(LOCAL))/dist

clean: services-down deployment-down
	rm -rf $(LOCAL) .airflow
