# gameday: two commands on a fresh Debian 12 machine, as root.
#   make demo   install, bring up the local sandbox, run the default game day, write reports/
#   make test   install what the tests need, run lint, types and the whole test suite

SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
# `make check`: the pure tests (rules, verdicts, conventions, layers, statistics), no servers
FAST_TESTS := tests/test_verdict_rules.py tests/test_conventions.py tests/test_architecture.py \
	tests/test_percentile.py tests/test_procfs.py tests/test_ownership.py \
	tests/test_activity_arguments.py tests/test_discovery.py \
	tests/reporting/test_reporting_compare.py \
	tests/test_truth_table.py::test_the_table_covers_every_phase_ending_and_provider \
	tests/test_truth_table.py::test_the_readme_outcomes_match_docs_verdicts

.PHONY: demo test check system-deps demo-deps venv lint typecheck unit fast clean-reports help

help:
	@echo "make demo   - run the default game day and write a report under reports/"
	@echo "make test   - lint, type-check and run the whole test suite"
	@echo "make check  - lint, type-check and the fast tests (about a minute; while working)"

system-deps:
	@scripts/install-system-deps.sh

demo-deps:
	@scripts/install-system-deps.sh demo

$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	@scripts/progress.sh "upgrading pip" $(PY) -m pip install -q --upgrade pip
	@echo "Python packages: installing gameday and its dependencies into $(VENV)"
	@scripts/progress.sh "installing Python packages" $(PY) -m pip install -q -e '.[test]'
	@touch $(STAMP)

venv: $(STAMP)

lint: venv
	$(VENV)/bin/ruff check chaos_ext tests benchmarks
	$(VENV)/bin/ruff format --check chaos_ext tests benchmarks
	$(VENV)/bin/lint-imports

typecheck: venv
	$(VENV)/bin/mypy

unit: venv
	$(PY) -m pytest $(PYTEST_ARGS)

fast: venv
	$(PY) -m pytest -m "not slow and not vm" -q $(FAST_TESTS) $(PYTEST_ARGS)

check: venv lint typecheck fast

test: system-deps venv lint typecheck unit

demo: demo-deps venv
	@scripts/demo.sh

clean-reports:
	find reports -mindepth 1 -maxdepth 1 ! -name README.md -exec rm -rf {} +
