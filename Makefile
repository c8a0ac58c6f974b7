# make demo / make test / make bench create and reuse .venv, installing the project (and test extras) into it.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test fuzz bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/dml-lower demo

test: $(STAMP)
	$(BIN)/lint-imports --no-cache
	DML_LOWER_STRICT=1 $(BIN)/python -m pytest

# Thousands of differential fuzz examples (CI runs the seeded 'ci' profile inside make test).
fuzz: $(STAMP)
	DML_LOWER_STRICT=1 HYPOTHESIS_PROFILE=thorough $(BIN)/python -m pytest tests/fuzz

bench: $(STAMP)
	$(BIN)/python benchmarks/bench.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .hypothesis
