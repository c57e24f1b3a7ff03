"""Operator queues and decisions over real HTTP; results are stored through the worker's store."""

from __future__ import annotations

import time

import msgspec
import redis

from service.pipeline import combine
from service.results import Answer, L2Result, ModelInfo, Timings
from service.store import Delivery, Keys, WorkerStore
from tests.support import REDIS_URL


def _finish(prefix: str, ticket_id: str, level: str) -> None:
    """Store a result for an accepted ticket exactly as a worker does (without the model)."""
    client = redis.Redis.from_url(REDIS_URL)
    store = WorkerStore(client, Keys(prefix), 3600)
    store.ensure_group()
    entry_id, _ = client.xrange(f"{prefix}:tickets")[0]
    stored = store.ticket(ticket_id)
    l1 = stored.l1
    probs = {"green": 0.1, "yellow": 0.2, "red": 0.7} if level == "red" else {"green": 0.1, "yellow": 0.8, "red": 0.1}
    l2 = L2Result(
        level=level,
        method="logits",  # type: ignore[arg-type]
        answers={"risk": Answer(kind="choice", options=list(probs), chosen=level, probabilities=probs, coverage=0.9)},
    )
    result = combine(ticket_id, l1, l2, ModelInfo(name="m.gguf", sha256="0" * 64), "p" * 64, Timings(), time.time())
    store.store_result(
        Delivery(entry_id=entry_id.decode(), ticket_id=ticket_id, deliveries=1, claimed=False),
        result,
        {},
        False,
        stored.accepted_at,
    )
    client.close()


def test_queue_lists_oldest_first_with_cursor(ingest, operator, prefix):
    ids = []
    for n in range(3):
        ticket_id = ingest.post("/v1/tickets", json={"body": f"The export crashes ({n})"}).json()["id"]
        ids.append(ticket_id)
        _finish(prefix, ticket_id, "yellow")
    first = operator.get("/v1/queues/yellow", params={"limit": 2}).json()
    assert first["depth"] == 3
    assert [item["id"] for item in first["items"]] == ids[:2]
    assert first["items"][0]["l2"]["risk"]["yellow"] == 0.8
    assert first["next_cursor"]
    second = operator.get("/v1/queues/yellow", params={"limit": 2, "cursor": first["next_cursor"]}).json()
    assert [item["id"] for item in second["items"]] == ids[2:]
    assert second["next_cursor"] is None
    assert operator.get("/v1/queues/red").json()["items"] == []


def test_ticket_and_queue_say_which_fields_are_calibrated(ingest, operator, prefix):
    ticket_id = ingest.post("/v1/tickets", json={"body": "The export crashes"}).json()["id"]
    _finish(prefix, ticket_id, "yellow")  # raw letters only: no calibration mapped anything
    assert ingest.get(f"/v1/tickets/{ticket_id}").json()["calibrated_fields"] == []
    assert operator.get("/v1/queues/yellow").json()["items"][0]["calibrated_fields"] == []


def test_unknown_queue_and_bad_cursor_are_400(operator):
    assert operator.get("/v1/queues/purple").status_code == 400
    assert operator.get("/v1/queues/red", params={"cursor": "garbage"}).status_code == 400
    assert operator.get("/v1/queues/red", params={"limit": 0}).status_code == 400


def test_decision_goes_to_the_stream_and_leaves_the_queue(ingest, operator, prefix, redis_client):
    ticket_id = ingest.post("/v1/tickets", json={"body": "I want a refund of my last invoice"}).json()["id"]
    _finish(prefix, ticket_id, "red")
    assert [i["id"] for i in operator.get("/v1/queues/red").json()["items"]] == [ticket_id]
    decision = {
        "operator": "ana",
        "action": "approve",
        "correct_level": "red",
        "category": "billing",
        "flags": {"commitment": True},
        "note": "refund",
    }
    response = operator.post(f"/v1/tickets/{ticket_id}/decision", json=decision)
    assert response.status_code == 201, response.text
    assert operator.get("/v1/queues/red").json()["items"] == []
    entries = redis_client.xrange(f"{prefix}:decisions")
    assert len(entries) == 1
    stored = msgspec.json.decode(entries[0][1][b"data"])
    assert stored["ticket_id"] == ticket_id
    assert stored["given_level"] == "red"
    assert stored["flags"] == {"commitment": True}


def test_false_green_counts_in_metrics(ingest, operator, anonymous, prefix):
    ticket_id = ingest.post("/v1/tickets", json={"body": "How do I change my avatar?"}).json()["id"]
    _finish(prefix, ticket_id, "green")
    before = _metric(anonymous.get("/metrics").text, "triage_false_greens_total")
    response = operator.post(
        f"/v1/tickets/{ticket_id}/decision",
        json={"operator": "li", "action": "escalate", "correct_level": "yellow", "false_green": True},
    )
    assert response.status_code == 201
    after = _metric(anonymous.get("/metrics").text, "triage_false_greens_total")
    assert after == before + 1


def _decide(operator, ticket_id: str, level: str, **extra):
    response = operator.post(
        f"/v1/tickets/{ticket_id}/decision",
        json={"operator": "li", "action": "escalate", "correct_level": level, **extra},
    )
    assert response.status_code == 201, response.text


def test_a_served_green_corrected_without_the_flag_is_a_false_green_once(ingest, operator, anonymous, prefix):
    green = ingest.post("/v1/tickets", json={"body": "How do I reset it?"}).json()["id"]
    yellow = ingest.post("/v1/tickets", json={"body": "Something odd."}).json()["id"]
    _finish(prefix, green, "green")
    _finish(prefix, yellow, "yellow")
    before = _metric(anonymous.get("/metrics").text, "triage_false_greens_total")
    _decide(operator, green, "red")  # no false_green flag: still a served green gone wrong
    _decide(operator, green, "red", false_green=True)  # the same ticket again: counted once
    _decide(operator, yellow, "red")  # not served green
    after = _metric(anonymous.get("/metrics").text, "triage_false_greens_total")
    assert after == before + 1


def test_bad_decisions_are_rejected(ingest, operator):
    ticket_id = ingest.post("/v1/tickets", json={"body": "hello"}).json()["id"]
    bad = [
        ({"operator": "a", "action": "shrug", "correct_level": "red"}, "action"),
        ({"operator": "a", "action": "approve", "correct_level": "blue"}, "correct_level"),
        (
            {"operator": "a", "action": "edit", "correct_level": "yellow", "flags": {"commitment": True}},
            "correct_level",
        ),
        ({"operator": "a", "action": "edit", "correct_level": "red", "category": "pets"}, "category"),
        ({"operator": "a", "action": "escalate", "correct_level": "red", "false_green": True}, "false_green"),
    ]
    for body, field in bad:
        response = operator.post(f"/v1/tickets/{ticket_id}/decision", json=body)
        assert response.status_code == 400, body
        assert field in (response.json().get("field") or ""), (body, response.json())
    missing = operator.post(
        "/v1/tickets/t_nope/decision", json={"operator": "a", "action": "approve", "correct_level": "red"}
    )
    assert missing.status_code == 404


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def test_metrics_expose_requests_and_queue_depths(ingest, anonymous):
    ingest.post("/v1/tickets", json={"body": "hello there"})
    text = anonymous.get("/metrics").text
    assert 'triage_requests_total{route="/v1/tickets",status="202"}' in text
    assert 'triage_queue_depth{queue="yellow"}' in text
    assert "triage_stream_backlog 1.0" in text
    assert "triage_l1_seconds_count" in text


def test_unrouted_404_and_405_are_counted_once(ingest, anonymous):
    """No route middleware sees a path nothing serves or a method a path does not take: the
    before-send hook counts those, and a routed answer is not counted twice."""
    series = {
        404: 'triage_requests_total{route="unmatched",status="404"}',
        405: 'triage_requests_total{route="unmatched",status="405"}',
    }
    routed = 'triage_requests_total{route="/v1/tickets",status="202"}'
    before = anonymous.get("/metrics").text
    assert ingest.get("/no/such/path").status_code == 404
    assert ingest.delete("/v1/tickets").status_code == 405
    ingest.post("/v1/tickets", json={"body": "counted once"})
    after = anonymous.get("/metrics").text
    for name in series.values():
        assert _metric(after, name) == _metric(before, name) + 1, name
    assert _metric(after, routed) == _metric(before, routed) + 1
