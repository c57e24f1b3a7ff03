"""The judge's verdict cache in Redis."""

from __future__ import annotations

import redis

from .keys import Keys


class RedisVerdictCache:
    """Judge verdicts under {p}:audit:verdicts:{key}; no expiry, the key changes instead."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys

    def get(self, key: str) -> bytes | None:
        return self.client.get(self.keys.audit_verdict(key))

    def put(self, key: str, value: bytes) -> None:
        self.client.set(self.keys.audit_verdict(key), value)
