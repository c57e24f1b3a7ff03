"""What is stored in Redis, typed: the ticket hash, the worker heartbeat, the hidden-state blob,
the audit's records.

Each record has one encoder and one decoder, here. A module that reads a stored ticket gets a
`StoredTicket`, never a hash of strings to parse again.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from ..hidden_states import features_from_bytes, features_to_bytes
from ..results import Decision, L1Result, Level, TicketIn, TriageResult

_encoder = msgspec.json.Encoder()
_request_decoder = msgspec.json.Decoder(TicketIn)
_l1_decoder = msgspec.json.Decoder(L1Result)
_result_decoder = msgspec.json.Decoder(TriageResult)
_decision_decoder = msgspec.json.Decoder(Decision)


def text(value: Any) -> str:
    """A Redis reply value as text (the clients return bytes)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def decode_hash(raw: dict[Any, Any]) -> dict[str, str]:
    return {text(k): text(v) for k, v in raw.items()}


class StoredTicket(msgspec.Struct, kw_only=True):
    """The ticket hash {p}:ticket:{id}.

    The API writes id, status "queued", request, l1, accepted_at, l1_ms and callback; the
    worker adds worker, started_at, attempts, then result, final_level, completed_at (and error
    when dead-lettered); an operator's decision adds decision. Any of them may be missing from a
    hash written by an older version or cut short by expiry, so every field is optional here
    and each reader checks what it needs.
    """

    id: str
    status: str | None = None
    request: TicketIn | None = None
    l1: L1Result | None = None
    accepted_at: float | None = None
    l1_ms: float = 0.0
    callback: bool = False
    worker: str | None = None
    started_at: float | None = None
    attempts: int = 0
    result: TriageResult | None = None
    final_level: Level | None = None
    completed_at: float | None = None
    error: str | None = None
    decision: Decision | None = None

    @property
    def level(self) -> Level:
        """The level the service gave; not triaged yet counts as yellow (a person looks)."""
        if self.final_level is not None:
            return self.final_level
        return self.result.final_level if self.result is not None else "yellow"

    @property
    def finished(self) -> bool:
        return self.status in ("done", "failed")

    def to_fields(self) -> dict[str, str]:
        """The hash fields the API writes when it accepts the ticket."""
        if self.request is None or self.l1 is None or self.accepted_at is None:
            raise ValueError("a ticket is accepted with its request, L1 result and time")
        return {
            "id": self.id,
            "status": self.status or "queued",
            "request": _encoder.encode(self.request).decode(),
            "l1": _encoder.encode(self.l1).decode(),
            "accepted_at": repr(self.accepted_at),
            "l1_ms": f"{self.l1_ms:.3f}",
            "callback": "1" if self.callback else "0",
        }

    @classmethod
    def from_hash(cls, ticket_id: str, raw: dict[Any, Any]) -> StoredTicket | None:
        """The record of HGETALL's reply; None for an empty reply (no such ticket).

        Raises msgspec.DecodeError / ValidationError when a JSON field is malformed.
        """
        if not raw:
            return None
        h = decode_hash(raw)

        def number(name: str) -> float | None:
            return float(h[name]) if name in h else None

        return cls(
            id=ticket_id,
            status=h.get("status"),
            request=_request_decoder.decode(h["request"]) if "request" in h else None,
            l1=_l1_decoder.decode(h["l1"]) if "l1" in h else None,
            accepted_at=number("accepted_at"),
            l1_ms=float(h.get("l1_ms", 0.0)),
            callback=h.get("callback") == "1",
            worker=h.get("worker"),
            started_at=number("started_at"),
            attempts=int(h.get("attempts", 0)),
            result=_result_decoder.decode(h["result"]) if "result" in h else None,
            final_level=h.get("final_level"),  # type: ignore[arg-type]
            completed_at=number("completed_at"),
            error=h.get("error"),
            decision=_decision_decoder.decode(h["decision"]) if "decision" in h else None,
        )


# --- a live worker ({p}:heartbeat:{worker}) -----------------------------------------------------


class WorkerCalibration(msgspec.Struct, frozen=True):
    """The calibration a worker serves with, as its watcher reports it
    (service.calibration.CalibrationWatcher.status)."""

    version: str | None = None
    age_s: float | None = None  # the artifact's age when the heartbeat was written
    stale: bool = False
    error: str | None = None


class Heartbeat(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A live worker and what it serves with; /readyz and the console's status strip read it."""

    worker: str
    pid: int
    at: float  # when it was written (unix time)
    model: str
    sha256: str
    prompt_sha: str
    processed: int = 0
    calibration: WorkerCalibration | None = None  # None: the worker has no calibration watcher


# --- the audit's records ({p}:audit:queued, {p}:audit:green_checks) -----------------------------


class QueuedEntry(msgspec.Struct, frozen=True):
    """Why the audit put a ticket in the audit queue."""

    level: str
    category: str | None
    urgency: int | None
    verdict: str | None  # None: queued for a check and the judge gave no verdict
    failed: list[str]
    queued_at: float
    # A served green drawn uniformly and queued whatever the judge said: the operator's decision
    # on it counts towards the false-green rate on real traffic. (A green queued because the
    # judge objected does not: that draw is not uniform.)
    check: bool = False


class GreenCheck(msgspec.Struct, frozen=True):
    """An operator's decision on a green the audit queued for a check."""

    decided_at: float
    false_green: bool  # the operator raised the level or marked a false green


# --- hidden states ({p}:features:{id}) ---------------------------------------------------------


def encode_features(features: dict[str, np.ndarray]) -> bytes:
    """Hidden states as msgpack {"dtype", "features": {question: float32 bytes}}."""
    if not features:
        return b""
    return msgspec.msgpack.encode({"dtype": "float32", "features": features_to_bytes(features)})


def decode_features(blob: bytes | None) -> dict[str, np.ndarray]:
    """{question: float32 vector} from `encode_features`' blob; {} for none."""
    if not blob:
        return {}
    return features_from_bytes(msgspec.msgpack.decode(blob)["features"])
