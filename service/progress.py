"""Progress bars for the long offline jobs (fetch-model, bench, recalibrate, eval, audit).

One function, `progress`, for every job. It returns a tqdm bar drawn on stderr, and only when
stderr is a terminal: under cron, CI, `docker logs` or a pipe it returns tqdm's do-nothing bar
(same methods, no output), so what a machine reads stays structlog JSON and the command's own
result. `quiet=True` (the `--quiet` flag every long job takes, see `add_quiet_argument`) turns it
off in a terminal too; so does tqdm's own `TQDM_DISABLE=1`.

    from service.progress import add_quiet_argument, progress

    # over an iterable: counts, rate, ETA when the length is known
    for ticket in progress(tickets, desc="replay", unit="ticket", quiet=args.quiet):
        ...

    # over a quantity: update it yourself; unit="B" shows kB/MB and MB/s
    with progress(total=size, desc="download", unit="B", quiet=args.quiet) as bar:
        bar.update(len(chunk))

    # what the job is on now, beside the counts (e.g. the fit: question and fold)
    bar.set_postfix_str("risk, fold 3/5")

    # a line the user should read while a bar is drawn (does not tear the bar; printed with
    # or without a bar)
    bar.write("disagreement: case 12", file=sys.stderr)

Nested bars: pass `position=1, leave=False` for the inner one. Any other keyword goes to tqdm.
Progress is not logging: never route a bar through structlog, and never rely on a bar for a
result (a pipe never sees it).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tqdm import tqdm

__all__ = ["add_quiet_argument", "enabled", "progress"]


def enabled(quiet: bool = False, stream: IO[str] | None = None) -> bool:
    """Whether a bar would be drawn: not quiet, and `stream` (default stderr) is a terminal."""
    stream = sys.stderr if stream is None else stream
    if quiet:
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def progress(
    iterable: Iterable[Any] | None = None,
    *,
    total: float | None = None,
    desc: str = "",
    unit: str = "it",
    quiet: bool = False,
    stream: IO[str] | None = None,
    **kwargs: Any,
) -> tqdm:
    """A progress bar over `iterable` (or over `total` units updated by hand), on stderr.

    `total` defaults to len(iterable) when it has one. `unit="B"` scales to kB/MB/GB and shows
    the transfer rate. `stream` is for tests; the bar writes to stderr otherwise.
    """
    from tqdm import tqdm  # here, not at import: `triage serve` never draws a bar

    stream = sys.stderr if stream is None else stream
    if unit == "B":
        kwargs.setdefault("unit_scale", True)
        kwargs.setdefault("unit_divisor", 1000)
    kwargs.setdefault("dynamic_ncols", True)
    kwargs.setdefault("mininterval", 0.5)
    return tqdm(iterable, total=total, desc=desc, unit=unit, file=stream, disable=not enabled(quiet, stream), **kwargs)


def add_quiet_argument(parser: argparse.ArgumentParser) -> None:
    """`-q/--quiet`: no progress bar, even in a terminal (results and errors still print)."""
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress bar (it is drawn on stderr only when that is a terminal)",
    )
