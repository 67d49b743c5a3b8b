# rollcheck — one-command set-up: `make verify` (the main job) and `make test`.
# Everything is installed into a local venv (.venv) by these targets; Java for TLC and Spark
# is installed from Debian's packages when it is missing.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PROFILE ?= ci
PYTEST_WORKERS ?= 2
# mypy does not follow setuptools' package-dir mapping (pyimpl/ is rollcheck.pyimpl): it checks a
# tree of symlinks laid out as installed
TYPECHECK := build/typecheck

.PHONY: setup java chromium flink-setup test test-engines verify verify-quick bench bench-matrix bench-verify bench-bugs bench-hunt lint typecheck-tree clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

java:
	@command -v java >/dev/null 2>&1 || { \
	  echo "Java not found: installing a headless JRE (Debian openjdk-17-jre-headless)"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq openjdk-17-jre-headless; }

# headless Chromium renders verify's report in the tests (tests/test_report_browser.py)
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  echo "Chromium not found: installing it (Debian chromium) for the report's browser test"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium; }

setup: $(STAMP) java

# Flink recorder: PyFlink pins numpy/pandas/pyarrow/py4j/apache-beam versions of its own, so it gets
# a separate environment (.venv-flink, stdlib + apache-flink only); javac builds the Java listener
FLINK_VENV  := .venv-flink
FLINK_STAMP := $(FLINK_VENV)/.installed-stamp

$(FLINK_STAMP):
	$(PYTHON) -m venv $(FLINK_VENV)
	$(FLINK_VENV)/bin/python -m pip install --quiet --disable-pip-version-check 'apache-flink==2.3.0'
	touch $(FLINK_STAMP)

flink-setup: java $(FLINK_STAMP)
	@command -v javac >/dev/null 2>&1 || { \
	  echo "javac not found: installing a headless JDK (Debian openjdk-17-jdk-headless)"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq openjdk-17-jdk-headless; }

test: setup flink-setup chromium
	@# A fresh TMPDIR: anything the tests leave in it fails the run (tests/conftest.py).
	@tmp=$$(mktemp -d -t rollcheck-test-XXXXXX) && \
	TMPDIR=$$tmp ROLLCHECK_CHECK_TMPDIR=$$tmp ROLLCHECK_PROFILE=$(PROFILE) \
	  $(PY) -P -m pytest -q -n $(PYTEST_WORKERS) -p no:cacheprovider -m "not engines" tests; \
	rc=$$?; rm -rf $$tmp; exit $$rc

# the real engine runs beyond make test's budget (marker "engines"): other pyspark and apache-flink
# releases (installed once into the cache), the local standalone cluster, second failures, the
# oracles on real engine bugs and the real slices of the matrix from pytest
test-engines: setup flink-setup
	@tmp=$$(mktemp -d -t rollcheck-test-XXXXXX) && \
	TMPDIR=$$tmp ROLLCHECK_CHECK_TMPDIR=$$tmp ROLLCHECK_PROFILE=$(PROFILE) \
	  $(PY) -P -m pytest -q -n $(PYTEST_WORKERS) -p no:cacheprovider -m engines tests; \
	rc=$$?; rm -rf $$tmp; exit $$rc

verify: setup flink-setup
	ROLLCHECK_PROFILE=verify $(VENV)/bin/rollcheck verify

verify-quick: setup flink-setup
	ROLLCHECK_PROFILE=ci $(VENV)/bin/rollcheck verify --quick

bench: setup
	$(PY) -m benchmarks

# the section times (wall and CPU) of `verify --quick` (FULL=1: of the full run; FROM=report/results.json:
# of a run already made), recorded in benchmarks/results/verify-sections.json next to the previous ones
bench-verify: setup flink-setup
	ROLLCHECK_BENCH_VERIFY_FULL=$(FULL) ROLLCHECK_BENCH_VERIFY_FROM=$(FROM) $(PY) -m benchmarks --only verify

# plain PySpark (reference + task + sink failure + state reader in one session) against spark matrix
# --failures task,sink on the same query, side by side; appends benchmarks/results/spark-matrix-engine-time.json
bench-matrix: setup
	$(PY) -m benchmarks.bench_spark_matrix --side-by-side

# the bug zoo (benchmarks/engine_bugs): every entry on its affected and its fixed engine release, the
# standalone reproducer and rollcheck's matrix slice; writes benchmarks/results/engine-bugs.json and
# docs/engine-bugs.md (ONLY=ID,ID runs some entries)
bench-bugs: setup flink-setup
	$(PY) -P benchmarks/engine_bugs/run.py $(if $(ONLY),--only $(ONLY))

# blind recall of the hunt: the hunt on each zoo entry's affected release (reference: the fixed one)
# without the entry's module, BUDGET per entry (default 45m); writes benchmarks/results/hunt-recall.json
# and docs/hunt-recall.md (ONLY=ID,ID runs some entries, ENGINE=spark|flink one engine)
bench-hunt: setup flink-setup
	$(PY) -m benchmarks.bench_hunt --budget $(or $(BUDGET),45m) $(if $(ONLY),--only $(ONLY)) $(if $(ENGINE),--engine $(ENGINE))

typecheck-tree:
	rm -rf $(TYPECHECK)
	mkdir -p $(TYPECHECK)/rollcheck
	cp -rs $(CURDIR)/rollcheck/. $(TYPECHECK)/rollcheck/
	for d in pyimpl infra properties tla spark_replay flink_replay; do cp -rs $(CURDIR)/$$d $(TYPECHECK)/rollcheck/$$d; done
	find $(TYPECHECK) -name __pycache__ -prune -exec rm -rf {} +

# both tools always run; the target fails if either found something
lint: setup typecheck-tree
	@status=0; \
	$(PY) -m ruff check pyimpl infra properties tla spark_replay flink_replay rollcheck benchmarks tests || status=1; \
	(cd $(TYPECHECK) && $(CURDIR)/$(PY) -m mypy --config-file $(CURDIR)/pyproject.toml \
	  --cache-dir $(CURDIR)/.mypy_cache) || status=1; \
	exit $$status

clean:
	rm -rf $(VENV) build report .pytest_cache .mypy_cache .ruff_cache .hypothesis
