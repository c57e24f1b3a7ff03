"""One exception hierarchy: every exception class of the service is defined in service/errors.py
and descends from TriageError."""

from __future__ import annotations

import ast
import builtins
import inspect
from pathlib import Path

from service import errors

SERVICE = Path(__file__).resolve().parents[1] / "service"
BUILTIN_EXCEPTIONS = {
    name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)
}


def _exception_classes(path: Path) -> list[str]:
    """Classes whose base is named like an exception (a builtin one, or *Error / *Exception)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ClassDef):
            continue
        bases = {ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases}
        if bases & BUILTIN_EXCEPTIONS or any(b.endswith(("Error", "Exception")) for b in bases):
            found.append(f"{path.relative_to(SERVICE.parent)}:{node.lineno} {node.name}")
    return found


def test_no_exception_class_outside_errors_py():
    outside = [
        found
        for path in sorted(SERVICE.rglob("*.py"))
        if path != SERVICE / "errors.py"
        for found in _exception_classes(path)
    ]
    assert outside == []


def test_the_scan_sees_the_classes_in_errors_py():
    assert len(_exception_classes(SERVICE / "errors.py")) >= 30


def test_every_exception_descends_from_triage_error():
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, BaseException)]
    assert [c.__name__ for c in classes if not issubclass(c, errors.TriageError)] == []


def test_only_problem_errors_carry_an_http_status():
    # The API maps ProblemError to a problem body; anything else it meets is a logged 500.
    for _, c in inspect.getmembers(errors, inspect.isclass):
        if issubclass(c, errors.TriageError):
            assert hasattr(c, "status") == issubclass(c, errors.ProblemError), c.__name__
