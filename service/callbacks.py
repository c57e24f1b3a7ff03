"""Deliver results to the helpdesk's callback_url, signed, retried, off the triage loop.

The worker only appends the ticket id to the callbacks stream when it stores a result (or
dead-letters the ticket); this sender (a thread beside the worker) POSTs the result JSON signed
the Standard Webhooks way (service/webhooks.py), retries with exponential backoff, and after the
last attempt moves the id to the callbacks dead-letter stream with the reason. A slow helpdesk
therefore never stalls triage. Redis trouble is not the helpdesk's fault: an entry whose result
cannot be read stays pending and is tried again, and the sender loop itself is supervised
(restarted with backoff, `triage_callback_sender_restarts_total`).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import httpx
import redis
import structlog

from . import metrics, webhooks
from .settings import Settings
from .store import CallbackEntry, CallbackStore, Keys

log = structlog.get_logger()
RESTART_MAX_DELAY_S = 30.0


def host_allowed(url: str, allowed: tuple[str, ...]) -> bool:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    host = parts.hostname.lower()
    names = {host} if parts.port is None else {host, f"{host}:{parts.port}"}
    return bool(names & {h.lower() for h in allowed})


class CallbackSender:
    def __init__(self, settings: Settings, client: redis.Redis, consumer: str, parallel: int = 4) -> None:
        self.settings = settings
        self.store = CallbackStore(client, Keys(settings.redis_prefix))
        self.consumer = consumer
        self.stop = threading.Event()
        self.pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="callback")
        self.http = httpx.Client(timeout=settings.callback_timeout_s, follow_redirects=False)
        self.parallel = parallel

    def run(self) -> None:
        """The sender loop, supervised: if it dies, log at error level, count, restart."""
        delay = 1.0
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                self._loop()
                return
            except Exception as error:
                metrics.callback_sender_restarts_total.inc()
                log.error(
                    "callback_sender_crashed",
                    error=type(error).__name__,
                    detail=str(error)[:200],
                    restart_in_s=delay,
                    exc_info=True,
                )
            if time.monotonic() - started > 10 * RESTART_MAX_DELAY_S:
                delay = 1.0  # it ran a good while: a fresh fault, not a crash loop
            if self.stop.wait(delay):
                return
            delay = min(delay * 2, RESTART_MAX_DELAY_S)

    def _loop(self) -> None:
        ensured = False
        while not self.stop.is_set():
            try:
                if not ensured:
                    self.store.ensure_group()
                    ensured = True
                entries = self.store.next_entries(
                    self.consumer,
                    min_idle_ms=max(self.settings.claim_idle_ms, 60_000),
                    count=self.parallel,
                    block_ms=1000,
                )
            except redis.RedisError as error:
                log.warning("callback_redis_unavailable", error=type(error).__name__)
                ensured = False  # a restarted Redis without persistence has lost the group
                self.stop.wait(1.0)
                continue
            futures = [self.pool.submit(self._deliver_entry, entry) for entry in entries]
            for future in futures:
                future.result()

    def close(self) -> None:
        self.stop.set()
        self.pool.shutdown(wait=True)
        self.http.close()

    def _deliver_entry(self, entry: CallbackEntry) -> None:
        ticket_id = entry.ticket_id
        try:
            outcome, reason = self.deliver(ticket_id)
        except redis.RedisError as error:
            # Not the helpdesk's fault: left pending, this sender tries it again.
            log.warning("callback_redis_unavailable", ticket_id=ticket_id, error=type(error).__name__)
            self.stop.wait(1.0)
            return
        except Exception as error:  # a bug here must not kill the sender thread
            log.exception("callback_error", ticket_id=ticket_id, error=type(error).__name__)
            outcome, reason = "error", type(error).__name__
        if outcome == "interrupted":
            return
        self._settle(entry, outcome, reason)

    def _settle(self, entry: CallbackEntry, outcome: str, reason: str) -> None:
        """Record the outcome. Retried while Redis is away, so that a delivered callback is not
        sent again because its acknowledgement failed (unless this process stops meanwhile:
        then it is sent again, with the same webhook-id)."""
        delay = 0.5
        while True:
            try:
                self.store.settle(entry, outcome, reason)
                break
            except redis.RedisError as error:
                log.warning(
                    "callback_settle_retry", ticket_id=entry.ticket_id, outcome=outcome, error=type(error).__name__
                )
                if self.stop.wait(delay):
                    return
                delay = min(delay * 2, 10.0)
        metrics.callbacks_total.labels(outcome=outcome).inc()

    def deliver(self, ticket_id: str) -> tuple[str, str]:
        """POST the stored result: (delivered | refused | gone | failed | interrupted, reason).
        Redis errors propagate: the caller leaves the entry pending."""
        payload = self.store.payload(ticket_id)
        if payload is None:
            return "gone", "the ticket or its result is no longer stored"
        url = payload.url
        if not url or not host_allowed(url, self.settings.callback_hosts):
            log.warning("callback_refused", ticket_id=ticket_id)
            return "refused", "callback_url's host is not in TRIAGE_CALLBACK_HOSTS"
        body = payload.body
        delay = self.settings.callback_backoff_s
        reason = ""
        for attempt in range(1, self.settings.callback_attempts + 1):
            headers = {
                "Content-Type": "application/json",
                "X-Triage-Ticket": ticket_id,
                **webhooks.headers(self.settings.callback_secret, ticket_id, int(time.time()), body),
            }
            try:
                response = self.http.post(url, content=body, headers=headers)
                if response.status_code < 300:
                    log.info("callback_delivered", ticket_id=ticket_id, attempt=attempt)
                    return "delivered", ""
                reason = f"status {response.status_code}"
                if 400 <= response.status_code < 500 and response.status_code not in (408, 429):
                    log.warning("callback_rejected", ticket_id=ticket_id, status=response.status_code)
                    return "failed", f"rejected: {reason}"
            except httpx.HTTPError as error:
                reason = type(error).__name__
            log.info("callback_retry", ticket_id=ticket_id, attempt=attempt, reason=reason)
            if attempt < self.settings.callback_attempts and self.stop.wait(delay):
                return "interrupted", ""  # shutting down: left pending, another sender retries
            delay *= 2
        return "failed", f"{self.settings.callback_attempts} attempts, last: {reason}"
