"""Tests that need a program from a system package skip without it, and say which package.

`requires("promtool", "prometheus")` is a skipif mark whose reason names the program and the
Debian package; tests/conftest.py ends the run with one line listing what was skipped that way.
"""

from __future__ import annotations

import re
import shutil
from collections import Counter

import pytest

REASON = "needs {program} (Debian package {package})"
_PARSE = re.compile(r"needs (\S+) \(Debian package (\S+)\)")


def present(program: str) -> bool:
    """On PATH, or (a path) an executable file."""
    return shutil.which(program) is not None


def requires(program: str, package: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(not present(program), reason=REASON.format(program=program, package=package))


def summary(reasons: list[str]) -> str | None:
    """One line from the skip reasons of a run: what was skipped, and the package that enables it."""
    counts: Counter[tuple[str, str]] = Counter()
    for reason in reasons:
        match = _PARSE.search(reason)
        if match:
            counts[(match.group(1), match.group(2))] += 1
    if not counts:
        return None
    parts = [
        f"{n} {'test needs' if n == 1 else 'tests need'} {program} (apt-get install {package})"
        for (program, package), n in sorted(counts.items())
    ]
    return "skipped for lack of system packages: " + "; ".join(parts)
