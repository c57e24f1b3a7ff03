"""`make test` ends with one line naming the tests skipped for a missing system package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.system import requires, summary

ROOT = Path(__file__).resolve().parents[1]


def test_the_line_names_each_program_its_count_and_package():
    reasons = ["needs /usr/bin/chromium (Debian package chromium)"] * 3 + [
        "needs promtool (Debian package prometheus)",
        "some other reason",
    ]
    assert summary(reasons) == (
        "skipped for lack of system packages: 3 tests need /usr/bin/chromium (apt-get install "
        "chromium); 1 test needs promtool (apt-get install prometheus)"
    )
    assert summary(["some other reason"]) is None


def test_a_real_run_ends_with_it(tmp_path):
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_terminal_summary\n")
    (tmp_path / "test_x.py").write_text(
        "from tests.system import requires\n\n"
        "@requires('no-such-program-4f2a', 'no-such-package')\n"
        "def test_needs_it():\n    pass\n\n"
        "def test_plain():\n    pass\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    # just above pytest's own closing line, which CI parsers read and which therefore stays last
    assert lines[-2] == (
        "skipped for lack of system packages: 1 test needs no-such-program-4f2a (apt-get install no-such-package)"
    ), lines[-3:]
    assert lines[-1].startswith("1 passed, 1 skipped")


def test_present_programs_do_not_skip():
    assert not requires(sys.executable, "python3").args[0]
