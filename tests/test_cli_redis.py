"""A command without its Redis: one line naming where it looked, a non-zero exit, no traceback,
and no model loaded first."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support import INGEST, OPERATOR, free_port


@pytest.mark.parametrize("command", [["worker"], ["audit", "run"], ["recalibrate"]])
def test_missing_redis_is_one_line_and_exit_4(command, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIAGE_")}
    env.update(
        {
            "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",  # nothing listens there
            "TRIAGE_INGEST_TOKENS": INGEST,
            "TRIAGE_OPERATOR_TOKENS": OPERATOR,
            "TRIAGE_VAR_DIR": str(tmp_path),
            "TRIAGE_LOG_LEVEL": "warning",
        }
    )
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", *command], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 4, done.stderr[-2000:]
    output = done.stdout + done.stderr
    assert "Traceback" not in output
    lines = [line for line in done.stderr.splitlines() if line.startswith("triage ")]
    assert len(lines) == 1 and "does not answer" in lines[0], done.stderr
    assert "l2_ready" not in output  # failed before loading a model
