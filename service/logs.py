"""structlog configuration: context bound per request and per ticket, configured once.

JSON lines for machines (a pipe, a file, `docker logs`, a log shipper); structlog's console
renderer, aligned and coloured, when the log stream is a terminal, as in `make run`.
TRIAGE_LOG_FORMAT=json or console forces one.
"""

from __future__ import annotations

import logging
import sys
from typing import IO

import structlog

FORMATS = ("auto", "json", "console")
_configured = False


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def configure_logging(level: str = "info", fmt: str = "auto", stream: IO[str] | None = None) -> None:
    """Log lines on stderr (or `stream`); `bind_contextvars(ticket_id=...)` adds the id to every
    line. fmt: auto (console on a terminal, else JSON), json or console."""
    global _configured
    stream = sys.stderr if stream is None else stream
    numeric = getattr(logging, level.upper(), logging.INFO)
    logging.basicConfig(format="%(message)s", stream=stream, level=numeric, force=True)
    console = fmt == "console" or (fmt == "auto" and _is_terminal(stream))
    shared = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    # The console renderer formats exceptions itself (and warns if they arrive pre-formatted).
    tail = (
        [structlog.dev.ConsoleRenderer(colors=_is_terminal(stream))]
        if console
        else [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    )
    structlog.configure(
        processors=[*shared, *tail],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    _configured = True
