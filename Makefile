# Every target bootstraps .venv from pyproject.toml on first use (and again when it changes).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench reliability clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/calltap demo

test: lint
	$(BIN)/python -m pytest -q

reliability: $(STAMP)
	$(BIN)/python -m pytest -q tests/reliability

lint: $(STAMP)
	$(BIN)/ruff check src tests bench

bench: $(STAMP)
	$(BIN)/python bench/compare_throughput.py
	$(BIN)/python bench/relay.py
	$(BIN)/python bench/streams.py

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .ruff_cache .hypothesis
