# The two commands a newcomer needs are `make run` and `make test`; everything else is for contributors.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
# newman (the Postman collection's runner) and the Node webhook receiver's verifier, pinned in tests/package-lock.json.
NODE_STAMP := tests/node_modules/.installed

.PHONY: run test test-fast lint format migrate bench chaos install install-dev clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): requirements.txt | $(PY)
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

$(DEV_STAMP): requirements.txt requirements-dev.txt | $(PY)
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP) $@

$(NODE_STAMP): tests/package.json tests/package-lock.json
	npm ci --prefix tests --no-audit --no-fund --loglevel=error
	touch $@

install: $(STAMP)
install-dev: $(DEV_STAMP) $(NODE_STAMP)

## Start the API with embedded workers on SQLite, against local RabbitMQ and Redis.
run: $(STAMP)
	$(PY) -m app dev

## Every test, against the local PostgreSQL, Redis and RabbitMQ.
test: $(DEV_STAMP) $(NODE_STAMP)
	$(PY) -m pytest

## The quick subset: no crash, restart or soak tests.
test-fast: $(DEV_STAMP) $(NODE_STAMP)
	$(PY) -m pytest -m "not slow"

lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: $(DEV_STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

migrate: $(STAMP)
	$(PY) -m app migrate

bench: $(DEV_STAMP)
	$(PY) -m bench

## The service under many faults at once, on services of its own; writes docs/reliability-run.md.
chaos: $(DEV_STAMP)
	$(PY) -m bench.chaos $(CHAOS_ARGS)

clean:
	rm -rf $(VENV) var/*.db*
