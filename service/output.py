"""`--json OUT` for every command that takes it: OUT is a file, or stdout when it is "-".

With the JSON on stdout, the command's human summary goes to stderr (`human_stream`), so
`triage bench --json - | jq .l1` reads nothing but the JSON.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import IO

STDOUT = "-"


def write_json(data: bytes | str, destination: str | Path) -> None:
    """Write already-encoded JSON to `destination` (parent folders made), or to stdout for "-"."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    if not text.endswith("\n"):
        text += "\n"
    if str(destination) == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    path = Path(destination)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def human_stream(json_destination: str | Path | None) -> IO[str]:
    """Where a command prints its summary: stderr when its JSON goes to stdout."""
    return sys.stderr if json_destination is not None and str(json_destination) == STDOUT else sys.stdout
