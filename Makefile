# Developer entry points. `make test` is what CI runs (.ci/run).

PYTHON ?= python3.11
# One virtual environment per CPython minor version: .venv for 3.11 (torch's CPU wheel on this
# machine's disk), .venv310, .venv312 and .venv313 for the others (torch's CUDA build from the
# registry, which runs on the CPU). e.g. make test PYTHON=$(pyenv prefix 3.13.0)/bin/python
PYVER := $(shell $(PYTHON) -c 'import sys; print("%d%d" % sys.version_info[:2])')
VENV := $(if $(filter 311,$(PYVER)),.venv,.venv$(PYVER))
ifeq ($(PYVER),)
$(error $(PYTHON) does not run; with pyenv: make test PYTHON=$$(pyenv prefix 3.12.1)/bin/python)
endif
BIN := $(VENV)/bin
# Lint only the folders that exist yet; ruff fails on a missing path.
LINT_PATHS := $(wildcard graphlift tests benchmarks examples)
BENCHMARKS := $(sort $(wildcard benchmarks/*.py)) benchmarks/workloads/run.py
# pytest-xdist workers: one per core of the 2-core machine the suite is timed on. Tests that
# start processes of their own share one worker (tests/conftest.py), so they never overlap.
WORKERS ?= 2

.PHONY: venv demo test test-all bench fuzz reference lint clean distclean

# One OpenMP thread: on a small shared machine, a busy neighbour core made 2-thread torch calls
# 150-700x slower.
demo test test-all bench fuzz reference: export OMP_NUM_THREADS = 1

venv: $(VENV)/.installed

# The stamp re-runs the install whenever the package metadata or the pins change.
# -c constraints.txt pins torch to the local CPU wheel.
$(VENV)/.installed: pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -c constraints.txt -e '.[test]'
	touch $@

demo: venv
	$(BIN)/python examples/demo.py

test: venv
	$(BIN)/python -m pytest -q -n $(WORKERS) --dist loadgroup tests
	$(BIN)/ruff check $(LINT_PATHS)

# The suite on every CPython that has a virtual environment here (.venv, .venv310, .venv312...).
# CI (.ci/run) runs the versions whose whole suite passes (docs/coverage.md: Python versions).
test-all:
	@set -e; for venv in $(wildcard .venv .venv3*); do \
	    echo "== $$venv"; $(MAKE) --no-print-directory test PYTHON=$$venv/bin/python; done

bench: venv
	@set -e; for script in $(BENCHMARKS); do echo "== $$script"; $(BIN)/python $$script; done

# Differential fuzzing: generated programs run eagerly and compiled, differences minimized.
# e.g. make fuzz FUZZ_ARGS="--programs 10000 --seed 0" (python -m tests.fuzz --help lists more).
FUZZ_ARGS ?= --programs 200 --seed 0
fuzz: venv
	$(BIN)/python -m tests.fuzz $(FUZZ_ARGS)

# torch.compile's figures the tests compare with, measured again and recorded for every CPython
# that has a virtual environment here (tests/reference; checked by tests/test_reference.py).
# make reference REFERENCE_ARGS=--missing records only the keys a recording lacks.
reference:
	@set -e; for venv in $(wildcard .venv .venv3*); do \
	    echo "== $$venv"; $$venv/bin/python -m tests.reference record $(REFERENCE_ARGS); done

lint: venv
	$(BIN)/ruff check $(LINT_PATHS)

# Build and test leftovers; keeps .venv, which takes a while to rebuild (see distclean).
clean:
	rm -rf build dist *.egg-info .pytest_cache .ruff_cache
	find . -path './.venv*' -prune -o -name __pycache__ -type d -exec rm -rf {} +

distclean: clean
	rm -rf .venv .venv3*
