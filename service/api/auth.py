"""Bearer-token auth with two roles, `ingest` and `operator`, compared in constant time."""

from __future__ import annotations

import hmac
from collections.abc import Iterable

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from ..errors import Forbidden, Unauthorized

ROLES = ("ingest", "operator")


class TokenTable:
    """Which roles each configured token has. Tokens are never logged or echoed."""

    def __init__(self, ingest: Iterable[str], operator: Iterable[str]) -> None:
        self._tokens: list[tuple[bytes, str]] = [(t.encode(), "ingest") for t in ingest]
        self._tokens += [(t.encode(), "operator") for t in operator]

    def roles(self, presented: str) -> set[str]:
        candidate = presented.encode()
        found: set[str] = set()
        for token, role in self._tokens:  # compare against all: timing does not reveal a match
            if hmac.compare_digest(token, candidate):
                found.add(role)
        return found


def bearer(connection: ASGIConnection) -> str | None:
    header = connection.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def roles_of(connection: ASGIConnection) -> set[str]:
    """Roles of the bearer token. Session cookies count only on the console's own routes
    (which check CSRF), never here: a cookie-authenticated JSON API would be open to CSRF."""
    token = bearer(connection)
    return connection.app.state.tokens.roles(token) if token else set()


def require(*allowed: str):
    """A Litestar guard: 401 without a valid token, 403 with a token holding none of `allowed`."""

    async def guard(connection: ASGIConnection, _: BaseRouteHandler) -> None:
        token = bearer(connection)
        roles = roles_of(connection)
        if not roles:
            raise Unauthorized(
                "missing bearer token" if token is None else "unknown bearer token",
                headers={"WWW-Authenticate": 'Bearer realm="triage"'},
            )
        if not roles & set(allowed):
            raise Forbidden(f"this token lacks the {' or '.join(allowed)} role")
        if "ingest" in roles & set(allowed) and token is not None:
            # One bucket per token in Redis: shared by every API replica.
            await connection.app.state.rate_limiter.take(token)

    guard.__name__ = f"require_{'_or_'.join(allowed)}"
    return guard
