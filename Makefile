# gameday: two commands on a fresh Debian 12 machine, as root.
#   make demo   install, bring up the local sandbox, run the default game day, write reports/
#   make test   install what the tests need, run lint, types and the whole test suite
#   make mutate each fault kind's undo made a no-op in turn: which tests catch it (~15 min)

SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: demo test mutate system-deps demo-deps venv lint typecheck unit clean-reports help

help:
	@echo "make demo   - run the default game day and write a report under reports/"
	@echo "make test   - lint, type-check and run the whole test suite"
	@echo "make mutate - break each fault kind's undo in turn; every one must be caught"

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

test: system-deps venv lint typecheck unit

mutate: system-deps venv
	$(PY) -m pytest -m mutation -s tests/test_mutation.py $(PYTEST_ARGS)

demo: demo-deps venv
	@scripts/demo.sh

clean-reports:
	find reports -mindepth 1 -maxdepth 1 ! -name README.md -exec rm -rf {} +
