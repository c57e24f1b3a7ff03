"""The worker: consume the ticket stream, run L2 on the resident model, store the result once.

XACK happens in the same Lua step that stores the result, so a worker killed mid-ticket leaves
the entry pending; after TRIAGE_CLAIM_IDLE_MS another worker claims it (XAUTOCLAIM), and after
TRIAGE_MAX_DELIVERIES deliveries it goes to the dead-letter stream as failed/yellow.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any, Protocol

import msgspec
import numpy as np
import redis
import structlog

from . import metrics
from .pipeline import combine, unavailable
from .results import L1Result, L2Result, ModelInfo, Timings, ticket_text
from .settings import Settings
from .store import Delivery, Heartbeat, Keys, WorkerCalibration, WorkerStore

log = structlog.get_logger()


class Classification(Protocol):
    result: L2Result
    features: dict[str, np.ndarray]


class ClassifierLike(Protocol):
    """What the worker needs from L2 (service.l2.Classifier)."""

    model_info: ModelInfo
    prompt_sha: str

    def classify(self, text: str, timeout_s: float | None = None) -> Classification: ...


class Worker:
    def __init__(
        self,
        settings: Settings,
        client: redis.Redis,
        classifier: ClassifierLike,
        consumer: str | None = None,
        calibration_watcher: Any = None,
    ) -> None:
        self.settings = settings
        self.classifier = classifier
        self.consumer = consumer or f"{socket.gethostname()}-{os.getpid()}"
        self.store = WorkerStore(client, Keys(settings.redis_prefix), settings.result_ttl_s)
        self.calibration_watcher = calibration_watcher
        self.stop = threading.Event()
        self.processed = 0

    # --- heartbeat: /readyz and the console read it
    def heartbeat(self) -> Heartbeat:
        calibration = None
        if self.calibration_watcher is not None and hasattr(self.calibration_watcher, "status"):
            calibration = msgspec.convert(self.calibration_watcher.status(), WorkerCalibration)
        return Heartbeat(
            worker=self.consumer,
            pid=os.getpid(),
            at=time.time(),
            model=self.classifier.model_info.name,
            sha256=self.classifier.model_info.sha256,
            prompt_sha=self.classifier.prompt_sha,
            processed=self.processed,
            calibration=calibration,
        )

    def _beat(self) -> None:
        interval = max(1.0, self.settings.heartbeat_ttl_s / 3)
        while not self.stop.is_set():
            try:
                self.store.heartbeat(self.heartbeat(), self.settings.heartbeat_ttl_s)
                metrics.worker_heartbeat_timestamp.set(time.time())
            except redis.RedisError as error:
                log.warning("heartbeat_failed", error=type(error).__name__)
            self.stop.wait(interval)

    # --- the loop
    def run(self, burst: bool = False) -> int:
        """Process tickets until stopped; with `burst`, until the stream has nothing for us."""
        self.store.ensure_group()
        beat = threading.Thread(target=self._beat, name="heartbeat", daemon=True)
        beat.start()
        log.info("worker_started", worker=self.consumer, model=self.classifier.model_info.name, burst=burst)
        try:
            while not self.stop.is_set():
                # Liveness: a loop stuck in a ticket or a call stops this clock, while the
                # heartbeat thread would go on beating.
                metrics.worker_loop_timestamp.set(time.time())
                if self.calibration_watcher is not None:
                    self.calibration_watcher.poll()
                try:
                    delivery = self.store.next_delivery(
                        self.consumer, self.settings.claim_idle_ms, self.settings.block_ms
                    )
                except redis.RedisError as error:
                    log.warning("redis_unavailable", error=type(error).__name__)
                    self.stop.wait(1.0)
                    continue
                if delivery is None:
                    if burst:
                        break
                    continue
                try:
                    self.process(delivery)
                except redis.RedisError as error:
                    # Not acknowledged: the entry stays pending and is claimed again later.
                    log.warning("store_failed", ticket_id=delivery.ticket_id, error=type(error).__name__)
                    self.stop.wait(1.0)
        finally:
            self.stop.set()
            try:
                self.store.clear_heartbeat(self.consumer)
            except redis.RedisError:
                pass
            log.info("worker_stopped", worker=self.consumer, processed=self.processed)
        return self.processed

    def process(self, delivery: Delivery) -> None:
        structlog.contextvars.bind_contextvars(ticket_id=delivery.ticket_id)
        try:
            self._process(delivery)
        finally:
            structlog.contextvars.unbind_contextvars("ticket_id")

    def _process(self, delivery: Delivery) -> None:
        if delivery.claimed:
            metrics.redeliveries_total.inc()
        stored = self.store.ticket(delivery.ticket_id)
        if stored is None or stored.request is None:
            log.warning("ticket_missing_acknowledged")
            self.store.acknowledge(delivery)
            return
        if stored.finished:
            self.store.acknowledge(delivery)  # another delivery already finished it
            return
        assert stored.l1 is not None and stored.accepted_at is not None  # written with request
        accepted_at, l1, request = stored.accepted_at, stored.l1, stored.request
        if delivery.deliveries > self.settings.max_deliveries:
            self._dead_letter(delivery, l1, accepted_at, stored.callback)
            return
        started_wall = time.time()
        self.store.mark_processing(delivery.ticket_id, self.consumer, started_wall)
        text = ticket_text(request.subject, request.body)
        if self.settings.log_ticket_text:
            log.debug("ticket_text", text=text)
        started = time.perf_counter()
        try:
            classification = self.classifier.classify(text, timeout_s=self.settings.l2_timeout_s)
            l2, features = classification.result, classification.features
        except Exception as error:  # classify should not raise; if it does, fail closed
            log.exception("l2_crashed", error=type(error).__name__)
            l2, features = unavailable(f"classifier error: {type(error).__name__}"), {}
        l2_seconds = time.perf_counter() - started
        completed_at = time.time()
        timings = Timings(
            l1=stored.l1_ms,
            queue_wait=round((started_wall - accepted_at) * 1000, 3),
            l2=round(l2_seconds * 1000, 3),
            total=round((completed_at - accepted_at) * 1000, 3),
        )
        result = combine(
            delivery.ticket_id, l1, l2, self.classifier.model_info, self.classifier.prompt_sha, timings, completed_at
        )
        newly_stored = self.store.store_result(delivery, result, features, stored.callback, accepted_at)
        self.processed += 1
        if not newly_stored:
            log.info("result_already_stored")
            return
        metrics.l2_seconds.observe(l2_seconds)
        metrics.queue_wait_seconds.observe(max(0.0, started_wall - accepted_at))
        metrics.end_to_end_seconds.observe(max(0.0, completed_at - accepted_at))
        metrics.tickets_total.labels(final_level=result.final_level, method=l2.method).inc()
        if l2.method == "generated":
            metrics.fallback_total.inc()
        if l2.method == "unavailable":
            metrics.l2_unavailable_total.labels(reason=metrics.l2_unavailable_reason(l2.reason)).inc()
        risk = l2.answers.get("risk")
        if risk is not None and risk.coverage is not None:
            metrics.l2_coverage.observe(risk.coverage)
        log.info(
            "ticket_triaged",
            final_level=result.final_level,
            l1_level=l1.level,
            l2_level=l2.level,
            method=l2.method,
            calibrated=l2.calibrated,
            l2_ms=timings.l2,
            total_ms=timings.total,
            deliveries=delivery.deliveries,
        )

    def _dead_letter(self, delivery: Delivery, l1: L1Result, accepted_at: float, has_callback: bool) -> None:
        reason = f"delivered {delivery.deliveries} times without a stored result"
        now = time.time()
        result = combine(
            delivery.ticket_id,
            l1,
            unavailable(reason),
            self.classifier.model_info,
            self.classifier.prompt_sha,
            Timings(total=round((now - accepted_at) * 1000, 3)),
            now,
            status="failed",
        )
        if not self.store.dead_letter(delivery, result, reason, accepted_at, has_callback):
            log.info("result_already_stored")  # another delivery finished it meanwhile
            return
        metrics.dead_letter_total.inc()
        metrics.tickets_total.labels(final_level=result.final_level, method="unavailable").inc()
        log.error("ticket_dead_lettered", deliveries=delivery.deliveries)
