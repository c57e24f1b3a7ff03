"""Progress bars: drawn on a terminal's stderr, off in a pipe and with --quiet."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from service.cli import build_parser
from service.progress import enabled, progress

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = (
    "from service.progress import progress\n"
    "for _ in progress(range(3), desc='replay', unit='ticket', quiet={quiet}):\n"
    "    pass\n"
    "print('result')\n"
)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TQDM_")}
    return {**env, "PYTHONPATH": str(ROOT)}


def test_off_when_stderr_is_a_pipe():
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(quiet=False)],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout == "result\n"
    assert done.stderr == ""


def _on_a_terminal(quiet: bool) -> tuple[str, str]:
    """Run the script with stderr on a pseudo-terminal; stdout stays a pipe."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT.format(quiet=quiet)],
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=follower,
        text=True,
    )
    os.close(follower)
    seen = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    out, _ = process.communicate(timeout=30)
    os.close(leader)
    return out, seen.decode(errors="replace")


def test_drawn_when_stderr_is_a_terminal():
    out, terminal = _on_a_terminal(quiet=False)
    assert out == "result\n"  # the result never goes through the bar
    assert "replay" in terminal and "3/3" in terminal and "ticket" in terminal


def test_quiet_turns_it_off_on_a_terminal():
    out, terminal = _on_a_terminal(quiet=True)
    assert out == "result\n"
    assert terminal == ""


def test_stream_decides():
    assert enabled(stream=Terminal()) and not enabled(stream=io.StringIO())
    assert not enabled(quiet=True, stream=Terminal())
    closed = io.StringIO()
    closed.close()
    assert not enabled(stream=closed)
    pipe = io.StringIO()
    assert list(progress(range(5), desc="x", stream=pipe)) == [0, 1, 2, 3, 4]
    assert pipe.getvalue() == ""


def test_bytes_show_a_rate_in_decimal_units():
    screen = Terminal()
    with progress(total=5_000_000, desc="download", unit="B", stream=screen, mininterval=0) as bar:
        bar.update(2_500_000)
    assert "download" in screen.getvalue() and "2.50M/5.00M" in screen.getvalue()
    assert "B/s" in screen.getvalue()


@pytest.mark.parametrize(
    "argv",
    [["fetch-model", "--quiet"], ["bench", "-q"], ["audit", "calibrate", "--quiet"], ["audit", "run", "--quiet"]],
)
def test_long_jobs_take_quiet(argv):
    assert build_parser().parse_args(argv).quiet is True
