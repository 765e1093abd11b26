# Two entry points: `make run` (set up, run the embedded default experiment on CPU) and
# `make test` (same environment, whole test suite). Both create .venv when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CONFIG ?= configs/default.yml

.PHONY: run test test-quick test-unit lint lock docs clean-outputs

# Compiled bytecode is kept (in __pycache__/, ignored by git and the image builds) even where
# the shell sets PYTHONDONTWRITEBYTECODE: each test worker and each process a test starts
# would otherwise recompile the tests' rewritten asserts and the project's modules.
unexport PYTHONDONTWRITEBYTECODE

# --no-compile: pip would compile every module of every package, most never imported (the
# install took 183 s with it, 73 s without, on the 2-core test machine at 9ccd03a); Python
# compiles each module on its first import instead (about 9 s for the suite's main imports).
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=24"
	$(BIN)/python -m pip install --quiet --no-compile -c constraints.txt -e ".[test]"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/scalebench run $(CONFIG)

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --no-loadscope-reorder --durations=30 tests

# The inner loop: unit and integration tests (no SLURM cluster, image or browser).
test-quick: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --no-loadscope-reorder --durations=15 tests/unit tests/integration

# The in-process tests alone (tests/unit: they start no process, tests/conftest.py checks it).
test-unit: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --no-loadscope-reorder --durations=10 tests/unit

lint: $(STAMP)
	$(BIN)/ruff check

# Rewrites the generated parts of docs/*.md (parameter and column tables, command reference).
docs: $(STAMP)
	$(BIN)/python docs/generate.py

# Rewrites constraints.txt from the current environment (after a deliberate upgrade), keeping
# the pins of packages it does not hold (extras .venv does not install: radio-cuda, rtk).
lock: $(STAMP)
	$(BIN)/python containers/lock.py --python $(BIN)/python constraints.txt

clean-outputs:
	rm -rf benchmark_inference/outputs benchmark_training/outputs

# Container images (docs/containers.md). ENGINE may be podman, with global options.
ENGINE ?= docker
IMAGE ?= scalebench:latest
SIF ?= scalebench.sif
.PHONY: image-docker image-apptainer image-definitions

image-docker: $(STAMP)
	$(BIN)/python containers/build.py build --engine "$(ENGINE)" --tag $(IMAGE)

# SIF_OPTIONS: apptainer build options, e.g. --fakeroot (on some hosts, such as the test
# machines, even root builds a definition with %post only with it).
SIF_OPTIONS ?=
image-apptainer: $(STAMP)
	$(BIN)/python containers/build.py build-sif $(SIF) -- $(SIF_OPTIONS)

# Regenerates containers/Dockerfile, containers/scalebench.def and containers/weights/manifest.txt
# after a change of the pins or of scalebench/data/manifest.toml.
image-definitions:
	$(PYTHON) containers/generate.py
