"""Deliver results to the helpdesk's callback_url, signed, retried, off the triage loop.

The worker only appends the ticket id to the callbacks stream when it stores a result; this
sender (a thread beside the worker) POSTs the result JSON with `X-Triage-Signature:
sha256=<HMAC-SHA256(secret, body)>`, retries with exponential backoff, and after the last attempt
moves the id to the callbacks dead-letter stream. A slow helpdesk therefore never stalls triage.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import httpx
import msgspec
import redis
import structlog

from . import metrics
from .keys import Keys
from .results import TicketIn
from .settings import Settings
from .store import claimed_entries, ensure_group

log = structlog.get_logger()
GROUP = "callbacks"
_request_decoder = msgspec.json.Decoder(TicketIn)


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def host_allowed(url: str, allowed: tuple[str, ...]) -> bool:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    host = parts.hostname.lower()
    names = {host} if parts.port is None else {host, f"{host}:{parts.port}"}
    return bool(names & {h.lower() for h in allowed})


class CallbackSender:
    def __init__(self, settings: Settings, client: redis.Redis, consumer: str,
                 parallel: int = 4) -> None:
        self.settings = settings
        self.client = client
        self.keys = Keys(settings.redis_prefix)
        self.consumer = consumer
        self.stop = threading.Event()
        self.pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="callback")
        self.http = httpx.Client(timeout=settings.callback_timeout_s, follow_redirects=False)
        self.parallel = parallel

    def run(self) -> None:
        ensure_group(self.client, self.keys.callbacks, GROUP)
        while not self.stop.is_set():
            try:
                claimed = claimed_entries(self.client.xautoclaim(
                    self.keys.callbacks, GROUP, self.consumer,
                    min_idle_time=max(self.settings.claim_idle_ms, 60_000), count=self.parallel))
                fresh = self.client.xreadgroup(GROUP, self.consumer, {self.keys.callbacks: ">"},
                                               count=self.parallel, block=1000) or []
            except redis.RedisError as error:
                log.warning("callback_redis_unavailable", error=type(error).__name__)
                self.stop.wait(1.0)
                continue
            entries = [e for e in claimed if e and e[1]]
            for _stream, items in fresh:
                entries.extend(items)
            futures = [self.pool.submit(self._deliver_entry, entry_id, fields)
                       for entry_id, fields in entries]
            for future in futures:
                future.result()

    def close(self) -> None:
        self.stop.set()
        self.pool.shutdown(wait=True)
        self.http.close()

    def _deliver_entry(self, entry_id: bytes, fields: dict[bytes, bytes]) -> None:
        ticket_id = fields[b"id"].decode()
        try:
            outcome = self.deliver(ticket_id)
        except Exception as error:  # a bug here must not kill the sender thread
            log.exception("callback_error", ticket_id=ticket_id, error=type(error).__name__)
            outcome = "error"
        if outcome == "interrupted":
            return
        pipe = self.client.pipeline(transaction=True)
        if outcome != "delivered":
            pipe.xadd(self.keys.callbacks_dead, {"id": ticket_id, "outcome": outcome,
                                                 "at": repr(time.time())})
        pipe.xack(self.keys.callbacks, GROUP, entry_id)
        pipe.xdel(self.keys.callbacks, entry_id)
        pipe.execute()
        metrics.callbacks_total.labels(outcome=outcome).inc()

    def deliver(self, ticket_id: str) -> str:
        """POST the stored result: delivered | refused | gone | failed | interrupted."""
        stored = self.client.hmget(self.keys.ticket(ticket_id), ["request", "result"])
        if not stored[0] or not stored[1]:
            return "gone"
        url = _request_decoder.decode(stored[0]).callback_url
        if not url or not host_allowed(url, self.settings.callback_hosts):
            log.warning("callback_refused", ticket_id=ticket_id)
            return "refused"
        body = stored[1]
        headers = {"Content-Type": "application/json", "X-Triage-Ticket": ticket_id,
                   "X-Triage-Signature": sign(self.settings.callback_secret, body)}
        delay = self.settings.callback_backoff_s
        for attempt in range(1, self.settings.callback_attempts + 1):
            try:
                response = self.http.post(url, content=body, headers=headers)
                if response.status_code < 300:
                    log.info("callback_delivered", ticket_id=ticket_id, attempt=attempt)
                    return "delivered"
                if 400 <= response.status_code < 500 and response.status_code not in (408, 429):
                    log.warning("callback_rejected", ticket_id=ticket_id,
                                status=response.status_code)
                    return "failed"
                reason = f"status {response.status_code}"
            except httpx.HTTPError as error:
                reason = type(error).__name__
            log.info("callback_retry", ticket_id=ticket_id, attempt=attempt, reason=reason)
            if attempt < self.settings.callback_attempts and self.stop.wait(delay):
                return "interrupted"  # shutting down: left pending, another sender retries
            delay *= 2
        return "failed"
