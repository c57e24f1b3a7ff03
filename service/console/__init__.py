"""Operator console: the yellow, red and audit queues in the browser, each ticket with why, decided by keystroke.

`route_handlers()` gives the routers to append to the app (service/cli.py `_app` does).
"""

from .routes import route_handlers

__all__ = ["route_handlers"]
