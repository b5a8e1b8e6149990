# gameday: two commands on a fresh Debian 12 machine, as root.
#   make demo   install, bring up the local sandbox, run the default game day, write reports/
#   make test   install what the tests need, run lint, types and the whole test suite
# For contributors (CONTRIBUTING.md, "Tests"):
#   make check  lint, types and the fast tests while working
#   make bench  install what the benchmarks compare against, run every benchmark
#   make mutate each fault kind's undo, then each rollback activity, made a no-op in turn:
#               which tests catch it (~20 min)

SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench
PYTEST_ARGS ?=
# `make check`: the pure tests (rules, verdicts, conventions, layers, statistics), no servers
FAST_TESTS := tests/test_verdict_rules.py tests/test_conventions.py tests/test_architecture.py \
	tests/test_percentile.py tests/test_procfs.py tests/test_ownership.py \
	tests/test_activity_arguments.py tests/test_discovery.py \
	tests/reporting/test_reporting_compare.py \
	tests/test_truth_table.py::test_the_table_covers_every_phase_ending_and_provider \
	tests/test_truth_table.py::test_the_readme_outcomes_match_docs_verdicts

.PHONY: demo test check bench mutate system-deps demo-deps bench-deps venv lint typecheck unit fast clean-reports help

help:
	@echo "make demo   - run the default game day and write a report under reports/"
	@echo "make test   - lint, type-check and run the whole test suite"
	@echo "make check  - lint, type-check and the fast tests (under 5 minutes; while working)"
	@echo "make bench  - install the benchmarks' peers, run every benchmark, print each one's figures"
	@echo "make mutate - break each undo and rollback activity in turn; every one must be caught"

system-deps:
	@scripts/install-system-deps.sh

demo-deps:
	@scripts/install-system-deps.sh demo

bench-deps:
	@scripts/install-system-deps.sh bench

$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	@scripts/progress.sh "upgrading pip" $(PY) -m pip install -q --upgrade pip
	@echo "Python packages: installing gameday and its dependencies into $(VENV)"
	@scripts/progress.sh "installing Python packages" $(PY) -m pip install -q -e '.[test,sandbox]'
	@touch $(STAMP)

venv: $(STAMP)

# the bench extra: chaostoolkit-reporting, which benchmarks/report.py and cli.py compare with
$(BENCH_STAMP): $(STAMP)
	@echo "Python packages: installing the bench extra into $(VENV)"
	@scripts/progress.sh "installing the bench extra" $(PY) -m pip install -q -e '.[test,sandbox,bench]'
	@touch $(BENCH_STAMP)

lint: venv
	$(VENV)/bin/ruff check chaos_ext tests benchmarks
	$(VENV)/bin/ruff format --check chaos_ext tests benchmarks
	$(VENV)/bin/lint-imports

typecheck: venv
	$(VENV)/bin/mypy

# one serial session (LANES=2: two pytest sessions at once, one per core; not the default,
# see scripts/test-lanes.sh)
unit: venv
	@PY=$(PY) scripts/test-lanes.sh $(PYTEST_ARGS)

fast: venv
	$(PY) -m pytest -m "not slow and not vm" -q $(FAST_TESTS) $(PYTEST_ARGS)

check: venv lint typecheck fast

test: system-deps venv lint typecheck unit

mutate: system-deps venv
	$(PY) -m pytest -m mutation -s tests/test_mutation.py $(PYTEST_ARGS)

demo: demo-deps venv
	@scripts/demo.sh

bench: bench-deps $(BENCH_STAMP)
	@PY=$(PY) scripts/bench.sh

clean-reports:
	find reports -mindepth 1 -maxdepth 1 ! -name README.md -exec rm -rf {} +
