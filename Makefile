# vertex-trainer: `make demo` (local quickstart, no cloud) and `make test` (the suite).
# Both create .venv and install the project on first use; re-install only when pyproject.toml changes.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.stamp-install
# tf-keras tracks TensorFlow 1:1; --no-deps because it names `tensorflow`, which would install a
# second TensorFlow beside tensorflow-cpu (see pyproject.toml).
TF_KERAS := tf-keras==2.21.0
# Google's discovery documents (google-api-python-client, test-only: tests/discovery_support.py
# checks the requests of `check`, `setup` and the utilization reads against them), installed beside
# the venv in $(VENV)/discovery, not importable from it: `import tensorflow` imports
# googleapiclient.discovery whenever it can (its GCE cluster resolver), ~0.8 s of CPU in every
# TensorFlow process (6.2 -> 5.3 s user+sys, mean of 5 alternating runs, 2026-12-04).
DISCOVERY := google-api-python-client>=2.100

DEMO_DATA := data/quickstart
DEMO_SPEC := job_specs/quickstart-local.yaml

.PHONY: install demo check test test-fast clean docs browser

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[trainer,dev,sandbox,pipelines,trigger,data,report,profile]'
	$(BIN)/python -m pip install --quiet --no-deps '$(TF_KERAS)'
	$(BIN)/python -m pip install --quiet --no-deps --upgrade --target $(VENV)/discovery '$(DISCOVERY)'
	@touch $(STAMP)

# The report's browser test (tests/report) drives Debian's headless Chromium through its
# chromedriver: installed here when missing, if this machine has apt-get and we are root; otherwise
# that test fails saying how to install them (it is never skipped).
browser:
	@command -v chromedriver >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
	  else echo "make: no chromedriver here: install Debian's chromium and chromium-driver (apt-get install chromium chromium-driver) for tests/report" >&2; fi; }

demo: $(STAMP)
	$(BIN)/vertex-trainer data synth $(DEMO_DATA) --examples 2048 --shards 4 --image-size 32 \
		--num-classes 10 --eval-examples 512
	$(BIN)/vertex-trainer validate $(DEMO_SPEC) --local
	$(BIN)/vertex-trainer submit $(DEMO_SPEC) --local --wait

# `make check`: what reads the code without running it, each in seconds: ruff (the lint rules, then
# the format), the layer contracts (import-linter) and the type checker (mypy; [tool.mypy] in
# pyproject.toml says what it covers and how strictly).
check: $(STAMP)
	$(BIN)/ruff check --quiet .
	$(BIN)/ruff format --check --quiet .
	$(BIN)/lint-imports --no-cache
	$(BIN)/mypy

# `make test`: the checks and the suite with its coverage figure (pytest-cov prints it: the lines of
# vertex_trainer and the trainer run in the suite's own processes; the floor, which only rises, is
# [tool.coverage.report] fail_under). The checks (make check, ~15 s of one core, mypy
# most of it) run beside the suite, their output shown when it ends; either failing fails make
# test. pytest exits 5 when it collected no test: that is a failure here, never a silent pass.
# Four pytest-xdist workers on two cores: a unit of work (a module, a folder whose modules share
# session fixtures, a docs example: tests/conftest.py) whole on one, slow units first. The tests
# wait on their TensorFlow processes, servers and sandboxes, so more workers than cores keep both
# busy: 365 s with four against 429 s with three and 403 s with five (2026-12-02, a busier
# machine; on an idle one the suite took 235-274 s with four). PYTEST_ARGS replaces these
# arguments; one process:
#   make test PYTEST_ARGS=-n0
PYTEST_ARGS ?= -n 4 --dist loadgroup --no-loadscope-reorder
# The suite writes Python's bytecode caches (__pycache__, git-ignored) even where the environment
# says not to (PYTHONDONTWRITEBYTECODE=1 on these machines): without them every pytest-xdist
# worker rewrites the asserts of all ~320 test modules (12.2 s of CPU a process against 3.3 s with
# the cache, `pytest --co -n0`), and every CLI, sandbox and trainer process a test starts compiles
# the project's modules again (`validate` in a clean clone: 0.72 s of CPU against 0.35 s).
WRITE_BYTECODE := env -u PYTHONDONTWRITEBYTECODE
COVERAGE ?= --cov --cov-report=
test: $(STAMP) browser
	@log=$$(mktemp); $(MAKE) --no-print-directory check > $$log 2>&1 & checks=$$!; \
	$(WRITE_BYTECODE) $(BIN)/python -m pytest -q $(PYTEST_ARGS) $(COVERAGE); rc=$$?; \
	wait $$checks; crc=$$?; cat $$log; rm -f $$log; \
	if [ $$crc -ne 0 ]; then echo "make test: make check failed (above)" >&2; exit 1; fi; \
	if [ $$rc -eq 5 ]; then echo "make test: no tests ran" >&2; exit 1; fi; exit $$rc

# The tiers that answer in about a minute (1,398 tests, 74 s on 2 cores, 2026-12-03): the spec, the hardware
# catalog, rendering, packaging plans, the presentation, the CLI in-process against the fakes, the
# house rules, data synth; not TensorFlow in any process (trainer, the sandbox, local runs), not
# the docs examples (run as written), not Beam (dataprep) or the functions framework (trigger).
FAST_ARGS ?= -n 2 -m "not trainer and not slow and not wire" --ignore=tests/docs --ignore=tests/dataprep \
	--ignore=tests/sandbox --ignore=tests/trigger --ignore=tests/local
test-fast: $(STAMP) browser
	$(BIN)/ruff check --quiet .
	$(BIN)/lint-imports --no-cache
	$(WRITE_BYTECODE) $(BIN)/python -m pytest -q $(FAST_ARGS)

clean:
	rm -rf $(VENV) runs data/quickstart .pytest_cache

# The command reference, generated from the CLI (a test fails when it is stale).
docs: $(STAMP)
	$(BIN)/python -m vertex_trainer.cli.reference > docs/cli.md

# The cloud path offline (docs/sandbox.md): every stand-in in one process; the image is built by
# the fake Cloud Build, the CustomJob really trains, its logs stream, the model is deployed and
# answers predictions. The sandbox stops, leaving nothing behind, when the script ends.
.PHONY: sandbox-demo
sandbox-demo: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/vertex-trainer dev sandbox --quiet --bucket sandbox-demo -- \
		bash examples/sandbox/demo.sh

# The seed's flow offline (docs/sandbox.md): the dataset and its _SUCCESS marker land in the bucket,
# the rendered Cloud Run function (under functions-framework) gets the storage events and starts a
# Vertex AI Pipelines run that trains (FLEX_START), registers, deploys; the endpoint answers.
SEED_FN := $(or $(TMPDIR),/tmp)/vertex-trainer-seed-function
.PHONY: sandbox-seed-demo
sandbox-seed-demo: $(STAMP)
	rm -rf "$(SEED_FN)"
	$(BIN)/vertex-trainer trigger render examples/sandbox/digits-seed.yaml --bucket sandbox-demo \
		--prefix incoming/ --project sandbox -o "$(SEED_FN)"
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/vertex-trainer dev sandbox --quiet --function "$(SEED_FN)" -- \
		bash examples/sandbox/seed-demo.sh
