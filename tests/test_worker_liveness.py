"""A worker's liveness proves its main loop goes round, not only that its heartbeat thread lives.

The worker runs on the real Redis with a stand-in classifier that can be made to hang; the
probe (deploy/healthcheck.py) reads the worker's real Prometheus exposition.
"""

from __future__ import annotations

import importlib.util
import threading
import time

import httpx
import redis
from prometheus_client import generate_latest

from service import metrics
from service.pipeline import unavailable
from service.results import ModelInfo
from service.worker import Worker
from tests.deploy import support as h
from tests.support import INGEST, REDIS_URL, ApiServer, make_settings

spec = importlib.util.spec_from_file_location("healthcheck", h.DEPLOY / "healthcheck.py")
hc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hc)


class HangingClassifier:
    """Answers 'unavailable' at once, or hangs until released while `hang` is set."""

    model_info = ModelInfo(name="stand-in", sha256="0" * 64)
    prompt_sha = "stand-in"

    def __init__(self) -> None:
        self.hang = threading.Event()
        self.release = threading.Event()
        self.entered = threading.Event()

    def classify(self, text: str, timeout_s: float | None = None):
        self.entered.set()
        if self.hang.is_set():
            self.release.wait(60)

        class Out:
            result = unavailable("stand-in")
            features: dict = {}

        return Out()


def _probe(max_age: float) -> tuple[bool, str]:
    return hc.check_worker(generate_latest(metrics.REGISTRY).decode(), time.time(), max_age)


def test_idle_loop_is_live_and_a_hung_ticket_is_not(prefix):
    settings = make_settings(prefix, block_ms=50, heartbeat_ttl_s=3)
    classifier = HangingClassifier()
    worker = Worker(settings, redis.Redis.from_url(REDIS_URL), classifier, consumer="live")
    thread = threading.Thread(target=worker.run, daemon=True)
    with ApiServer(settings) as api:
        thread.start()
        try:
            time.sleep(2.5)
            healthy, reason = _probe(max_age=2.0)
            assert healthy, reason  # idle, waiting on the stream: alive
            classifier.hang.set()
            response = httpx.post(
                f"{api.url}/v1/tickets", json={"body": "hang here"}, headers={"Authorization": f"Bearer {INGEST}"}
            )
            assert response.status_code == 202
            assert classifier.entered.wait(10)
            time.sleep(3.0)
            healthy, reason = _probe(max_age=2.0)
            assert not healthy and "main loop is stuck" in reason, reason
            # ... while the heartbeat thread alone would have said it is fine.
            beat = hc.heartbeat_timestamp(generate_latest(metrics.REGISTRY).decode())
            assert beat is not None and time.time() - beat < 2.0
        finally:
            classifier.release.set()
            worker.stop.set()
            thread.join(timeout=10)
