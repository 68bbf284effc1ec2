# The two commands a fresh machine needs: `make audit` and `make test` (see README.md).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
HNB    := $(VENV)/bin/hygiene-nb
ROOT   ?= $(HOME)
STAMP  := $(VENV)/.installed
DEVSTAMP := $(VENV)/.installed-dev

.PHONY: audit test lint bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): $(PY) pyproject.toml hygiene_nb/walk/cwalk.c
	$(PY) -m pip install --quiet -e .
	touch $@

$(DEVSTAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

## audit: scan ROOT (default: your home directory) and print the summary
audit: $(STAMP)
	$(HNB) scan "$(ROOT)"
	$(HNB) summary "$(ROOT)"

## lint: ruff, mypy and import-linter
lint: $(DEVSTAMP)
	$(VENV)/bin/ruff format --check hygiene_nb tests bench
	$(VENV)/bin/ruff check hygiene_nb tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

## test: lint, then the whole test suite
test: lint
	$(VENV)/bin/pytest

## bench: the 1M-entry benchmark against du/find (BENCH_ENTRIES= to resize)
bench: $(STAMP)
	$(PY) -m bench.run

clean:
	rm -rf $(VENV) build *.egg-info hygiene_nb/walk/*.so
