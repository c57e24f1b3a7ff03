"""The worker on the real model and a real Redis: results stored once, claims, drain, dead letters.

The SIGKILL and SIGTERM tests run `triage worker` as a real subprocess.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import msgspec
import pytest
import redis

from service.store import Keys, decode_features
from service.worker import Worker
from tests.support import INGEST, OPERATOR, REDIS_URL, ApiServer, make_settings

pytestmark = pytest.mark.model

LONG_BODY = "Hello, our team cannot open the reporting dashboard since this morning. " * 40 + "Could you look into it?"


@pytest.fixture(scope="module")
def classifier():
    from service.l2 import Classifier

    return Classifier.from_settings(make_settings("unused"))


def _post(url: str, body: str, subject: str | None = None) -> str:
    response = httpx.post(
        f"{url}/v1/tickets",
        json={"body": body, "subject": subject},
        headers={"Authorization": f"Bearer {INGEST}"},
        timeout=10,
    )
    assert response.status_code == 202, response.text
    return response.json()["id"]


def _get(url: str, ticket_id: str) -> dict:
    return httpx.get(f"{url}/v1/tickets/{ticket_id}", headers={"Authorization": f"Bearer {INGEST}"}, timeout=10).json()


def test_end_to_end_result_is_stored_and_queued(prefix, classifier, redis_client):
    settings = make_settings(prefix, l2_timeout_s=600)  # a busy CI machine must not time out
    with ApiServer(settings) as api:
        red = _post(
            api.url,
            "Please delete our whole workspace and every user account in it today, and cancel the contract.",
            "Close everything",
        )
        how_to = _post(api.url, "How do I change the language of the interface to French?")
        worker = Worker(settings, redis.Redis.from_url(REDIS_URL), classifier, consumer="w1")
        assert worker.run(burst=True) == 2
        result = _get(api.url, red)
        assert result["status"] == "done"
        assert result["final_level"] == "red"
        assert result["l1"]["level"] == "red"  # a rule's level is never lowered
        assert result["l2"]["method"] in ("logits", "generated")
        assert set(result["timings_ms"]) == {"l1", "queue_wait", "l2", "total"}
        assert result["model"]["sha256"] == classifier.model_info.sha256
        assert result["prompt_sha"] == classifier.prompt_sha and result["rules_sha"]
        assert result["l2"]["tokens_evaluated"] > 0
        other = _get(api.url, how_to)
        assert other["status"] == "done"
        queues = httpx.get(f"{api.url}/v1/queues/red", headers={"Authorization": f"Bearer {OPERATOR}"}).json()
        assert red in [item["id"] for item in queues["items"]]
    features = decode_features(redis_client.get(Keys(prefix).features(red)))
    assert features and all(v.ndim == 1 and v.size > 100 for v in features.values())
    assert redis_client.xlen(f"{prefix}:tickets") == 0  # acknowledged and removed
    assert redis_client.xlen(f"{prefix}:results") == 2


def test_readyz_follows_the_worker_heartbeat(prefix, classifier):
    import threading

    settings = make_settings(prefix, block_ms=200)
    with ApiServer(settings) as api:
        assert httpx.get(f"{api.url}/readyz").status_code == 503
        worker = Worker(settings, redis.Redis.from_url(REDIS_URL), classifier, consumer="w-ready")
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        try:
            deadline = time.time() + 30
            while httpx.get(f"{api.url}/readyz").status_code != 200 and time.time() < deadline:
                time.sleep(0.1)
            ready = httpx.get(f"{api.url}/readyz")
            assert ready.status_code == 200
            assert ready.json()["models"] == [classifier.model_info.name]
        finally:
            worker.stop.set()
            thread.join(timeout=30)
        assert httpx.get(f"{api.url}/readyz").status_code == 503  # heartbeat cleared on exit


def test_l2_timeout_is_yellow_unavailable_never_green(prefix, classifier):
    settings = make_settings(prefix, l2_timeout_s=0.001)
    with ApiServer(settings) as api:
        ticket_id = _post(api.url, "Thank you, everything works now!")
        Worker(settings, redis.Redis.from_url(REDIS_URL), classifier).run(burst=True)
        result = _get(api.url, ticket_id)
    assert result["l2"]["method"] == "unavailable"
    assert result["final_level"] == "yellow"


def test_too_many_deliveries_go_to_the_dead_letter_stream(prefix, classifier, redis_client):
    settings = make_settings(prefix, max_deliveries=2, claim_idle_ms=100)
    keys = Keys(prefix)
    with ApiServer(settings) as api:
        ticket_id = _post(api.url, "The export crashes every time.")
        worker = Worker(settings, redis.Redis.from_url(REDIS_URL), classifier, consumer="w2")
        worker.store.ensure_group()
        # Two workers took it and died without a result.
        redis_client.xreadgroup("workers", "ghost", {keys.stream: ">"}, count=1)
        entry_id = redis_client.xrange(keys.stream)[0][0]
        time.sleep(0.15)
        redis_client.xclaim(keys.stream, "workers", "ghost2", 100, [entry_id])
        time.sleep(0.15)
        worker.run(burst=True)
        result = _get(api.url, ticket_id)
    assert result["status"] == "failed"
    assert result["final_level"] == "yellow"
    assert result["l2"]["method"] == "unavailable"
    dead = redis_client.xrange(keys.deadletter)
    assert [d[1][b"id"].decode() for d in dead] == [ticket_id]
    assert redis_client.zscore(keys.queue("yellow"), ticket_id) is not None
    assert redis_client.xlen(keys.stream) == 0


def _worker_process(prefix: str, *extra: str, **env: str) -> subprocess.Popen:
    environment = {
        **os.environ,
        "REDIS_URL": REDIS_URL,
        "TRIAGE_REDIS_PREFIX": prefix,
        "TRIAGE_METRICS_PORT": "0",
        "TRIAGE_LOG_LEVEL": "info",
        **env,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "service.cli", "worker", *extra],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def _wait_status(client, key: str, wanted: set[str], timeout: float) -> str:
    deadline = time.time() + timeout
    status = ""
    while time.time() < deadline:
        status = (client.hget(key, "status") or b"").decode()
        if status in wanted:
            return status
        time.sleep(0.02)
    raise AssertionError(f"status {status!r} never became {wanted}")


def test_worker_killed_mid_ticket_is_claimed_by_another_and_stored_once(prefix, redis_client):
    settings = make_settings(prefix)
    keys = Keys(prefix)
    with ApiServer(settings) as api:
        ticket_id = _post(api.url, LONG_BODY)
        first = _worker_process(prefix, TRIAGE_CLAIM_IDLE_MS="1500", TRIAGE_L2_TIMEOUT_S="600")
        try:
            _wait_status(redis_client, keys.ticket(ticket_id), {"processing"}, timeout=120)
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
        finally:
            first.kill()
            first.stdout.close()
        assert redis_client.hget(keys.ticket(ticket_id), "status") == b"processing"
        second = _worker_process(prefix, "--burst", TRIAGE_CLAIM_IDLE_MS="1500", TRIAGE_L2_TIMEOUT_S="600")
        try:
            _wait_status(redis_client, keys.ticket(ticket_id), {"done"}, timeout=240)
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(timeout=60)
            second.stdout.close()
        result = _get(api.url, ticket_id)
    assert result["status"] == "done"
    finished = [e[1][b"id"].decode() for e in redis_client.xrange(keys.results)]
    assert finished == [ticket_id]  # stored exactly once
    assert int(redis_client.hget(keys.ticket(ticket_id), "attempts")) == 2
    assert redis_client.xlen(keys.stream) == 0


def test_sigterm_finishes_the_ticket_in_hand_then_exits_zero(prefix, redis_client):
    settings = make_settings(prefix)
    keys = Keys(prefix)
    with ApiServer(settings) as api:
        ticket_id = _post(api.url, LONG_BODY)
        waiting = _post(api.url, "A second ticket that should stay queued.")
        worker = _worker_process(prefix, TRIAGE_L2_TIMEOUT_S="600")
        try:
            _wait_status(redis_client, keys.ticket(ticket_id), {"processing"}, timeout=120)
            worker.send_signal(signal.SIGTERM)
            code = worker.wait(timeout=180)
        finally:
            worker.kill()
        output = worker.stdout.read().decode()
        worker.stdout.close()
        assert code == 0, output[-2000:]
        assert _get(api.url, ticket_id)["status"] == "done"
        assert _get(api.url, waiting)["status"] == "queued"  # stopped reading after the drain
    lines = [msgspec.json.decode(line) for line in output.splitlines() if line.startswith("{")]
    events = [line["event"] for line in lines]
    assert "worker_draining" in events and "worker_stopped" in events
    triaged = [line for line in lines if line["event"] == "ticket_triaged"]
    assert triaged and triaged[0]["ticket_id"] == ticket_id
    assert LONG_BODY[:40] not in output  # ticket text is not logged at the default level
