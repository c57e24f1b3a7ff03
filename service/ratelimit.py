"""Rate limits: the Redis token bucket every API replica shares (service/store/ratelimit.py)
and the client address a limit is keyed by."""

from __future__ import annotations

from .store.ratelimit import RedisTokenBucket

__all__ = ["RedisTokenBucket", "client_address"]


def client_address(peer: str | None, headers: dict[str, str] | object, trusted_header: str) -> str:
    """The client's address: the peer's, or, behind a proxy, the last entry of the header that
    proxy sets (TRIAGE_CLIENT_IP_HEADER). Only that header is believed, and only its last entry,
    the one the trusted proxy added itself; a client can write anything before it."""
    if trusted_header:
        value = headers.get(trusted_header.lower(), "")  # type: ignore[attr-defined]
        last = value.split(",")[-1].strip() if value else ""
        if last:
            return last[:64]
    return peer or "unknown"
