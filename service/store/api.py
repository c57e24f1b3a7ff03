"""The API's view of Redis (redis.asyncio): accept, read, queues, decisions, gauges."""

from __future__ import annotations

from typing import Any

import msgspec
import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from ..errors import QueueFull
from ..results import Decision
from . import scripts
from .keys import QUEUES, WORKER_GROUP, Keys
from .ratelimit import RedisTokenBucket
from .records import Heartbeat, StoredTicket, decode_hash, text

_encoder = msgspec.json.Encoder()
_heartbeat_decoder = msgspec.json.Decoder(Heartbeat)


class AcceptOutcome(msgspec.Struct, frozen=True):
    created: bool
    ticket_id: str
    payload_sha: str


class DecideOutcome(msgspec.Struct, frozen=True):
    recorded: bool  # False: no such ticket
    false_green: bool  # the first decision saying that a served green was not green


class Position(msgspec.Struct, frozen=True):
    """Where a ticket stands in a queue: rank from the oldest, and its neighbours."""

    rank: int | None
    depth: int
    previous: str | None
    next: str | None


class AsyncStore:
    """The API's view of Redis."""

    def __init__(
        self, client: aioredis.Redis, keys: Keys, result_ttl_s: int, idempotency_ttl_s: int, max_backlog: int
    ) -> None:
        self.client = client
        self.keys = keys
        self.result_ttl_s = result_ttl_s
        self.idempotency_ttl_s = idempotency_ttl_s
        self.max_backlog = max_backlog
        self._accept = client.register_script(scripts.ACCEPT)
        self._decide = client.register_script(scripts.DECIDE)

    @classmethod
    def connect(cls, redis_url: str, settings: Any) -> AsyncStore:
        """A store on its own connection pool, with the API's timeouts; close with aclose()."""
        # A pooled connection that Redis dropped (a restart, a failover) fails on first use:
        # reconnect and send again instead of answering 503. Only a refused or broken
        # connection is retried, never a timeout, after which the command may have run.
        client = aioredis.Redis.from_url(
            redis_url,
            socket_timeout=2.0,
            socket_connect_timeout=2.0,
            health_check_interval=10,
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), retries=2),
            retry_on_error=[redis.ConnectionError],
        )
        return cls(
            client,
            Keys(settings.redis_prefix),
            settings.result_ttl_s,
            settings.idempotency_ttl_s,
            settings.stream_max_len,
        )

    async def aclose(self) -> None:
        await self.client.aclose()

    async def ping(self) -> bool:
        return bool(await self.client.ping())

    # --- tickets
    async def accept(self, ticket: StoredTicket, payload_sha: str, idempotency_key: str | None) -> AcceptOutcome:
        """Write the ticket hash, append its id to the stream and record the idempotency key, in
        one step; or refuse with QueueFull; or return the ticket an earlier request made."""
        flat: list[str] = []
        for name, value in ticket.to_fields().items():
            flat += [name, value]
        idem_key = self.keys.idempotency(idempotency_key) if idempotency_key else "-"
        reply = await self._accept(
            keys=[idem_key, self.keys.ticket(ticket.id), self.keys.stream],
            args=[
                "1" if idempotency_key else "0",
                ticket.id,
                payload_sha,
                self.result_ttl_s,
                self.idempotency_ttl_s,
                self.max_backlog,
                self.keys.ticket(""),
                *flat,
            ],
        )
        kind, value = text(reply[0]), text(reply[1])
        if kind == "full":
            raise QueueFull(f"stream backlog {value}", backlog=int(value))
        if kind == "exists":
            existing_id, _, existing_sha = value.partition(" ")
            return AcceptOutcome(created=False, ticket_id=existing_id, payload_sha=existing_sha)
        return AcceptOutcome(created=True, ticket_id=ticket.id, payload_sha=payload_sha)

    async def ticket(self, ticket_id: str) -> StoredTicket | None:
        return StoredTicket.from_hash(ticket_id, await self.client.hgetall(self.keys.ticket(ticket_id)))

    async def decide(self, ticket_id: str, decision: Decision) -> DecideOutcome:
        """Append to the decisions stream, keep it on the ticket, take it out of every queue."""
        recorded, false_green = await self._decide(
            keys=[self.keys.ticket(ticket_id), self.keys.decisions, *(self.keys.queue(q) for q in QUEUES)],
            args=[_encoder.encode(decision).decode(), ticket_id, decision.correct_level],
        )
        return DecideOutcome(recorded=bool(recorded), false_green=bool(false_green))

    def rate_limiter(self, kind: str, rate: float, burst: int, message: str) -> RedisTokenBucket:
        """A token bucket per subject under {p}:ratelimit:{kind}:, shared by every replica."""
        return RedisTokenBucket(self.client, self.keys.ratelimit(kind), rate, burst, message)

    # --- operator queues
    async def queue_page(self, queue: str, limit: int, cursor: tuple[float, str] | None) -> list[tuple[str, float]]:
        """Oldest first; the cursor is (score, id) of the last item already seen."""
        low: str | float = "-inf" if cursor is None else cursor[0]
        rows = await self.client.zrangebyscore(
            self.keys.queue(queue), low, "+inf", start=0, num=limit + 64, withscores=True
        )
        items = [(text(member), float(score)) for member, score in rows]
        if cursor is not None:
            items = [(m, s) for m, s in items if (s, m) > (cursor[0], cursor[1])]
        return items[:limit]

    async def queue_depth(self, queue: str) -> int:
        return int(await self.client.zcard(self.keys.queue(queue)))

    async def queues_holding(self, ticket_id: str) -> list[str]:
        """The queues the ticket waits in, in QUEUES order."""
        pipe = self.client.pipeline(transaction=False)
        for queue in QUEUES:
            pipe.zscore(self.keys.queue(queue), ticket_id)
        scores = await pipe.execute()
        return [q for q, score in zip(QUEUES, scores, strict=True) if score is not None]

    async def queue_rank(self, queue: str, ticket_id: str) -> int | None:
        return await self.client.zrank(self.keys.queue(queue), ticket_id)

    async def queue_member(self, queue: str, rank: int) -> str | None:
        """The id at `rank` (0 = the oldest), or None past the end."""
        rows = await self.client.zrange(self.keys.queue(queue), rank, rank)
        return text(rows[0]) if rows else None

    async def position(self, queue: str, ticket_id: str) -> Position:
        key = self.keys.queue(queue)
        rank = await self.client.zrank(key, ticket_id)
        depth = int(await self.client.zcard(key))
        if rank is None:
            return Position(rank=None, depth=depth, previous=None, next=None)
        ids = [text(m) for m in await self.client.zrange(key, max(rank - 1, 0), rank + 1)]
        here = ids.index(ticket_id)
        return Position(
            rank=rank,
            depth=depth,
            previous=ids[here - 1] if here > 0 else None,
            next=ids[here + 1] if here + 1 < len(ids) else None,
        )

    # --- what /metrics, /readyz and the console's status strip show
    async def gauges(self) -> dict[str, Any]:
        """Queue depths, stream backlog and pending, live workers: read at scrape time."""
        pipe = self.client.pipeline(transaction=False)
        for queue in QUEUES:
            pipe.zcard(self.keys.queue(queue))
        pipe.xlen(self.keys.stream)
        pipe.hgetall(self.keys.audit_state)
        depths = await pipe.execute()
        try:
            pending = await self.client.xpending(self.keys.stream, WORKER_GROUP)
            pending_count = int(pending["pending"])
        except redis.ResponseError:  # no group yet: no worker ever started
            pending_count = 0
        workers = [key async for key in self.client.scan_iter(self.keys.heartbeat_pattern(), count=100)]
        return {
            "queues": dict(zip(QUEUES, depths[: len(QUEUES)], strict=True)),
            "backlog": int(depths[len(QUEUES)]),
            "audit": decode_hash(depths[len(QUEUES) + 1] or {}),
            "pending": pending_count,
            "workers": len(workers),
        }

    async def workers(self) -> list[Heartbeat]:
        """The live workers' heartbeats (see WorkerStore.heartbeat)."""
        beats = []
        async for key in self.client.scan_iter(self.keys.heartbeat_pattern(), count=100):
            raw = await self.client.get(key)
            if not raw:
                continue  # expired between the scan and the read
            try:
                beats.append(_heartbeat_decoder.decode(raw))
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue  # not a heartbeat this version wrote: no worker it can count on
        return beats
