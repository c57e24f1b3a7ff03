"""service/l1 imports in one direction: no module imports one that imports it back.

Function-level imports count too: a lazy import is how a circle usually hides.
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import service.l1

PACKAGE = Path(service.l1.__file__).parent


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_no_import_circle_inside_l1():
    modules = {f"service.l1.{path.stem}": path for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    graph = {name: {dep for dep in _imports(path) if dep in modules and dep != name} for name, path in modules.items()}
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as error:
        raise AssertionError(f"import circle: {' -> '.join(error.args[1])}") from None
