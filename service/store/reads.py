"""Blocking reads shared by the worker and the offline jobs: a ticket, its hidden states, the
decisions stream from a cursor."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import numpy as np
import redis

from ..results import Decision
from .keys import Keys
from .records import StoredTicket, decode_features, text

_decision_decoder = msgspec.json.Decoder(Decision)


class DecisionEntry(msgspec.Struct, frozen=True):
    entry_id: str
    decision: Decision | None  # None: the entry has no `data` or it does not decode


def load_ticket(client: redis.Redis, keys: Keys, ticket_id: str) -> StoredTicket | None:
    return StoredTicket.from_hash(ticket_id, client.hgetall(keys.ticket(ticket_id)))


def load_features(client: redis.Redis, keys: Keys, ticket_id: str) -> dict[str, np.ndarray]:
    """The ticket's hidden states as the worker stored them; {} when expired or never stored."""
    return decode_features(client.get(keys.features(ticket_id)))


def decisions_since(
    client: redis.Redis, keys: Keys, after: str | None = None, batch: int = 500
) -> Iterator[DecisionEntry]:
    """Every entry of the decisions stream after entry id `after` (all with None), oldest first."""
    low = f"({after}" if after else "-"
    while True:
        entries = client.xrange(keys.decisions, min=low, max="+", count=batch)
        for entry_id, fields in entries:
            raw = fields.get(b"data", fields.get("data"))
            try:
                decision = _decision_decoder.decode(raw) if raw is not None else None
            except (msgspec.DecodeError, msgspec.ValidationError):
                decision = None
            yield DecisionEntry(entry_id=text(entry_id), decision=decision)
        if len(entries) < batch:
            return
        low = f"({text(entries[-1][0])}"
