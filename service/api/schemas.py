"""HTTP response bodies (request bodies are service.results.TicketIn and DecisionIn)."""

from __future__ import annotations

from typing import Literal

import msgspec
from litestar.openapi.datastructures import ResponseSpec

from ..results import L1Result, Level, RuleHit, TriageResult


class L1Summary(msgspec.Struct, frozen=True):
    level: Literal["none", "yellow", "red"]
    rules: list[RuleHit]


class TicketAccepted(msgspec.Struct, frozen=True):
    id: str
    status: Literal["queued", "processing", "done", "failed"]
    l1: L1Summary


class TicketPending(msgspec.Struct, frozen=True):
    """A ticket not triaged yet: what L1 said at acceptance."""

    id: str
    status: Literal["queued", "processing"]
    l1: L1Result
    accepted_at: float


class L2Summary(msgspec.Struct, frozen=True):
    level: Level
    method: str
    calibrated: bool
    red_flags: list[str]
    risk: dict[str, float] | None


class QueueItem(msgspec.Struct, frozen=True):
    id: str
    level: Level
    status: str
    accepted_at: float
    age_s: float
    subject: str | None
    category: str | None
    urgency: int | None
    l1: L1Summary
    l2: L2Summary | None
    calibrated_fields: list[str] = []  # as TriageResult.calibrated_fields: the rest are guesses


class QueuePage(msgspec.Struct, frozen=True):
    queue: str
    depth: int
    items: list[QueueItem]
    next_cursor: str | None


class DecisionRecorded(msgspec.Struct, frozen=True):
    id: str
    recorded: bool
    removed_from_queues: bool


class Problem(msgspec.Struct, frozen=True, omit_defaults=True):
    """RFC 9457 problem body."""

    type: str
    title: str
    status: int
    detail: str
    field: str | None = None
    errors: list[dict[str, str]] = []


TicketView = TriageResult | TicketPending

PROBLEM_MEDIA_TYPE = "application/problem+json"
_WHEN = {
    400: "Malformed JSON, invalid UTF-8, unknown field, wrong type, or a bad header or parameter (`field` names it)",
    401: "No bearer token, or an unknown one",
    403: "The token lacks the route's role",
    404: "No such ticket (expired or never accepted)",
    409: "Idempotency-Key reused with another payload",
    413: "The request or the ticket's text is over its limit",
    422: "An empty request, or a `body` that is empty or only whitespace",
    429: "The stream backlog is full, or the token's rate limit is exceeded; see Retry-After",
    503: "Redis is unreachable: nothing was accepted; see Retry-After",
}


def problem_responses(*statuses: int) -> dict[int, ResponseSpec]:
    """OpenAPI entries for the error statuses a route can answer, all with the RFC 9457 body."""
    return {
        status: ResponseSpec(data_container=Problem, description=_WHEN[status], media_type=PROBLEM_MEDIA_TYPE)
        for status in statuses
    }
