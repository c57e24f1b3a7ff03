"""POST/GET /v1/tickets over real HTTP against a real Redis: every status code of the intake."""

from __future__ import annotations

import json

import httpx

from tests.support import ApiServer, make_settings

TICKET = {"subject": "Export question", "body": "How do I export my invoices as PDF?", "language": "en"}


def test_accepts_a_ticket_and_reports_l1(ingest, redis_client, settings):
    response = ingest.post("/v1/tickets", json=TICKET)
    assert response.status_code == 202, response.text
    body = response.json()
    assert body["status"] == "queued"
    assert body["id"].startswith("t_")
    assert response.headers["location"] == f"/v1/tickets/{body['id']}"
    assert body["l1"] == {"level": "none", "rules": []}
    # It is in the stream, waiting for a worker.
    entries = redis_client.xrange(f"{settings.redis_prefix}:tickets")
    assert [e[1][b"id"].decode() for e in entries] == [body["id"]]

    state = ingest.get(body["id"].join(["/v1/tickets/", ""])).json()
    assert state["status"] == "queued"
    assert state["l1"]["level"] == "none"


def test_l1_level_and_spans_come_back_in_the_202(ingest):
    text = "Please delete my account and all of its data immediately."
    response = ingest.post("/v1/tickets", json={"body": text})
    assert response.status_code == 202
    l1 = response.json()["l1"]
    assert l1["level"] == "red"
    spans = {rule["id"]: tuple(rule["span"]) for rule in l1["rules"]}
    # No question, thanks or request for information: the green-evidence rule fires, on no span.
    assert spans.pop("evidence.none_for_green") == (0, 0)
    assert spans
    for start, end in spans.values():
        assert 0 <= start < end <= len(text)


def test_unknown_field_is_a_400_naming_it(ingest):
    response = ingest.post("/v1/tickets", json={**TICKET, "priority": "high"})
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["status"] == 400
    assert problem["field"] == "priority"


def test_wrong_type_is_a_400_naming_the_field(ingest):
    response = ingest.post("/v1/tickets", json={"body": 42})
    assert response.status_code == 400
    assert response.json()["field"] == "body"
    response = ingest.post("/v1/tickets", json={"body": "x", "metadata": {"a": 1}})
    assert response.status_code == 400
    assert "metadata" in response.json()["field"]


def test_missing_body_field_is_a_400(ingest):
    response = ingest.post("/v1/tickets", json={"subject": "only a subject"})
    assert response.status_code == 400
    assert response.json()["field"] == "body"


def test_empty_body_is_a_422(ingest):
    for payload in ({"body": ""}, {"body": "   \n "}):
        response = ingest.post("/v1/tickets", json=payload)
        assert response.status_code == 422, payload
        assert response.json()["field"] == "body"
    response = ingest.post("/v1/tickets", content=b"", headers={"content-type": "application/json"})
    assert response.status_code == 422


def test_invalid_json_and_invalid_utf8_are_400(ingest):
    response = ingest.post(
        "/v1/tickets", content=b'{"body": "unterminated', headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    response = ingest.post(
        "/v1/tickets", content=b'{"body": "caf\xe9 \xff\xfe"}', headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["type"].endswith("invalid-request")


def test_text_over_32k_is_413_and_request_over_64k_is_413(ingest):
    response = ingest.post("/v1/tickets", json={"body": "a" * (32 * 1024 + 1)})
    assert response.status_code == 413
    assert response.json()["field"] == "body"
    big = json.dumps({"body": "ok", "metadata": {"pad": "b" * (64 * 1024)}})
    response = ingest.post("/v1/tickets", content=big, headers={"content-type": "application/json"})
    assert response.status_code == 413


def test_idempotency_same_payload_returns_the_same_ticket(ingest, redis_client, settings):
    headers = {"Idempotency-Key": "order-7781-retry"}
    first = ingest.post("/v1/tickets", json=TICKET, headers=headers)
    second = ingest.post("/v1/tickets", json=TICKET, headers=headers)
    assert first.status_code == 202
    assert second.status_code == 200
    assert second.json()["id"] == first.json()["id"]
    assert second.headers["location"] == first.headers["location"]
    assert redis_client.xlen(f"{settings.redis_prefix}:tickets") == 1


def test_idempotency_other_payload_is_409(ingest):
    headers = {"Idempotency-Key": "order-7781-retry"}
    assert ingest.post("/v1/tickets", json=TICKET, headers=headers).status_code == 202
    other = ingest.post("/v1/tickets", json={**TICKET, "body": "something else"}, headers=headers)
    assert other.status_code == 409
    assert other.json()["field"] == "Idempotency-Key"


def test_backpressure_answers_429_with_retry_after(prefix, redis_client):
    settings = make_settings(prefix, stream_max_len=3, retry_after_s=7)
    with (
        ApiServer(settings) as server,
        httpx.Client(
            base_url=server.url, headers={"Authorization": "Bearer ingest-token-for-tests-0001"}, timeout=10
        ) as client,
    ):
        codes = [client.post("/v1/tickets", json=TICKET).status_code for _ in range(4)]
        assert codes == [202, 202, 202, 429]
        full = client.post("/v1/tickets", json=TICKET)
        assert full.status_code == 429
        assert full.headers["retry-after"] == "7"
        assert full.json()["type"].endswith("queue-full")
    assert redis_client.xlen(f"{prefix}:tickets") == 3


def test_redis_unreachable_is_503_and_accepts_nothing(prefix):
    settings = make_settings(prefix, redis_url="redis://127.0.0.1:1/0")
    with (
        ApiServer(settings) as server,
        httpx.Client(
            base_url=server.url, headers={"Authorization": "Bearer ingest-token-for-tests-0001"}, timeout=10
        ) as client,
    ):
        response = client.post("/v1/tickets", json=TICKET)
        assert response.status_code == 503
        assert response.json()["type"].endswith("store-unavailable")
        assert client.get("/v1/tickets/t_0000").status_code == 503
        ready = client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["redis"] is False


def test_unknown_ticket_is_404(ingest):
    response = ingest.get("/v1/tickets/t_doesnotexist")
    assert response.status_code == 404
    assert response.json()["type"].endswith("not-found")


def test_callback_host_must_be_allowed(ingest):
    response = ingest.post("/v1/tickets", json={**TICKET, "callback_url": "http://169.254.169.254/latest"})
    assert response.status_code == 400
    assert response.json()["field"] == "callback_url"
