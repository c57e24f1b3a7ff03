# Documented entry points. Each target sets up what it needs: `make run` and `make test`
# work on a fresh machine (the first run compiles llama-cpp-python, ~10 min; later runs reuse
# pip's wheel cache and the verified model in TRIAGE_MODEL_DIR).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# The locked set of every dependency with its hashes (`make lock` writes it from pyproject's ranges).
LOCK   := requirements/dev.txt
# Re-installed when either file changes: a new range in pyproject, or a refreshed lock.
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml $(LOCK) | sha256sum | cut -c1-12)
# llama.cpp is built for the instruction sets this CPU lists (AVX-512 where present, never
# AMX; scripts/llama-cmake-args says why). pip's wheel cache does not key on CMAKE_ARGS, so each
# set of flags gets a wheel cache of its own: a wheel built for one CPU never lands on another.
export CMAKE_ARGS ?= $(shell scripts/llama-cmake-args)
export PIP_CACHE_DIR ?= $(HOME)/.cache/pip-triage/$(shell printf '%s' "$(CMAKE_ARGS)" | sha256sum | cut -c1-12)

.PHONY: setup lock model run test test-fast bench lint eval recalibrate study served served-rules served-rules-bound cascade audit loadtest drills deploy-check docs clean

# Labelled sources: the synthetic training set, the dev set and, when joined locally
# (data/public-style/README.md), the public-style set whose texts stay out of the repository.
TICKETS := ../shared/data/tickets
PUBLIC  := var/data/public-style.jsonl
SOURCES := --from-file $(TICKETS)/train.jsonl --from-file $(TICKETS)/dev.jsonl $(if $(wildcard $(PUBLIC)),--from-file $(PUBLIC))
STUDY_DATA := --data train=$(TICKETS)/train.jsonl --data dev=$(TICKETS)/dev.jsonl $(if $(wildcard $(PUBLIC)),--data public-style=$(PUBLIC))

setup: $(STAMP) model

# Exactly the locked versions, every file checked against its sha256 (pip's hash-checking mode;
# a llama-cpp-python wheel built earlier from the same sdist is reused from the wheel cache), then
# the project itself without dependencies.
$(STAMP): pyproject.toml $(LOCK)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --require-hashes -r $(LOCK)
	$(BIN)/pip install --quiet --no-deps -e .
	@rm -f $(VENV)/.installed-*
	@touch $@

# Re-pin requirements/*.txt from pyproject.toml (uv; scripts/lock says which file is for what).
# Keeps every pin pyproject still allows; `make lock LOCK_ARGS=--upgrade` moves all to the newest.
lock:
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@test -x $(BIN)/uv || $(BIN)/pip install --quiet "uv~=0.13"
	UV=$(BIN)/uv scripts/lock $(LOCK_ARGS)

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
	$(BIN)/triage rules latency --results bench/results.json --out docs/l1.md
	$(BIN)/python scripts/gen_docs.py

eval: setup
	$(BIN)/triage eval --data ../shared/data/tickets/dev.jsonl --json var/eval/dev.json --rows var/eval/dev-rows.jsonl --plots var/eval/plots

recalibrate: setup
	$(BIN)/triage recalibrate $(SOURCES)

# The measurements behind the calibration's choices (docs/results.md, "Features" on): features
# fitted on train and graded on the others, each source graded by a fit on the others, the
# learning curve, and the question framing against `turn_end: once` (docs/l2.md). Reads the replay
# cache that `make recalibrate` fills; the second framing has a cache of its own.
study: setup
	$(BIN)/triage study features $(STUDY_DATA) --train train --json docs/results/study-features.json
	$(BIN)/triage study sources $(STUDY_DATA) --json docs/results/study-sources.json
	$(BIN)/triage study sources $(STUDY_DATA) --gate none --json docs/results/study-sources-nogate.json
	$(BIN)/triage study sources $(STUDY_DATA) --head bagged --json docs/results/study-sources-bagged.json
	$(BIN)/triage study sources $(STUDY_DATA) --source-thresholds 0.4 --source-thresholds 0.6 --source-thresholds 0.8 --json docs/results/study-sources-local.json
	$(BIN)/triage study sources $(STUDY_DATA) --source-thresholds 0.4 --source-thresholds 0.6 --source-thresholds 0.8 --source-min-labels 100 --json docs/results/study-sources-local-min100.json
	$(BIN)/triage study curve $(STUDY_DATA) --train train+public-style --json docs/results/learning-curve.json --plot docs/img/learning-curve.png
	TRIAGE_CALIBRATION_MIN_PER_CLASS=10 $(BIN)/triage study framing --data dev=$(TICKETS)/dev.jsonl $(if $(wildcard $(PUBLIC)),--data public-style=$(PUBLIC)) --json docs/results/framing.json
	$(BIN)/python scripts/gen_docs.py

# Each labelled source graded as served by artifacts fitted without it (the green threshold as
# shipped and after L1), and the bundled artifact on the unlabelled corpus: served-sources.json.
served: setup
	$(BIN)/python scripts/served_sources.py
	$(BIN)/python scripts/gen_docs.py

# One rule file's effect as served (scripts/served_rule_effect.py): the artifacts of `make served`
# graded with today's pack less the file and with today's pack, from the replay cache
# (served-{before,after}-NAME.json, the "served-rules" table of docs/results.md).
RULE ?= rules/green_evidence.yaml
RULE_NAME ?= evidence
served-rules: setup
	$(BIN)/python scripts/served_rule_effect.py --rule $(RULE) --name $(RULE_NAME)
	$(BIN)/python scripts/gen_docs.py

# Before a new replay: rule files added since `make served`, re-read on its grades (a rule can only
# keep a ticket from green): exact false greens, a bound on greens cleared (var/served-rules-now.json).
ADDED ?= rules/green_evidence.yaml
served-rules-bound: setup
	$(BIN)/python scripts/rules_on_served.py $(foreach f,$(ADDED),--added $(f))

# The optional cascade: the 1.5B re-reads the tickets just under the green threshold
# (docs/results/cascade.json). Fetches the 1.5B and replays every labelled ticket through it: about
# twice the 0.5B's replay, which takes ~85 min on 2 cores for the 2,279 labels when its cache is
# cold (train + dev ~48 min, public-style ~40 min, measured on the EPYC of docs/results.md).
cascade: setup
	$(BIN)/triage fetch-model --size 1.5b
	$(BIN)/python scripts/cascade_study.py
	$(BIN)/python scripts/gen_docs.py

audit: setup
	$(BIN)/triage audit run

loadtest: setup
	$(BIN)/python loadtest/run.py

drills: setup
	TRIAGE_DRILLS=1 $(BIN)/pytest -v tests/drills

deploy-check: $(STAMP)
	bash deploy/check.sh

# The figures between <!-- generated:NAME --> markers in README.md and docs/, from the result
# files (bench/results.json, docs/results/*.json); tests/test_docs.py fails when one is stale.
docs: $(STAMP)
	$(BIN)/python scripts/gen_docs.py

LINTED := service tests loadtest deploy

# Lint rules and the formatter's verdict (check only: `ruff format $(LINTED)` rewrites).
lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

clean:
	rm -rf $(VENV) var .pytest_cache
