"""HTTP API: ticket intake, ticket state, operator queues and decisions, probes and metrics."""

from .app import PUBLIC_PATHS, create_app

__all__ = ["PUBLIC_PATHS", "create_app"]
