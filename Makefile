# Shared Arrays Lab: the two commands a reader needs are `make lab` and `make test`.
# Every target sets up .venv itself (python3 -m venv, the pinned dependencies, the take-home library
# `sharedarrays` from library/ and the course's `helpers`, both in editable mode); nothing has to be
# installed by hand first.

PYTHON ?= python3
# Another Python gets its own environment: make test PYTHON=python3.13 VENV=.venv-3.13
VENV ?= .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
# The repository's checkers (actionlint, zizmor, cffconvert: pyproject.toml's `checks` dependency group)
# in a venv of their own inside $(VENV): cffconvert's jsonschema<4 cannot share one with JupyterLab.
# tests/unit/test_repository_files.py runs them on .github/workflows/ and CITATION.cff.
CHECKS := $(VENV)/checks
# The array size (MiB) the test suite runs every notebook at; the lessons read it through
# helpers.measure.config (LAB_ARRAY_MB), the same code a reader runs at the default size.
TEST_ARRAY_MB ?= 16
# Jupyter refuses to run as root unless told to (containers, CI machines).
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)
# The test runs check each lesson's exercise with its worked solution (helpers.lessons.exercises), which
# proves every exercise solvable; `make lab` leaves them for the learner.
SOLVED := LAB_SOLVE_EXERCISES=1
NBVAL := $(SOLVED) $(BIN)/pytest --nbval --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg

.PHONY: help setup lab test lint unit library-setup library-test library-torch before-timed bench-check test-notebooks test-browser-and-site test-forkserver test-binder test-browser site test-site notebooks bench clean

help:
	@echo "make lab        set up .venv and open JupyterLab on notebooks/"
	@echo "make test       set up .venv, then lint, unit tests, bench targets, the notebooks under nbval, and the learner's path on Binder in a browser"
	@echo "make library-test  the take-home library's own tests, in a venv with only it, NumPy and pytest"
	@echo "make bench      rerun the benchmark (strategies, transport, cluster) here and compare with the references in results/"
	@echo "make test-forkserver  every lesson with LAB_START_METHOD=forkserver (Python 3.14's Linux default)"
	@echo "make test-binder  the lessons under nbval on a Binder-sized machine (64 MiB /dev/shm, 1 CPU; root)"
	@echo "make test-browser every lesson in order in one JupyterLab in headless Chromium, Binder-sized (root; installs Debian's chromium)"
	@echo "make site       build the course's website from the stored notebooks (not executed) into build/site/html"
	@echo "make test-site  build it with every warning an error, then test every page in headless Chromium"
	@echo "make notebooks  re-execute every notebook in place at the default size, store outputs"
	@echo "make clean      remove .venv, caches and leftovers of ours in /dev/shm and the temp folder"

# PyTorch's CPU build (a few hundred MB), not PyPI's default Linux build (several GB of CUDA
# libraries the lessons never use): a wheel pip already finds on this machine (PIP_FIND_LINKS) is
# installed as is, without asking any index; otherwise it comes from TORCH_INDEX. Another build:
# make lab TORCH_INDEX=https://download.pytorch.org/whl/cu128 (or https://pypi.org/simple).
TORCH := torch==2.13.0
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

# LESSONS_ONLY=1: what running the lessons needs and nothing more (no browser, no site, no checkers):
# .ci/run's venv for its nbval pass on another Python.
LESSONS_ONLY ?=
EXTRAS := $(if $(LESSONS_ONLY),course,course,browser,site)

$(INSTALLED): pyproject.toml library/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-index --no-deps "$(TORCH)" 2>/dev/null || \
		$(BIN)/python -m pip install --quiet --no-deps "$(TORCH)" --index-url $(TORCH_INDEX) || \
		{ echo "could not install $(TORCH) from $(TORCH_INDEX); choose a build with TORCH_INDEX=..."; exit 1; }
	$(BIN)/python -m pip install --quiet -e ./library -e ".[$(EXTRAS)]"
	test -n "$(LESSONS_ONLY)" || test -x $(CHECKS)/bin/python || $(BIN)/python -m venv $(CHECKS)
	test -n "$(LESSONS_ONLY)" || $(CHECKS)/bin/python -m pip install --quiet --upgrade pip
	test -n "$(LESSONS_ONLY)" || $(CHECKS)/bin/python -m pip install --quiet --group checks
	$(BIN)/python -m pip install --quiet -e ".[npshmex]" 2>/dev/null || \
		echo "npshmex not installed (optional: its SharedArray builds from source); the benchmark goes on without it"
	touch $(INSTALLED)

setup: $(INSTALLED)

lab: $(INSTALLED)
	$(BIN)/jupyter lab --ServerApp.root_dir=notebooks $(ALLOW_ROOT) notebooks/00_start_here.ipynb

lint: $(INSTALLED)
	$(BIN)/ruff check library helpers tests tools
	$(BIN)/python -m tools.check_layers

# UNIT_ARGS: more pytest arguments; UNIT_PATHS: what to collect (.ci/run gives the other Pythons a list
# of test files in UNIT_ARGS, with UNIT_PATHS empty, and leaves the fault matrix to the default Python).
# The 40 slowest tests are listed at the end, to keep CI within its time.
UNIT_PATHS ?= tests/unit
unit: $(INSTALLED)
	$(BIN)/pytest --durations=40 $(UNIT_PATHS) $(UNIT_ARGS)

# The take-home library's own tests (library/tests): they import nothing of the course, and run in a
# venv of their own with only the library (editable, from library/), NumPy and pytest, made from
# PYTHON (LIBRARY_VENV), from library/, so that nothing of the course is importable there. torch's
# cases are skipped there, saying so: library-torch runs them in the course's venv, which has torch.
# LIBRARY_ARGS: more pytest arguments (.ci/run leaves the fault matrix to the default Python).
LIBRARY_VENV ?= $(VENV)-library
LIBRARY_PYTEST := pytest==9.2.0
LIBRARY_ARGS ?=
$(LIBRARY_VENV)/.installed: library/pyproject.toml
	test -x $(LIBRARY_VENV)/bin/python || $(PYTHON) -m venv $(LIBRARY_VENV)
	$(LIBRARY_VENV)/bin/python -m pip install --quiet -e ./library "$(LIBRARY_PYTEST)"
	touch $@

library-setup: $(LIBRARY_VENV)/.installed

library-test: $(LIBRARY_VENV)/.installed
	cd library && $(abspath $(LIBRARY_VENV))/bin/python -m pytest --durations=20 $(LIBRARY_ARGS)

library-torch: $(INSTALLED)
	cd library && $(abspath $(BIN))/python -m pytest -k torch $(LIBRARY_ARGS)

# CI's performance gates of the executor and the reductions at 100 MiB (about 30 s): ratios to floors
# measured in the same run, with a margin over the worst healthy run (results/README.md); the issue's
# targets are printed beside them, and by make bench, never failed on.
bench-check: $(INSTALLED)
	$(BIN)/pytest tests/bench

# NOTEBOOK_VENV and NOTEBOOK_START_METHOD choose the Python and the start method of this pass (default:
# this venv's, and each lesson's own): .ci/run makes it its Python 3.13 with forkserver, so that one pass
# compares the stored outputs and covers Python 3.14's default start method; the browser run covers
# the default Python and each lesson's own start method at the default size.
NOTEBOOK_VENV ?= $(VENV)
NOTEBOOK_START_METHOD ?=
test-notebooks: $(INSTALLED) $(NOTEBOOK_VENV)/.installed
	LAB_START_METHOD=$(NOTEBOOK_START_METHOD) LAB_ARRAY_MB=$(TEST_ARRAY_MB) $(SOLVED) \
		$(NOTEBOOK_VENV)/bin/pytest --nbval --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg notebooks

# Python 3.14's default start method on Linux: every lesson runs top to bottom with it (lesson 04,
# which is about fork, says so and keeps fork for its contrast). Outputs are not compared
# (--nbval-lax); an error or a failed check cell fails the run.
test-forkserver: $(INSTALLED)
	$(SOLVED) LAB_START_METHOD=forkserver LAB_ARRAY_MB=$(TEST_ARRAY_MB) $(BIN)/pytest --nbval-lax --nbval-current-env notebooks

# Binder's machine: one CPU and most likely a 64 MiB /dev/shm. The lessons run under nbval at their
# DEFAULT sizes (LAB_ARRAY_MB empty: helpers.measure.config sizes them to fit) in a private mount namespace
# whose /dev/shm is a BINDER_SHM tmpfs (unshare needs root), pinned to one CPU; tests/binder_memory.py
# reports each lesson's peak memory and fails the run at 1.5 GB.
BINDER_SHM ?= 64m
test-binder: $(INSTALLED)
	@test "$$(id -u)" = 0 || { echo "make test-binder needs root (unshare --mount, mount -t tmpfs)"; exit 1; }
	unshare --mount sh -c 'mount -t tmpfs -o size=$(BINDER_SHM) tmpfs /dev/shm && \
		exec taskset -c 0 env LAB_ARRAY_MB= LAB_WORKERS= PYTHONPATH=. $(NBVAL) -p tests.binder_memory notebooks'

# A learner's path on Binder: JupyterLab on 127.0.0.1 with a random token and a temporary copy of
# notebooks/, every lesson opened in order in headless Chromium (Playwright, Debian's
# /usr/bin/chromium, no browser downloads) and all its cells run, each lesson's kernel left running
# as JupyterLab leaves it; the server and everything it starts on one CPU, in a 2 GB memory cgroup,
# under a private BINDER_SHM /dev/shm, at the default sizes. Fails on any error shown, an OOM kill,
# or a peak of the server's tree (PSS + /dev/shm) of 1.5 GiB. Needs root (unshare, the cgroup). It runs
# in a namespace of its own, as in Binder's container (tools/own_namespace: that /dev/shm, its own temp
# folders, home and loopback-only network), so it can run beside another run of the lessons.
# Screenshots land in tests/browser/screenshots/ (not in git).
CHROMIUM ?= /usr/bin/chromium
test-browser: $(INSTALLED)
	@test "$$(id -u)" = 0 || { echo "make test-browser needs root (unshare --mount, a memory cgroup)"; exit 1; }
	test -x $(CHROMIUM) || { apt-get update && apt-get install -y chromium; }
	tools/own_namespace --shm $(BINDER_SHM) env $(SOLVED) LAB_BINDER_PATH=1 LAB_ARRAY_MB= LAB_WORKERS= \
		LAB_CHROMIUM=$(CHROMIUM) $(BIN)/pytest -s tests/browser

# The Binder-path run and the site's test side by side: the browser run keeps its server and kernels on
# the first CPU this make may use (Binder's one CPU) and the site's test runs on the others (a
# one-CPU machine runs them one after the other). The site's output goes to build/test-site.log,
# printed when both are done; the stage fails if either failed. Only these two: the site's test
# compares no timings, where nbval beside the browser run failed a lesson's timing check in three
# fresh-clone runs of four (lessons 03, 08 and 01, each a check that a busy neighbour defeats).
test-browser-and-site: $(INSTALLED)
	test -x $(CHROMIUM) || { apt-get update && apt-get install -y chromium; }
	@others=$$($(BIN)/python -c "import os; print(','.join(map(str, sorted(os.sched_getaffinity(0))[1:])))"); \
		if [ -z "$$others" ]; then $(MAKE) --no-print-directory test-browser && $(MAKE) --no-print-directory test-site; exit; fi; \
		mkdir -p build; taskset -c "$$others" $(MAKE) --no-print-directory test-site > build/test-site.log 2>&1 & site=$$!; \
		status=0; $(MAKE) --no-print-directory test-browser || status=$$?; \
		wait $$site || status=$$?; echo "== beside it, on CPUs $$others, make test-site:"; cat build/test-site.log; exit $$status

# The course's website: every lesson as stored (not executed, no network), the reference results, the
# machine table and the library's API (Sphinx, MyST-NB, sphinx-book-theme: the `site` extra), into
# build/site/html. .github/workflows/pages.yml publishes it on GitHub Pages on every push to main (the
# site make test-site built and tested), not make.
site: $(INSTALLED)
	$(BIN)/python -m tools.site_build

# The site built with -W --keep-going, then every page in headless Chromium (Debian's chromium, as
# test-browser): console errors, images, internal links and anchors, each lesson's launch and download
# links, axe-core's serious and critical violations; screenshots in tests/site/screenshots/ (not in git).
test-site: $(INSTALLED)
	test -x $(CHROMIUM) || { apt-get update && apt-get install -y chromium; }
	LAB_CHROMIUM=$(CHROMIUM) $(BIN)/pytest tests/site

# test-binder and test-forkserver are not repeated here: test-browser is the Binder-sized run (with
# every kernel left running), and .ci/run makes test-notebooks its forkserver pass on Python 3.13
# (NOTEBOOK_VENV, NOTEBOOK_START_METHOD).
# Each stage runs in turn and prints its time (CI's budget is 40 minutes); the first failure stops.
# LIBRARY_STAGES: .ci/run runs them itself, beside the unit tests, and empties it.
LIBRARY_STAGES ?= library-test library-torch
TEST_STAGES := setup lint unit $(LIBRARY_STAGES) before-timed bench-check test-notebooks test-browser-and-site
test:
	@started=$$(date +%s); for stage in $(TEST_STAGES); do stage_start=$$(date +%s); \
		$(MAKE) --no-print-directory $$stage || { echo "== make $$stage failed after $$(( $$(date +%s) - stage_start )) s"; exit 1; }; \
		echo "== make $$stage: $$(( $$(date +%s) - stage_start )) s"; done; \
		echo "== make test: $$(( $$(date +%s) - started )) s in all"

# BEFORE_TIMED: a command run after the unit tests, before the first stage whose checks compare
# timings. .ci/run runs the other Pythons' unit tests alongside this Python's and passes a command
# that waits for them, so nothing else runs on the machine while timings are compared.
BEFORE_TIMED ?= true
before-timed:
	@$(BEFORE_TIMED)

notebooks: $(INSTALLED)
	$(BIN)/python -m tools.execute_notebooks execute notebooks/*.ipynb
	$(BIN)/python -m tools.lesson_times --write

# The strategies suite (16 and 128 MiB, every strategy), then every size of the transport suite, then the
# cluster suite on two-node Ray and Dask clusters it starts here (about 6 minutes on a 2-core VM); each
# writes results/<host>-<date>-<suite>.json and .png and is compared with its reference in results/.
# BENCH_ARGS passes more options to the first two, e.g. make bench BENCH_ARGS="--sizes 1,10,100";
# CLUSTER_ARGS to the cluster suite, e.g. CLUSTER_ARGS="--ray-address HEAD:6379" for your own cluster.
STRATEGIES_REFERENCE ?= $(firstword $(wildcard results/*-strategies.json))
BENCH_REFERENCE ?= $(lastword $(sort $(wildcard results/*-transport.json)))
CLUSTER_REFERENCE ?= $(lastword $(wildcard results/*-cluster.json))
bench: $(INSTALLED)
	$(BIN)/python -m helpers.bench --suite strategies $(if $(STRATEGIES_REFERENCE),--compare $(STRATEGIES_REFERENCE)) $(BENCH_ARGS)
	$(BIN)/python -m helpers.bench --suite transport $(if $(BENCH_REFERENCE),--compare $(BENCH_REFERENCE)) $(BENCH_ARGS)
	$(BIN)/python -m helpers.bench --suite cluster $(if $(CLUSTER_REFERENCE),--compare $(CLUSTER_REFERENCE)) $(CLUSTER_ARGS)

# Our leftovers go first, with the venv's Python (helpers.measure.leftovers needs NumPy, through the
# library); a failure there stops the target instead of passing unseen.
clean:
	if test -x $(BIN)/python; then $(BIN)/python -c "from helpers.measure import leftovers; \
		print('removed:', [str(p) for p in leftovers.remove_ours()] or 'nothing of ours')"; fi
	rm -rf .venv .venv-* *.egg-info library/*.egg-info .pytest_cache .ruff_cache
	find . -name __pycache__ -prune -exec rm -rf {} +
