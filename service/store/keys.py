"""Every Redis key, stream and group the service uses, with its expiry: the data model in one screen.

All keys start with the configured prefix (TRIAGE_REDIS_PREFIX, default "triage") so that tests
and several deployments can share one Redis.

| key                         | type   | holds                                                    | expiry |
|-----------------------------|--------|----------------------------------------------------------|--------------------|
| {p}:tickets                 | stream | one entry per accepted ticket: field `id`                | trimmed by workers |
| group "workers" on it       |        | consumer group; pending entries are claimed when idle    | |
| {p}:ticket:{id}             | hash   | status, request (JSON), l1 (JSON), result (JSON), times  | result_ttl_s |
| {p}:features:{id}           | string | msgpack {question: float32 bytes}: L2 hidden states       | result_ttl_s |
| {p}:queue:{yellow|red|audit}| zset   | ticket ids waiting for an operator, score = accepted at  | none |
| {p}:decisions               | stream | operator decisions (field `data`: Decision JSON)          | none (the labels)|
| {p}:deadletter              | stream | tickets that failed max_deliveries times                 | none |
| {p}:idem:{key}              | string | "<ticket id> <payload sha256>"                            | idempotency_ttl_s|
| {p}:heartbeat:{worker}      | string | Heartbeat JSON: worker, model, sha256, at, calibration   | heartbeat_ttl_s |
| {p}:callbacks               | stream | callbacks to deliver (field `id`)                         | trimmed |
| {p}:callbacks:dead          | stream | callbacks that failed every attempt                       | none |
| {p}:results                 | stream | ids of finished tickets, newest last (audit sampling)     | trimmed ~100k |
| {p}:audit:state             | hash   | last audit's kappa, gating, false-green rate, run time,   | none |
|                             |        | decisions_cursor (last decisions entry the audit read)    | |
| {p}:audit:queued            | hash   | id -> QueuedEntry JSON: what the audit queued and why     | result_ttl_s |
| {p}:audit:green_checks      | hash   | id -> GreenCheck JSON: operators' checks of sampled greens| checks window |
| {p}:audit:verdicts:{key}    | string | cached judge verdict (JSON)                               | none |
| {p}:ratelimit:{kind}:{sha}  | hash   | token bucket per ingest token / login address (sha256)    | until full again |
"""

from __future__ import annotations

from typing import Literal, get_args

WORKER_GROUP = "workers"
Queue = Literal["yellow", "red", "audit"]
QUEUES: tuple[Queue, ...] = get_args(Queue)


class Keys:
    """Key names under one prefix."""

    def __init__(self, prefix: str = "triage") -> None:
        self.prefix = prefix
        self.stream = f"{prefix}:tickets"
        self.decisions = f"{prefix}:decisions"
        self.deadletter = f"{prefix}:deadletter"
        self.callbacks = f"{prefix}:callbacks"
        self.callbacks_dead = f"{prefix}:callbacks:dead"
        self.results = f"{prefix}:results"
        self.audit_state = f"{prefix}:audit:state"
        self.audit_queued = f"{prefix}:audit:queued"
        self.audit_green_checks = f"{prefix}:audit:green_checks"

    def ticket(self, ticket_id: str) -> str:
        return f"{self.prefix}:ticket:{ticket_id}"

    def features(self, ticket_id: str) -> str:
        return f"{self.prefix}:features:{ticket_id}"

    def queue(self, name: str) -> str:
        return f"{self.prefix}:queue:{name}"

    def idempotency(self, key: str) -> str:
        return f"{self.prefix}:idem:{key}"

    def heartbeat(self, worker: str) -> str:
        return f"{self.prefix}:heartbeat:{worker}"

    def ratelimit(self, kind: str) -> str:
        """The prefix of one kind of rate-limit bucket; the subject's sha256 follows."""
        return f"{self.prefix}:ratelimit:{kind}:"

    def heartbeat_pattern(self) -> str:
        return f"{self.prefix}:heartbeat:*"

    def audit_verdict(self, cache_key: str) -> str:
        return f"{self.prefix}:audit:verdicts:{cache_key}"
