"""structlog configuration: JSON lines, context bound per request and per ticket, configured once."""

from __future__ import annotations

import logging
import sys

import structlog

_configured = False


def configure_logging(level: str = "info") -> None:
    """JSON lines on stderr; `bind_contextvars(ticket_id=...)` adds the id to every line."""
    global _configured
    numeric = getattr(logging, level.upper(), logging.INFO)
    logging.basicConfig(format="%(message)s", stream=sys.stderr, level=numeric, force=True)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    _configured = True
