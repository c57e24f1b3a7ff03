"""The callback sender's view of Redis: the callbacks stream, its group and its dead letters."""

from __future__ import annotations

import time

import msgspec
import redis

from ..results import TicketIn
from .keys import Keys
from .records import text
from .worker import claimed_entries, ensure_group

GROUP = "callbacks"
_request_decoder = msgspec.json.Decoder(TicketIn)


class CallbackEntry(msgspec.Struct, frozen=True):
    entry_id: str
    ticket_id: str


class CallbackPayload(msgspec.Struct, frozen=True):
    url: str | None
    body: bytes  # the stored result JSON, byte for byte: what the signature covers


class CallbackStore:
    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys

    def ensure_group(self) -> None:
        ensure_group(self.client, self.keys.callbacks, GROUP)

    def next_entries(self, consumer: str, min_idle_ms: int, count: int, block_ms: int) -> list[CallbackEntry]:
        """Ours left pending by a Redis error first, then others' abandoned ones (idle for
        `min_idle_ms`), then new ones."""
        own = self.client.xreadgroup(GROUP, consumer, {self.keys.callbacks: "0"}, count=count) or []
        entries = [(e[0], e[1]) for _stream, items in own for e in items if e]
        gone = [entry_id for entry_id, fields in entries if not fields]
        if gone:  # deleted while pending: nothing to send
            self.client.xack(self.keys.callbacks, GROUP, *gone)
        entries = [(i, f) for i, f in entries if f]
        if not entries:
            claimed = claimed_entries(
                self.client.xautoclaim(self.keys.callbacks, GROUP, consumer, min_idle_time=min_idle_ms, count=count)
            )
            entries = [(e[0], e[1]) for e in claimed if e and e[1]]
            fresh = (
                self.client.xreadgroup(GROUP, consumer, {self.keys.callbacks: ">"}, count=count, block=block_ms) or []
            )
            for _stream, items in fresh:
                entries.extend((e[0], e[1]) for e in items)
        return [CallbackEntry(entry_id=text(entry_id), ticket_id=text(fields[b"id"])) for entry_id, fields in entries]

    def payload(self, ticket_id: str) -> CallbackPayload | None:
        """The callback URL and result body; None when the ticket or its result is gone.
        Redis errors propagate: the caller leaves the entry pending."""
        request, result = self.client.hmget(self.keys.ticket(ticket_id), ["request", "result"])
        if not request or not result:
            return None
        return CallbackPayload(url=_request_decoder.decode(request).callback_url, body=result)

    def settle(self, entry: CallbackEntry, outcome: str, reason: str) -> None:
        """Acknowledge the entry; anything but a delivery goes to the dead-letter stream too,
        with the reason. One transaction; a Redis error leaves the entry pending."""
        pipe = self.client.pipeline(transaction=True)
        if outcome != "delivered":
            pipe.xadd(
                self.keys.callbacks_dead,
                {"id": entry.ticket_id, "outcome": outcome, "reason": reason, "at": repr(time.time())},
            )
        pipe.xack(self.keys.callbacks, GROUP, entry.entry_id)
        pipe.xdel(self.keys.callbacks, entry.entry_id)
        pipe.execute()
