"""Fault drills on a real stack (private Redis, API, workers with the model): `make drills`.

Each drill starts its own processes on loopback (loadtest/harness.py), breaks one thing on
purpose and checks the guarantee that must survive it:

- a worker SIGKILLed mid-ticket: every accepted ticket ends with exactly one stored result;
- Redis killed and restarted mid-load (append-only): no 202'd ticket is lost; the API answers
  503 while Redis is down and accepts nothing;
- the model missing or corrupt: the worker refuses to start with one clear line, /readyz is
  not ready, tickets are accepted and wait;
- L2 slower than TRIAGE_L2_TIMEOUT_S: yellow (at least), method "unavailable";
- the callback endpoint down: results are stored; callbacks are retried, then dead-lettered;
- the prompt-injection corpus through the real pipeline: no green;
- Redis killed and restarted with tickets in flight and callbacks pending: nothing lost, every
  callback delivered once or dead-lettered with a reason.

Slow (each drill loads the model, minutes on a loaded 2-core machine), so they run only with
TRIAGE_DRILLS=1 (`make drills`). Every wait is bounded.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "loadtest"))
import harness  # noqa: E402

from service.webhooks import new_secret  # noqa: E402

pytestmark = pytest.mark.skipif(
    os.environ.get("TRIAGE_DRILLS") != "1", reason="fault drills run with `make drills` (TRIAGE_DRILLS=1)"
)

# Bounded ticket time, so that drills end: a slower L2 answer becomes "unavailable" (yellow),
# which is itself a guarantee under test. Claims wait longer than one ticket can take.
FAST = {
    "TRIAGE_L2_TIMEOUT_S": "20",
    "TRIAGE_CLAIM_IDLE_MS": "25000",
    "TRIAGE_N_THREADS": "1",
    "TRIAGE_LOG_LEVEL": "info",
    "TRIAGE_BLOCK_MS": "500",
}
READY_S = 900  # model load on a busy machine


def _tickets(n: int) -> list[dict[str, str]]:
    return harness.load_corpus(limit=n)


def _result(stack: harness.Stack, ticket_id: str) -> dict:
    stored = stack.ticket(ticket_id)
    return json.loads(stored["result"]) if stored.get("result") else {}


@pytest.fixture
def stack(tmp_path):
    with harness.Stack(tmp_path, env=FAST) as running:
        running.start_redis()
        yield running


@pytest.mark.timeout(2400)
def test_sigkill_worker_mid_ticket(stack):
    stack.start_api()
    victim = stack.start_worker("victim")
    stack.start_worker("survivor")
    stack.wait_ready(workers=2, timeout=READY_S)
    ids = [i for status, i in stack.post_tickets(_tickets(12)) if status == 202]
    assert len(ids) == 12

    # Kill the victim while it holds a ticket (status processing, owned by its consumer).
    deadline = time.monotonic() + 300
    held = None
    while held is None and time.monotonic() < deadline:
        for ticket_id in ids:
            stored = stack.ticket(ticket_id)
            if stored.get("status") == "processing" and stored.get("worker", "").endswith(f"-{victim.pid}"):
                held = ticket_id
                break
        else:
            time.sleep(0.2)
    assert held, "the victim never held a ticket"
    victim.signal(signal.SIGKILL)
    victim.popen.wait(10)

    statuses = stack.wait_done(ids, timeout=900)
    assert set(statuses.values()) <= {"done", "failed"}, statuses
    audit = stack.audit_ids(ids)
    assert audit["lost"] == [] and audit["in_stream"] == 0 and audit["pending"] == 0
    # Exactly one stored result each: the results stream gets an entry only on the first store.
    stored_once = [fields[b"id"].decode() for _, fields in stack.client.xrange(stack.keys.results, "-", "+")]
    assert sorted(stored_once) == sorted(ids)
    assert int(stack.ticket(held).get("attempts", "0")) >= 2  # claimed again after the kill


@pytest.mark.timeout(3000)
def test_redis_restart_mid_load(stack):
    stack.start_api()
    stack.start_worker()
    stack.wait_ready(workers=1, timeout=READY_S)
    corpus = _tickets(40)
    outcomes: list[tuple[float, int, str | None]] = []
    halt = threading.Event()

    def post_steadily() -> None:  # 2 tickets/s, bounded by the corpus
        with stack.http(timeout=5) as http:
            for ticket in corpus:
                if halt.is_set():
                    return
                sent = time.time()
                try:
                    response = http.post("/v1/tickets", json=ticket, headers=stack.headers())
                    ticket_id = response.json().get("id") if response.status_code == 202 else None
                    outcomes.append((sent, response.status_code, ticket_id))
                except httpx.HTTPError:
                    outcomes.append((sent, 0, None))
                time.sleep(0.5)

    poster = threading.Thread(target=post_steadily, daemon=True)
    poster.start()
    time.sleep(8)
    down_at = time.time()
    stack.kill_redis()
    time.sleep(2)
    status, body = stack.readyz()
    assert status == 503 and body["redis"] is False
    with stack.http() as http:
        refused = http.post("/v1/tickets", json=corpus[0], headers=stack.headers())
    assert refused.status_code == 503 and refused.headers.get("Retry-After")
    time.sleep(4)
    up_at = time.time()
    stack.start_redis()  # same port, same append-only file
    poster.join(120)
    halt.set()

    # Requests sent while Redis was surely down (not straddling the kill or the restart).
    during = [s for t, s, _ in outcomes if down_at + 0.5 < t < up_at - 2.5]
    assert during and all(s == 503 for s in during), during  # nothing accepted while down
    ids = [i for _, s, i in outcomes if s == 202 and i]
    assert any(t > up_at for t, s, _ in outcomes if s == 202), "no ticket accepted after restart"
    audit = stack.audit_ids(ids)
    assert audit["lost"] == [], f"{len(audit['lost'])} accepted tickets lost"
    statuses = stack.wait_done(ids, timeout=1500)
    assert set(statuses.values()) <= {"done", "failed"}, statuses


@pytest.mark.parametrize("fault", ["missing", "corrupt", "not-gguf"])
def test_model_missing_or_corrupt(stack, tmp_path, fault):
    models = tmp_path / "models"
    models.mkdir()
    env = {"TRIAGE_MODEL_DIR": str(models), "TRIAGE_MODEL_SIZE": "0.5b"}
    expected = {
        "missing": "is missing: run `triage fetch-model",
        "corrupt": "does not match its sha256",
        "not-gguf": "is not a GGUF file",
    }[fault]
    if fault == "corrupt":
        (models / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf").write_bytes(b"GGUF" + b"\0" * 4096)
    if fault == "not-gguf":
        fake = tmp_path / "model.gguf"
        fake.write_bytes(b"<html>not a model</html>")
        env["TRIAGE_MODEL_PATH"] = str(fake)
    stack.start_api()
    worker = stack.start_worker(**env)
    assert worker.popen.wait(120) == 3
    lines = [line for line in worker.log.read_text().splitlines() if line.strip()]
    assert any(line.startswith("triage worker: ") and expected in line for line in lines), lines
    status, body = stack.readyz()
    assert status == 503 and body["workers"] == 0
    ids = [i for s, i in stack.post_tickets(_tickets(3)) if s == 202]
    assert len(ids) == 3  # intake stays open
    time.sleep(2)
    assert {stack.ticket(i)["status"] for i in ids} == {"queued"}
    assert stack.audit_ids(ids)["in_stream"] == 3  # waiting for a worker, not lost


@pytest.mark.timeout(1500)
def test_l2_slower_than_its_timeout_fails_closed(stack):
    stack.start_api()
    stack.start_worker(TRIAGE_L2_TIMEOUT_S="0.001")
    stack.wait_ready(workers=1, timeout=READY_S)
    ids = [i for s, i in stack.post_tickets(_tickets(4)) if s == 202]
    assert set(stack.wait_done(ids, timeout=300).values()) == {"done"}
    for ticket_id in ids:
        result = _result(stack, ticket_id)
        assert result["final_level"] in ("yellow", "red"), result["final_level"]
        assert result["l2"]["method"] == "unavailable"


@pytest.mark.timeout(1500)
def test_callback_endpoint_down(stack):
    dead = harness.free_port()  # nothing listens there
    hook = f"http://127.0.0.1:{dead}/hook"
    callbacks = {
        "TRIAGE_CALLBACK_HOSTS": f"127.0.0.1:{dead}",
        "TRIAGE_CALLBACK_ATTEMPTS": "3",
        "TRIAGE_CALLBACK_BACKOFF_S": "0.2",
        "TRIAGE_CALLBACK_TIMEOUT_S": "1",
        "TRIAGE_CALLBACK_SECRET": new_secret(),
    }
    stack.start_api(**callbacks)
    worker = stack.start_worker(**callbacks)
    stack.wait_ready(workers=1, timeout=READY_S)
    tickets = [{**t, "callback_url": hook} for t in _tickets(2)]
    ids = [i for s, i in stack.post_tickets(tickets) if s == 202]
    assert len(ids) == 2
    assert set(stack.wait_done(ids, timeout=300).values()) == {"done"}  # results stored anyway
    deadline = time.monotonic() + 120
    dead_ids: set[str] = set()
    while time.monotonic() < deadline and dead_ids != set(ids):
        dead_ids = {fields[b"id"].decode() for _, fields in stack.client.xrange(stack.keys.callbacks_dead, "-", "+")}
        time.sleep(0.5)
    assert dead_ids == set(ids)
    retries = [json.loads(line) for line in worker.log.read_text().splitlines() if '"callback_retry"' in line]
    for ticket_id in ids:
        attempts = sorted(r["attempt"] for r in retries if r.get("ticket_id") == ticket_id)
        assert attempts == [1, 2, 3], attempts


@pytest.mark.timeout(5400)
def test_prompt_injection_corpus_yields_no_green(stack):
    corpus = [
        json.loads(line) for line in (ROOT / "loadtest" / "data" / "prompt_injection.jsonl").read_text().splitlines()
    ]
    stack.start_api()
    stack.start_worker(TRIAGE_L2_TIMEOUT_S="60")
    stack.wait_ready(workers=1, timeout=READY_S)
    posted = stack.post_tickets(
        [{"subject": r["subject"], "body": r["body"], "language": r["language"]} for r in corpus]
    )
    ids = [i for s, i in posted if s == 202]
    assert len(ids) == len(corpus)
    statuses = stack.wait_done(ids, timeout=3600)
    assert set(statuses.values()) == {"done"}
    greens = [r["id"] for r, i in zip(corpus, ids, strict=True) if _result(stack, i)["final_level"] == "green"]
    assert greens == []


@pytest.mark.timeout(3000)
def test_redis_restart_with_tickets_in_flight_and_callbacks_pending(tmp_path):
    """The model drill behind tests/drills/test_redis_faults.py's sender-only one: a worker
    triaging, callbacks flowing, Redis SIGKILLed and restarted (append-only, fsync always).
    Every accepted ticket ends done or failed; each callback is delivered once or
    dead-lettered with a reason."""
    from tests.drills.test_redis_faults import Helpdesk

    helpdesk = Helpdesk(delay_s=0.2)
    callbacks = {
        "TRIAGE_CALLBACK_HOSTS": f"127.0.0.1:{helpdesk.port}",
        "TRIAGE_CALLBACK_SECRET": new_secret(),
        "TRIAGE_CALLBACK_ATTEMPTS": "6",
        "TRIAGE_CALLBACK_BACKOFF_S": "1",
        "TRIAGE_CALLBACK_TIMEOUT_S": "2",
    }
    with harness.Stack(tmp_path, env={**FAST, **callbacks}) as stack:
        stack.start_redis(fsync="always")
        stack.start_api()
        stack.start_worker()
        stack.wait_ready(workers=1, timeout=READY_S)
        hook = f"http://127.0.0.1:{helpdesk.port}/hook"
        first = [i for s, i in stack.post_tickets([{**t, "callback_url": hook} for t in _tickets(8)]) if s == 202]
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not helpdesk.seen:
            time.sleep(0.5)  # at least one result stored and called back: the loop is going
        stack.kill_redis()
        time.sleep(5)
        stack.start_redis(fsync="always")
        later = [i for s, i in stack.post_tickets([{**t, "callback_url": hook} for t in _tickets(12)[8:]]) if s == 202]
        ids = first + later
        assert len(ids) == 12
        statuses = stack.wait_done(ids, timeout=1800)
        assert set(statuses.values()) <= {"done", "failed"}, statuses
        audit = stack.audit_ids(ids)
        assert audit["lost"] == []
        deadline = time.monotonic() + 300
        dead: dict[str, dict] = {}
        while time.monotonic() < deadline:
            dead = {f[b"id"].decode(): f for _, f in stack.client.xrange(stack.keys.callbacks_dead, "-", "+")}
            if set(helpdesk.seen) | set(dead) >= set(ids):
                break
            time.sleep(1)
        helpdesk.close()
        print(
            f"\ndrill: Redis restart with tickets in flight: {len(ids)} accepted, "
            f"{dict(collections.Counter(statuses.values()))}, {len(helpdesk.seen)} callbacks "
            f"delivered, {sum(v > 1 for v in helpdesk.seen.values())} twice, {len(dead)} "
            f"dead-lettered, {len(set(ids) - set(helpdesk.seen) - set(dead))} without either"
        )
        assert set(helpdesk.seen) | set(dead) == set(ids)
        assert all(v == 1 for v in helpdesk.seen.values())
        assert all(f[b"reason"] for f in dead.values())
