# Documented entry points. Each target sets up what it needs: `make run` and `make test`
# work on a fresh machine (the first run compiles llama-cpp-python, ~10 min; later runs reuse
# pip's wheel cache and the verified model in TRIAGE_MODEL_DIR).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell sha256sum pyproject.toml | cut -c1-12)
# Portable AVX2 build of llama.cpp (not tuned to this exact CPU), cached by pip as a wheel.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF

.PHONY: setup model run test test-fast bench lint eval recalibrate audit loadtest drills deploy-check clean

setup: $(STAMP) model

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[offline,test]"
	@rm -f $(VENV)/.installed-*
	@touch $@

model: $(STAMP)
	$(BIN)/triage fetch-model

run: setup
	$(BIN)/triage run

test: setup
	$(BIN)/pytest

test-fast: $(STAMP)
	$(BIN)/pytest -m "not model and not browser"

bench: setup
	$(BIN)/triage bench --json bench/results.json

eval: setup
	$(BIN)/triage eval --data ../shared/data/tickets/dev.jsonl --json var/eval/dev.json --rows var/eval/dev-rows.jsonl

recalibrate: setup
	$(BIN)/triage recalibrate --from-file ../shared/data/tickets/dev.jsonl

audit: setup
	$(BIN)/triage audit run

loadtest: setup
	$(BIN)/python loadtest/run.py

drills: setup
	TRIAGE_DRILLS=1 $(BIN)/pytest -v tests/drills

deploy-check: $(STAMP)
	bash deploy/check.sh

lint: $(STAMP)
	$(BIN)/ruff check service tests

clean:
	rm -rf $(VENV) var .pytest_cache
