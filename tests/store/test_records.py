"""The stored records: a ticket hash written and read back, the hidden-state codec."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest

from service.results import Decision, L1Result, L2Result, ModelInfo, RuleHit, TicketIn, Timings, TriageResult
from service.store import StoredTicket, decode_features, encode_features

L1 = L1Result(
    level="red", rules=[RuleHit(id="money.refund", level="red", flag="commitment", span=(0, 6), text="refund")]
)


def _accepted() -> StoredTicket:
    return StoredTicket(
        id="t_1",
        status="queued",
        request=TicketIn(body="refund me", subject="s"),
        l1=L1,
        accepted_at=1700000000.123456,
        l1_ms=0.41234,
        callback=True,
    )


def test_accepted_ticket_fields_round_trip():
    fields = _accepted().to_fields()
    assert fields["accepted_at"] == "1700000000.123456" and fields["l1_ms"] == "0.412"
    assert fields["callback"] == "1" and fields["status"] == "queued"
    back = StoredTicket.from_hash("t_1", {k.encode(): v.encode() for k, v in fields.items()})
    assert back is not None
    assert (back.request, back.l1, back.accepted_at, back.callback) == (
        TicketIn(body="refund me", subject="s"),
        L1,
        1700000000.123456,
        True,
    )
    assert back.l1_ms == pytest.approx(0.412)


def test_not_triaged_counts_as_yellow_and_a_result_gives_its_level():
    assert _accepted().level == "yellow" and not _accepted().finished
    result = TriageResult(
        id="t_1",
        status="done",
        final_level="red",
        l1=L1,
        l2=L2Result(level="red", method="logits"),
        category=None,
        urgency=None,
        model=ModelInfo(name="m", sha256="0"),
        prompt_sha="p",
        rules_sha="r",
        timings_ms=Timings(),
    )
    raw = {
        **_accepted().to_fields(),
        "status": "done",
        "result": msgspec.json.encode(result).decode(),
        "final_level": "red",
        "decision": msgspec.json.encode(
            Decision(
                ticket_id="t_1",
                operator="ana",
                action="approve",
                correct_level="red",
                given_level="red",
                decided_at=1.0,
            )
        ).decode(),
    }
    stored = StoredTicket.from_hash("t_1", raw)
    assert stored is not None and stored.level == "red" and stored.finished
    assert stored.decision is not None and stored.decision.operator == "ana"


def test_empty_hash_is_no_ticket_and_a_partial_one_keeps_what_it_has():
    assert StoredTicket.from_hash("t_x", {}) is None
    partial = StoredTicket.from_hash("t_x", {b"status": b"done", b"final_level": b"green"})
    assert partial is not None and partial.request is None and partial.level == "green"


def test_accept_needs_request_l1_and_time():
    with pytest.raises(ValueError):
        StoredTicket(id="t_1").to_fields()


def test_features_codec_round_trips_float32_and_empty():
    features = {"risk": np.arange(4, dtype=np.float64), "category": np.ones(2, dtype=np.float32)}
    back = decode_features(encode_features(features))
    assert set(back) == {"risk", "category"} and back["risk"].dtype == np.float32
    assert back["risk"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert encode_features({}) == b"" and decode_features(b"") == {} and decode_features(None) == {}
