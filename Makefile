# Everything runs from a project-local virtualenv so a fresh clone needs only python3.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed-stamp

.PHONY: install demo test test-lowest lint typecheck servers unit bench dashboards clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --config-settings editable_mode=compat -e '.[dashboards,test,bench]'
	touch $(STAMP)

install: $(STAMP)

## demo: the support-desk workload on the embedded default (no collector needed)
demo: $(STAMP)
	$(BIN)/otel-ctx demo

## test: lint, type-check, then the whole suite (unit, properties, OTLP, Prometheus e2e, promtool, compose,
## the real Collector and Jaeger)
test: lint typecheck servers unit

## servers: build the Collector, Jaeger and Prometheus the compose file pins, VictoriaMetrics, Sloth, oslo (once;
## reused from a cache outside the repo, ~/.cache/otel-ctx/servers or OTEL_CTX_SERVER_CACHE)
servers:
	bash stack/build-servers.sh

lint: $(STAMP)
	$(BIN)/ruff check otel_ctx tests bench examples docs
	$(BIN)/ruff format --check otel_ctx tests bench examples docs

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest

## test-lowest: the suite against the lowest versions pyproject allows, so its lower bounds stay true
LOWEST ?= .venv-lowest
test-lowest: $(STAMP)
	rm -rf $(LOWEST)
	$(BIN)/uv venv --quiet --python $(PYTHON) $(LOWEST)
	$(BIN)/uv pip install --quiet --python $(LOWEST)/bin/python --resolution lowest-direct -e '.[dashboards,test]'
	$(LOWEST)/bin/python -m pytest -q

## bench: every performance figure, as ratios measured in one run (see BENCHMARKS.md)
bench: $(STAMP)
	$(BIN)/python -m bench

## dashboards: regenerate dashboards/*.json and the alert rules from the names registry
dashboards: $(STAMP)
	$(BIN)/otel-ctx dashboards build

clean:
	rm -rf $(VENV) $(LOWEST) .mypy_cache .ruff_cache .pytest_cache .hypothesis
