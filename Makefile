# rollcheck — one-command set-up: `make verify` (the main job) and `make test`.
# Everything is installed into a local venv (.venv) by these targets; Java for TLC and Spark
# is installed from Debian's packages when it is missing.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PROFILE ?= ci
PYTEST_WORKERS ?= 2

.PHONY: setup java test verify verify-quick bench lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

java:
	@command -v java >/dev/null 2>&1 || { \
	  echo "Java not found: installing a headless JRE (Debian openjdk-17-jre-headless)"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq openjdk-17-jre-headless; }

setup: $(STAMP) java

test: setup
	ROLLCHECK_PROFILE=$(PROFILE) $(PY) -P -m pytest -q -n $(PYTEST_WORKERS) -p no:cacheprovider tests

verify: setup
	ROLLCHECK_PROFILE=verify $(VENV)/bin/rollcheck verify

verify-quick: setup
	ROLLCHECK_PROFILE=ci $(VENV)/bin/rollcheck verify --quick

bench: setup
	$(PY) -m benchmarks

lint: setup
	$(VENV)/bin/ruff check pyimpl properties tla spark_replay rollcheck benchmarks tests
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) report .pytest_cache .mypy_cache .ruff_cache .hypothesis
