"""Token-bucket rate limits kept in Redis, so that every API replica draws from one bucket.

One Lua step refills and takes from a bucket atomically, on Redis's clock (replicas' clocks do
not matter). A bucket is a small hash `<prefix>:ratelimit:<kind>:<sha256 of the subject>` (keys.py; a
bearer token or a client address never lands in Redis in clear) that expires once it would
be full again: memory stays bounded by the subjects active in the last burst/rate seconds.
"""

from __future__ import annotations

import hashlib
import math

import redis.asyncio as aioredis

from ..errors import RateLimited

# KEYS: bucket. ARGV: rate per second, burst. Returns {1, ""} or {0, seconds until one token}.
_TAKE = """
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local at = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local allowed = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil((burst - tokens) / rate) + 1)
if allowed == 1 then return {1, ''} end
return {0, tostring((1 - tokens) / rate)}
"""


class RedisTokenBucket:
    """`rate` requests/s sustained and bursts of `burst`, per subject, shared by all replicas."""

    def __init__(self, client: aioredis.Redis, key_prefix: str, rate: float, burst: int, message: str) -> None:
        self.prefix = key_prefix  # Keys.ratelimit(kind)
        self.rate = rate
        self.burst = burst
        self.message = message
        self._take = client.register_script(_TAKE)

    def key(self, subject: str) -> str:
        return self.prefix + hashlib.sha256(subject.encode("utf-8", "replace")).hexdigest()[:32]

    async def take(self, subject: str) -> None:
        """Take one token, or raise RateLimited with Retry-After. Redis errors propagate (the
        API answers 503: without Redis nothing can be accepted anyway)."""
        allowed, wait = await self._take(keys=[self.key(subject)], args=[self.rate, self.burst])
        if int(allowed) != 1:
            retry = max(1, math.ceil(float(wait)))
            raise RateLimited(self.message, headers={"Retry-After": str(retry)})
