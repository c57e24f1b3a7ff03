"""Operator decisions, the domain operation: check a decision against the policy, record it.

The API's POST /v1/tickets/{id}/decision and the console's decision form both call
`apply_decision`, so a decision is validated, recorded, counted and logged one way.
"""

from __future__ import annotations

import time

import structlog

from . import metrics
from .errors import InvalidTicket, NotFound
from .policy import Vocabulary
from .results import Decision, DecisionIn
from .store import AsyncStore

log = structlog.get_logger()


def check_decision(data: DecisionIn, vocabulary: Vocabulary) -> None:
    """What the policy requires of any decision, before the ticket is read."""
    if not data.operator.strip():
        raise InvalidTicket("`operator` is empty", field="operator")
    if data.category is not None and data.category not in vocabulary.categories:
        raise InvalidTicket(f"`category` must be one of {sorted(vocabulary.categories)}", field="category")
    if data.flags:
        unknown = set(data.flags) - set(vocabulary.flags)
        if unknown:
            raise InvalidTicket(f"unknown flag(s) {sorted(unknown)}", field="flags")
        if any(data.flags.values()) and data.correct_level != "red":
            raise InvalidTicket("a red flag means correct_level must be red", field="correct_level")


async def apply_decision(store: AsyncStore, ticket_id: str, data: DecisionIn, vocabulary: Vocabulary) -> Decision:
    """Validate and record an operator's decision; it lands in the decisions stream."""
    check_decision(data, vocabulary)
    stored = await store.ticket(ticket_id)
    if stored is None:
        raise NotFound(f"no ticket {ticket_id!r}", field="ticket_id")
    given = stored.level
    if data.false_green and given != "green":
        raise InvalidTicket("false_green applies only to a ticket that was green", field="false_green")
    decision = Decision(
        ticket_id=ticket_id,
        operator=data.operator,
        action=data.action,
        correct_level=data.correct_level,
        given_level=given,
        decided_at=time.time(),
        category=data.category,
        flags=data.flags,
        false_green=data.false_green,
        note=data.note,
    )
    outcome = await store.decide(ticket_id, decision)
    if not outcome.recorded:
        raise NotFound(f"no ticket {ticket_id!r}", field="ticket_id")
    metrics.decisions_total.labels(action=data.action).inc()
    if outcome.false_green:  # from the served level and the decision, once per ticket
        metrics.false_greens_total.inc()
    structlog.contextvars.bind_contextvars(ticket_id=ticket_id)
    log.info(
        "decision_recorded",
        operator=data.operator,
        action=data.action,
        correct_level=data.correct_level,
        given_level=given,
        false_green=data.false_green,
    )
    return decision
