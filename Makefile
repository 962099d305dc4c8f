# The two quick-start commands: `make run` (the main job) and `make test` (the tests).
# Each creates .venv and installs on first use, so a fresh clone needs nothing else.
PY      ?= python3.11
VENV    := .venv
STAMP   := $(VENV)/.bti-installed
OUT     ?= out
ARGS    ?=

.PHONY: run test lint setup clean browser toolchain

$(STAMP): pyproject.toml package.json
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e ".[test,openvino,models,onnx]"
	npm install --silent --no-audit --no-fund
	touch $(STAMP)

setup: $(STAMP)

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

test: $(STAMP) browser toolchain
	@$(VENV)/bin/python -m pytest $(ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing on purpose"; exit 1; fi; exit $$rc

lint: $(STAMP)
	$(VENV)/bin/ruff check harness tests scripts benchmarks

clean:
	rm -rf $(OUT) .bti-cache
