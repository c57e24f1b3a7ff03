"""Fault drills that need no model (`make drills`): each on a private redis-server of its own.

- Redis killed and restarted while callbacks are pending: every callback is delivered exactly
  once or dead-lettered with a reason; the sender keeps running.
- Two API processes on one Redis: the ingest rate limit holds across both.
- The header fuzz of the hostile corpus through a live API process: no 5xx, /healthz 200.

Run only with TRIAGE_DRILLS=1. Each prints one `drill:` line with what it measured.
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import msgspec
import pytest
import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "loadtest"))
import harness  # noqa: E402
import hostile  # noqa: E402

from service.callbacks import CallbackSender  # noqa: E402
from service.pipeline import combine, unavailable  # noqa: E402
from service.results import L1Result, ModelInfo, TicketIn, Timings  # noqa: E402
from service.settings import load_settings  # noqa: E402
from service.store import (  # noqa: E402
    WORKER_GROUP,  # noqa: E402
    Delivery,
    WorkerStore,
)
from service.webhooks import new_secret  # noqa: E402

pytestmark = pytest.mark.skipif(
    os.environ.get("TRIAGE_DRILLS") != "1", reason="fault drills run with `make drills` (TRIAGE_DRILLS=1)"
)


class Helpdesk:
    """Counts deliveries per webhook-id; answers slowly so that callbacks are in flight."""

    def __init__(self, delay_s: float) -> None:
        self.seen: collections.Counter[str] = collections.Counter()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers["Content-Length"]))
                time.sleep(delay_s)
                outer.seen[self.headers["webhook-id"]] += 1
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.port = self.server.server_address[1]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()  # the listening socket: left open, it warns whenever it is collected


def _store_results(stack: harness.Stack, store: WorkerStore, hooks: list[str]) -> list[str]:
    """Tickets accepted and triaged as the real store does it, each scheduling its callback."""
    l1 = L1Result(level="none", rules=[])
    model = ModelInfo(name="stand-in", sha256="0" * 64)
    ids = []
    for n, hook in enumerate(hooks):
        ticket_id = f"t_drill{n:04d}"
        stack.client.hset(
            stack.keys.ticket(ticket_id),
            mapping={
                "id": ticket_id,
                "status": "queued",
                "accepted_at": repr(time.time()),
                "request": msgspec.json.encode(TicketIn(body="x", callback_url=hook)),
                "l1": msgspec.json.encode(l1),
                "callback": "1",
            },
        )
        stack.client.xadd(stack.keys.stream, {"id": ticket_id})
        entry_id, _ = stack.client.xreadgroup(WORKER_GROUP, "drill", {stack.keys.stream: ">"}, count=1)[0][1][0]
        result = combine(ticket_id, l1, unavailable("drill"), model, "p", Timings(), time.time())
        store.store_result(
            Delivery(entry_id=entry_id.decode(), ticket_id=ticket_id, deliveries=1, claimed=False),
            result,
            b"",
            True,
            time.time(),
        )
        ids.append(ticket_id)
    return ids


@pytest.mark.timeout(600)
def test_callbacks_pending_across_a_redis_restart(tmp_path):
    helpdesk = Helpdesk(delay_s=0.1)
    dead_port = harness.free_port()  # nothing listens: these must be dead-lettered
    with harness.Stack(tmp_path) as stack:
        stack.start_redis(fsync="always")  # an acknowledged write survives the SIGKILL
        settings = load_settings(
            stack.env(
                TRIAGE_CALLBACK_HOSTS=f"127.0.0.1:{helpdesk.port},127.0.0.1:{dead_port}",
                TRIAGE_CALLBACK_SECRET=new_secret(),
                TRIAGE_CALLBACK_ATTEMPTS="3",
                TRIAGE_CALLBACK_BACKOFF_S="0.5",
                TRIAGE_CALLBACK_TIMEOUT_S="1",
            )
        )
        client = redis.Redis.from_url(stack.redis_url, socket_timeout=5, socket_connect_timeout=2)
        store = WorkerStore(client, stack.keys, 3600)
        store.ensure_group()
        hooks = [f"http://127.0.0.1:{dead_port if n % 10 == 0 else helpdesk.port}/hook" for n in range(60)]
        ids = _store_results(stack, store, hooks)
        expected_dead = {i for i, h in zip(ids, hooks, strict=True) if str(dead_port) in h}
        sender = CallbackSender(settings, client, "drill-sender")
        thread = threading.Thread(target=sender.run, daemon=True)
        thread.start()
        time.sleep(1.5)  # some delivered, some in flight, most pending
        delivered_before = sum(helpdesk.seen.values())
        stack.kill_redis()
        time.sleep(3)
        stack.start_redis(fsync="always")
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                dead = {f[b"id"].decode(): f for _, f in stack.client.xrange(stack.keys.callbacks_dead, "-", "+")}
                if len(helpdesk.seen) + len(dead) >= len(ids) and stack.client.xlen(stack.keys.callbacks) == 0:
                    break
            except redis.RedisError:
                pass
            time.sleep(0.5)
        alive = thread.is_alive()
        sender.close()
        thread.join(timeout=10)
        helpdesk.close()
        client.close()
        duplicates = {k: v for k, v in helpdesk.seen.items() if v > 1}
        lost = set(ids) - set(helpdesk.seen) - set(dead)
        print(
            f"\ndrill: callbacks across a Redis restart: {len(ids)} scheduled, "
            f"{delivered_before} delivered before the kill, {len(helpdesk.seen)} delivered "
            f"in all, {len(dead)} dead-lettered, {len(duplicates)} delivered twice, "
            f"{len(lost)} lost"
        )
        assert alive
        assert lost == set() and duplicates == {}
        assert set(dead) == expected_dead
        assert set(helpdesk.seen) == set(ids) - expected_dead
        assert all(f[b"reason"] for f in dead.values())
        assert stack.client.xlen(stack.keys.callbacks) == 0


@pytest.mark.timeout(600)
def test_two_api_processes_share_one_ingest_limit(tmp_path):
    rate, burst = 2.0, 20
    with harness.Stack(tmp_path, env={"TRIAGE_INGEST_RATE": str(rate), "TRIAGE_INGEST_BURST": str(burst)}) as stack:
        stack.start_redis()
        stack.start_api(timeout=300)
        second = stack.start_extra_api(timeout=300)
        urls = [stack.base_url, second.url]  # type: ignore[attr-defined]
        started = time.monotonic()

        def post(n: int) -> int:
            try:
                return httpx.post(
                    f"{urls[n % 2]}/v1/tickets", json={"body": f"limit {n}"}, headers=stack.headers(), timeout=10
                ).status_code
            except httpx.HTTPError:
                return 0

        with ThreadPoolExecutor(max_workers=8) as pool:
            codes = list(pool.map(post, range(120)))
        elapsed = time.monotonic() - started
        accepted = codes.count(202)
        allowed = burst + rate * elapsed + 1
        print(
            f"\ndrill: two API processes, rate {rate}/s burst {burst}: {len(codes)} POSTs in "
            f"{elapsed:.1f} s, {accepted} accepted (bound {allowed:.0f}; one process each "
            f"would allow {2 * burst + 2 * rate * elapsed:.0f}), {codes.count(429)} x 429, "
            f"{sum(c >= 500 or c == 0 for c in codes)} x 5xx or no answer"
        )
        assert set(codes) <= {202, 429}
        assert burst <= accepted <= allowed


@pytest.mark.timeout(600)
def test_header_fuzz_through_the_live_api(tmp_path):
    cases = hostile.headers()
    with harness.Stack(tmp_path) as stack:
        stack.start_redis()
        stack.start_api(timeout=300)  # a loaded machine imports slowly
        statuses: collections.Counter[int] = collections.Counter()
        unhealthy = 0
        with stack.http(timeout=30) as http:
            for case in cases:
                headers: dict[str, str | bytes] = dict(case.headers)
                if case.content_type:
                    headers["Content-Type"] = case.content_type
                if case.auth == "ingest":
                    headers.update(stack.headers())
                statuses[http.post(case.path, content=case.body, headers=headers).status_code] += 1
                unhealthy += http.get("/healthz").status_code != 200
        assert stack.api is not None and stack.api.alive()
    print(
        f"\ndrill: header fuzz through the live API: {len(cases)} requests, by status "
        f"{dict(sorted(statuses.items()))}, /healthz not 200 after {unhealthy}"
    )
    assert not [s for s in statuses if s >= 500] and unhealthy == 0
