"""Locust scenario: helpdesk clients post corpus tickets at a fixed rate; operators poll queues and decide.

Run by loadtest/run.py (headless); it can also be run by hand against a local stack:

    TRIAGE_LT_INGEST=... TRIAGE_LT_OPERATOR=... TRIAGE_LT_RATE=50 \
        locust -f loadtest/locustfile.py --headless -u 12 -r 12 -t 60s --host http://127.0.0.1:8000

Environment: TRIAGE_LT_INGEST / TRIAGE_LT_OPERATOR (bearer tokens), TRIAGE_LT_RATE (ticket POSTs
per second over all helpdesk users), TRIAGE_LT_HELPDESK_USERS (default 10), TRIAGE_LT_CORPUS
(JSON Lines with subject/body/language; default TRIAGE_CORPUS, else ../shared beside the
checkout), TRIAGE_LT_OUT (where each POST's outcome is written at the end: JSON with the
accepted ids and every latency, so the runner computes exact percentiles and checks that no
accepted ticket is lost).
Only loopback hosts are accepted: this is a load generator.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

from locust import HttpUser, constant_throughput, events, task

# run.py always names the corpus; by hand, the settings' default beside the checkout applies.
CORPUS_PATH = (
    os.environ.get("TRIAGE_LT_CORPUS")
    or os.environ.get("TRIAGE_CORPUS")
    or str(Path(__file__).resolve().parents[2] / "shared" / "data" / "corpus" / "public-tickets.jsonl")
)
RATE = float(os.environ.get("TRIAGE_LT_RATE", "50"))
HELPDESK_USERS = int(os.environ.get("TRIAGE_LT_HELPDESK_USERS", "10"))
OPERATOR_RATE = float(os.environ.get("TRIAGE_LT_OPERATOR_RATE", "0.5"))
INGEST = os.environ.get("TRIAGE_LT_INGEST", "")
OPERATOR = os.environ.get("TRIAGE_LT_OPERATOR", "")
OUT = os.environ.get("TRIAGE_LT_OUT", "")

_lock = threading.Lock()
_posts: list[tuple[float, float, int, str | None]] = []  # (sent at, ms, status, id)
_decisions: list[tuple[int, str]] = []


def _corpus() -> list[dict[str, str]]:
    rows = []
    with open(CORPUS_PATH) as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                rows.append(
                    {"subject": row.get("subject") or "", "body": row["body"], "language": row.get("language") or "en"}
                )
    return rows


_tickets = itertools.cycle(_corpus())


@events.test_start.add_listener
def _only_loopback(environment, **_):
    host = urlsplit(environment.host or "").hostname or ""
    if not (host == "localhost" or host.startswith("127.") or host == "::1"):
        raise SystemExit(f"refusing to load {host!r}: loopback addresses only")


@events.test_stop.add_listener
def _write_outcomes(environment, **_):
    if not OUT:
        return
    with _lock:
        data = {"posts": _posts, "decisions": _decisions}
    with open(OUT, "w") as handle:
        json.dump(data, handle)


class Helpdesk(HttpUser):
    """One helpdesk integration: POSTs tickets, each with its own Idempotency-Key."""

    weight = HELPDESK_USERS
    wait_time = constant_throughput(RATE / max(1, HELPDESK_USERS))

    @task
    def post_ticket(self) -> None:
        ticket = next(_tickets)
        sent = time.time()
        with self.client.post(
            "/v1/tickets",
            json=ticket,
            name="POST /v1/tickets",
            headers={"Authorization": f"Bearer {INGEST}", "Idempotency-Key": uuid.uuid4().hex},
            catch_response=True,
        ) as response:
            ms = response.request_meta["response_time"]
            ticket_id = None
            if response.status_code == 202:
                try:
                    ticket_id = response.json()["id"]
                except (ValueError, KeyError):
                    response.failure("202 without an id")
            elif response.status_code == 429 and response.headers.get("Retry-After"):
                response.success()  # back-pressure as designed; counted by the runner
            else:
                response.failure(f"status {response.status_code}")
            with _lock:
                _posts.append((sent, ms, response.status_code, ticket_id))


class Operator(HttpUser):
    """An operator: reads the red and yellow queues and decides the oldest ticket."""

    weight = 1
    fixed_count = int(os.environ.get("TRIAGE_LT_OPERATORS", "2"))
    wait_time = constant_throughput(OPERATOR_RATE)

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {OPERATOR}"}

    @task
    def review(self) -> None:
        queue = random.choice(("red", "yellow"))
        response = self.client.get(
            f"/v1/queues/{queue}?limit=20", name="GET /v1/queues/{queue}", headers=self._headers()
        )
        if response.status_code != 200:
            return
        items = response.json().get("items") or []
        if not items:
            return
        item = items[0]
        level = item.get("level") or queue
        decision = {"operator": "loadtest", "action": "approve", "correct_level": level}
        done = self.client.post(
            f"/v1/tickets/{item['id']}/decision",
            json=decision,
            name="POST /v1/tickets/{id}/decision",
            headers=self._headers(),
        )
        with _lock:
            _decisions.append((done.status_code, item["id"]))
