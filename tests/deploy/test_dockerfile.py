"""The Dockerfile, read statically (no Docker engine here): stages, user, probe, entry point, build context."""

from __future__ import annotations

import json
import re
import tomllib

import pytest

from service.settings import ENV
from tests.deploy import support as h

STAGES = h.dockerfile_stages()


def test_stages_build_once_and_ship_slim():
    assert list(STAGES) == ["wheels", "source", "runtime", "offline", "offline-bundled", "bundled"]
    wheels = STAGES["wheels"]
    assert any("build-essential" in r and "cmake" in r for r in wheels.args("RUN"))
    for stage in ("runtime", "offline"):
        assert not any("build-essential" in r or "cmake" in r for r in STAGES[stage].args("RUN"))
        assert any("--mount=type=bind,from=wheels" in r for r in STAGES[stage].args("RUN"))
    assert STAGES["bundled"].base == "runtime" and STAGES["offline"].base == "runtime"
    assert STAGES["offline-bundled"].base == "offline"


def test_every_stage_starts_from_the_base_pinned_by_digest():
    """A tag alone moves under the build; the default base must name one image by its digest."""
    text = h.DOCKERFILE.read_text()
    default = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", text, re.MULTILINE)
    assert default, "no default for ARG PYTHON_IMAGE"
    assert re.fullmatch(r"python:3\.11-slim-bookworm@sha256:[0-9a-f]{64}", default.group(1))
    outside = {name for name, stage in STAGES.items() if stage.base not in STAGES}
    assert outside == {"wheels", "source", "runtime"}
    assert all(STAGES[name].base == "${PYTHON_IMAGE}" for name in outside)


def test_images_install_exactly_the_hash_checked_locks():
    wheels = STAGES["wheels"]
    assert wheels.args("COPY") == ["requirements/serve.txt requirements/offline.txt ./"]
    built = [r for r in wheels.args("RUN") if "pip wheel" in r]
    assert built and all("--require-hashes --no-deps" in r for r in built)
    assert "-r llama.txt" in built[0] and "for set in serve offline" in built[1]
    # the serving image: the llama wheel and the serving set, nothing resolved at install time
    install = [r for r in STAGES["runtime"].args("RUN") if "pip install" in r]
    assert len(install) == 1 and "--no-index --no-deps" in install[0]
    assert "/tmp/wheels/serve/*.whl" in install[0] and "offline" not in install[0]
    assert any("/tmp/wheels/offline/*.whl" in r for r in STAGES["offline"].args("RUN"))


def test_llama_cpp_is_compiled_portable_alone_in_its_layer_from_the_lock():
    assert any("-DGGML_NATIVE=OFF" in a for a in STAGES["wheels"].args("ARG"))
    instructions = STAGES["wheels"].instructions
    compile_at = next(i for i, (kw, rest) in enumerate(instructions) if kw == "RUN" and "/wheels/llama" in rest)
    rest_at = next(i for i, (kw, rest) in enumerate(instructions) if kw == "RUN" and "for set in" in rest)
    assert compile_at < rest_at
    lock = (h.ROOT / "requirements" / "serve.txt").read_text()
    pin = next(
        p
        for p in tomllib.loads((h.ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
        if p.startswith("llama-cpp-python")
    )
    assert pin + " \\\n    --hash=sha256:" in lock  # the exact pin, with its hash


def test_llama_block_extraction_keeps_the_pin_and_its_hashes(tmp_path):
    import subprocess

    run = next(r for r in STAGES["wheels"].args("RUN") if "/wheels/llama" in r)
    extract = run.split("--mount=type=cache,target=/root/.cache/pip", 1)[1].split(" > ")[0]
    lock = h.ROOT / "requirements" / "serve.txt"
    out = subprocess.run(
        ["sh", "-c", extract.strip().replace("serve.txt", str(lock))], capture_output=True, text=True, check=True
    ).stdout
    lines = out.splitlines()
    assert lines[0].startswith("llama-cpp-python==") and lines[0].endswith(" \\")
    assert all(line.strip().startswith("--hash=sha256:") for line in lines[1:]) and len(lines) >= 2


def test_runtime_runs_as_a_non_root_user():
    users = STAGES["runtime"].args("USER")
    assert users and users[-1].split(":")[0] not in {"0", "root"}
    assert not STAGES["bundled"].args("USER")  # inherits the non-root user


def test_entrypoint_is_triage_and_serve_is_the_default():
    runtime = STAGES["runtime"]
    assert json.loads(runtime.args("ENTRYPOINT")[-1]) == ["triage"]
    assert json.loads(runtime.args("CMD")[-1]) == ["serve"]


def test_healthcheck_runs_the_shipped_probe():
    check = STAGES["runtime"].args("HEALTHCHECK")[-1]
    assert "--start-period=" in check
    assert check.endswith('CMD ["python", "/app/healthcheck.py"]')
    assert any("deploy/healthcheck.py ./healthcheck.py" in c for c in STAGES["runtime"].args("COPY"))


def test_bundled_stage_fetches_and_verifies_the_model():
    runs = STAGES["bundled"].args("RUN")
    assert any(r.startswith('triage fetch-model --size "${MODEL_SIZE}"') for r in runs)
    jobs = STAGES["offline-bundled"].args("RUN")
    assert any(r.startswith('triage fetch-model --size "${MODEL_SIZE}"') for r in jobs)


def test_environment_names_are_settings():
    env = " ".join(STAGES["runtime"].args("ENV"))
    names = set(re.findall(r"\b(TRIAGE_[A-Z0-9_]+)=", env))
    assert names, "no TRIAGE_ settings in the runtime ENV"
    assert names <= set(ENV.values()), names - set(ENV.values())
    assert "TRIAGE_HOST=0.0.0.0" in env  # 127.0.0.1 would be unreachable from outside


@pytest.mark.parametrize(
    "path",
    [
        "pyproject.toml",
        "README.md",
        "service/cli.py",
        "prompts/questions.yaml",
        "deploy/healthcheck.py",
        "data/judge_calibration.jsonl",
    ],
)
def test_context_keeps_what_the_image_needs(path):
    assert not h.dockerignore_excludes(path), path
    assert (h.ROOT / path).exists(), f"{path} is copied by the Dockerfile but missing"


@pytest.mark.parametrize(
    "path",
    [
        ".git/config",
        ".venv/bin/python",
        "var/dev-tokens.env",
        "tests/conftest.py",
        "deploy/compose.yaml",
        "deploy/.env",
        "service/__pycache__/cli.cpython-311.pyc",
        "models/qwen.gguf",
        "bench/results.json",
    ],
)
def test_context_leaves_out_everything_else(path):
    assert h.dockerignore_excludes(path), path


def test_dockerignore_matcher_follows_docker_rules():
    text = "*\n!keep/\nkeep/**/*.tmp\n"
    assert h.dockerignore_excludes("other.txt", text)
    assert not h.dockerignore_excludes("keep/a.txt", text)
    assert h.dockerignore_excludes("keep/sub/a.tmp", text)
