"""The "where things live" map in README.md, checked: what each lower layer may import."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SERVICE = Path(__file__).resolve().parents[1] / "service"
BASE = {
    "results",
    "errors",
    "settings",
    "metrics",
    "logs",
    "progress",
    "labelled",
    "model_fetch",
    "machine",
    "webhooks",
    "hidden_states",
    "heap",
}
# area -> the service areas it may import (besides itself)
ALLOWED = {
    "policy": BASE,
    "store": BASE,
    "l1": BASE,
    "l2": BASE | {"policy", "calibration"},  # calibration imports l2 too: they are one layer
    "calibration": BASE | {"l2"},
    "pipeline": BASE,
    "operators": BASE | {"policy", "store"},
    "worker": BASE | {"store", "pipeline"},
    "callbacks": BASE | {"store"},
}
# Offline modules inside calibration (the examples from decisions, the recalibrate job, the
# study's and the job's commands) also read the store, L1 and the evaluation.
OFFLINE = {
    "calibration/dataset.py",
    "calibration/recalibrate.py",
    "calibration/recalibrate_commands.py",
    "calibration/study_commands.py",
}
OFFLINE_ALLOWED = ALLOWED["calibration"] | {"store", "l1", "evaluation"}


def _area(path: Path) -> str:
    parts = path.relative_to(SERVICE).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def _name(path: Path) -> str:
    return path.relative_to(SERVICE).as_posix()


def _imports(path: Path) -> set[str]:
    """The service areas a module imports (absolute `service.x` or relative `..x` / `.x`)."""
    package = list(path.relative_to(SERVICE).parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            target = base + (node.module.split(".") if node.module else [])
            names = [target[0]] if target else [alias.name for alias in node.names]
            found.update(names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("service."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("service."))
    return found


@pytest.mark.parametrize("area", sorted(ALLOWED))
def test_area_imports_only_what_the_map_allows(area):
    modules = [p for p in SERVICE.rglob("*.py") if _area(p) == area and _name(p) not in OFFLINE]
    assert modules
    used = set().union(*(_imports(p) for p in modules)) - {area}
    assert used <= ALLOWED[area], f"{area} imports {sorted(used - ALLOWED[area])}"


@pytest.mark.parametrize("module", sorted(OFFLINE))
def test_offline_calibration_modules_import_only_what_the_map_allows(module):
    used = _imports(SERVICE / module) - {"calibration"}
    assert used <= OFFLINE_ALLOWED, f"{module} imports {sorted(used - OFFLINE_ALLOWED)}"
