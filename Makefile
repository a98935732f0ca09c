# Everything runs from a project-local virtualenv so a fresh clone needs only python3.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed-stamp
# Claude's reconstructed tokenizer (the claude-tokenizer extra) declares Python 3.12+ but runs on
# 3.10 and 3.11: there it is installed past its metadata (its one dependency, regex, comes with
# tiktoken), so the Anthropic counts are tested with it on every Python the project supports.
CTOK_PIN ?= ctok>=1.3,<2
OLD_PYTHON = $(BIN)/python -c 'import sys; sys.exit(sys.version_info >= (3, 12))'

.PHONY: install demo test test-lowest lint typecheck servers unit bench dashboards clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --config-settings editable_mode=compat -e '.[dashboards,test,bench]'
	if $(OLD_PYTHON); then $(BIN)/python -m pip install --quiet --no-deps --ignore-requires-python '$(CTOK_PIN)'; fi
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
	if $(OLD_PYTHON); then $(BIN)/uv pip install --quiet --python $(LOWEST)/bin/python --no-deps \
		--python-version 3.12 '$(CTOK_PIN)'; fi
	$(LOWEST)/bin/python -m pytest -q

## bench: every performance figure, as ratios measured in one run (see BENCHMARKS.md)
bench: $(STAMP)
	$(BIN)/python -m bench

## dashboards: regenerate dashboards/*.json and the alert rules from the names registry
dashboards: $(STAMP)
	$(BIN)/otel-ctx dashboards build

clean:
	rm -rf $(VENV) $(LOWEST) .mypy_cache .ruff_cache .pytest_cache .hypothesis
