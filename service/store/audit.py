"""The audit's view of Redis: sampling finished tickets, its queue and checks, its state, the
judge's verdict cache."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import redis

from ..results import TicketIn
from .keys import Keys
from .reads import DecisionEntry, decisions_since
from .records import GreenCheck, QueuedEntry, text

CURSOR_FIELD = "decisions_cursor"

_encoder = msgspec.json.Encoder()
_request_decoder = msgspec.json.Decoder(TicketIn)
_queued_decoder = msgspec.json.Decoder(QueuedEntry)
_check_decoder = msgspec.json.Decoder(GreenCheck)


class AuditedView(msgspec.Struct):
    """The few fields of a stored TriageResult the audit reads (tolerant of new fields)."""

    final_level: str
    category: str | None = None
    urgency: int | None = None


_result_decoder = msgspec.json.Decoder(AuditedView)


class AuditStore:
    """{p}:results, the ticket hashes (read only), {p}:queue:audit, {p}:audit:queued,
    {p}:audit:green_checks, {p}:audit:state and the decisions stream from the audit's cursor."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys

    # --- what was served
    def recent_levels(self, window: int) -> list[tuple[str, str]]:
        """(ticket id, final level) of the newest `window` finished tickets still stored."""
        entries = self.client.xrevrange(self.keys.results, count=window)
        ids = []
        for _, fields in entries:
            ticket_id = fields.get(b"id", fields.get("id"))
            if ticket_id is not None:
                ids.append(text(ticket_id))
        pipe = self.client.pipeline(transaction=False)
        for ticket_id in ids:
            pipe.hmget(self.keys.ticket(ticket_id), "status", "final_level")
        rows = pipe.execute() if ids else []
        return [
            (ticket_id, text(level))
            for ticket_id, (status, level) in zip(ids, rows, strict=True)
            if status is not None and text(status) == "done" and level is not None
        ]

    def served(self, ticket_id: str) -> tuple[TicketIn, AuditedView, bool] | None:
        """The request, the result and whether an operator decided; None when either is gone."""
        request, result, decision = self.client.hmget(self.keys.ticket(ticket_id), "request", "result", "decision")
        if request is None or result is None:
            return None
        return _request_decoder.decode(request), _result_decoder.decode(result), decision is not None

    def request(self, ticket_id: str) -> TicketIn | None:
        raw = self.client.hget(self.keys.ticket(ticket_id), "request")
        return None if raw is None else _request_decoder.decode(raw)

    # --- operators' decisions since the last run
    def new_decisions(self) -> Iterator[DecisionEntry]:
        """The decisions stream after the cursor `commit_decisions` last moved."""
        cursor = self.client.hget(self.keys.audit_state, CURSOR_FIELD)
        return decisions_since(self.client, self.keys, text(cursor) if cursor else None)

    def commit_decisions(self, last: str | None, decided: list[str], checks: dict[str, GreenCheck]) -> None:
        """In one transaction: move the cursor to `last`, forget the decided queued entries,
        record the operators' checks."""
        pipe = self.client.pipeline(transaction=True)
        if last is not None:
            pipe.hset(self.keys.audit_state, CURSOR_FIELD, last)
        if decided:
            pipe.hdel(self.keys.audit_queued, *decided)
        if checks:
            pipe.hset(
                self.keys.audit_green_checks,
                mapping={ticket_id: _encoder.encode(check) for ticket_id, check in checks.items()},
            )
        pipe.execute()

    # --- the audit queue
    def queued(self) -> dict[str, QueuedEntry]:
        return {text(k): _queued_decoder.decode(v) for k, v in self.client.hgetall(self.keys.audit_queued).items()}

    def forget_queued(self, ticket_ids: list[str]) -> None:
        if ticket_ids:
            self.client.hdel(self.keys.audit_queued, *ticket_ids)

    def queue(self, ticket_id: str, entry: QueuedEntry) -> None:
        """Put a ticket in the audit queue and remember why; a check once asked stays a check."""
        previous = self.client.hget(self.keys.audit_queued, ticket_id)
        if previous is not None and _queued_decoder.decode(previous).check:
            entry = msgspec.structs.replace(entry, check=True)
        pipe = self.client.pipeline(transaction=True)
        pipe.zadd(self.keys.queue("audit"), {ticket_id: entry.queued_at}, nx=True)
        pipe.hset(self.keys.audit_queued, ticket_id, _encoder.encode(entry))
        pipe.execute()

    # --- operators' checks of served greens
    def green_checks(self) -> dict[str, GreenCheck]:
        return {text(k): _check_decoder.decode(v) for k, v in self.client.hgetall(self.keys.audit_green_checks).items()}

    def forget_checks(self, ticket_ids: list[str]) -> None:
        if ticket_ids:
            self.client.hdel(self.keys.audit_green_checks, *ticket_ids)

    # --- what /metrics shows
    def publish_state(self, fields: dict[str, str]) -> None:
        self.client.hset(self.keys.audit_state, mapping=fields)


class RedisVerdictCache:
    """Judge verdicts under {p}:audit:verdicts:{key}; no expiry, the key changes instead."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys

    def get(self, key: str) -> bytes | None:
        return self.client.get(self.keys.audit_verdict(key))

    def put(self, key: str, value: bytes) -> None:
        self.client.set(self.keys.audit_verdict(key), value)
