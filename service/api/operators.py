"""Operator routes: GET /v1/queues/{yellow|red|audit} and POST /v1/tickets/{id}/decision.

The decision itself is service.operators.apply_decision, which the console calls too.
"""

from __future__ import annotations

import time

from litestar import get, post
from litestar.datastructures import State
from litestar.params import Parameter

from ..errors import InvalidTicket
from ..operators import apply_decision
from ..policy import vocabulary
from ..results import DecisionIn
from ..store import AsyncStore, Queue, StoredTicket
from .auth import require
from .schemas import (
    DecisionRecorded,
    L1Summary,
    L2Summary,
    QueueItem,
    QueuePage,
    problem_responses,
)


def _parse_cursor(cursor: str | None) -> tuple[float, str] | None:
    if not cursor:
        return None
    score, sep, member = cursor.partition(":")
    try:
        if not sep or not member:
            raise ValueError
        return float(score), member
    except ValueError:
        raise InvalidTicket("cursor is malformed; pass back next_cursor as given", field="cursor") from None


def queue_item(stored: StoredTicket, now: float) -> QueueItem:
    """Summarise a stored ticket for a queue listing (also used by the operator console)."""
    ticket_id = stored.id
    accepted_at = stored.accepted_at if stored.accepted_at is not None else now
    request = stored.request
    assert request is not None  # the listing skips tickets without one
    result = stored.result
    l1 = result.l1 if result is not None else stored.l1
    assert l1 is not None  # written with the request
    l2 = None
    if result is not None:
        risk = result.l2.answers.get("risk")
        l2 = L2Summary(
            level=result.l2.level,
            method=result.l2.method,
            calibrated=result.l2.calibrated,
            red_flags=result.l2.red_flags,
            risk=risk.probabilities if risk else None,
        )
    return QueueItem(
        id=ticket_id,
        # not triaged yet: StoredTicket.level (counts as yellow)
        level=result.final_level if result is not None else stored.level,
        status=stored.status,  # type: ignore[arg-type]
        accepted_at=accepted_at,
        age_s=round(now - accepted_at, 3),
        subject=request.subject,
        category=result.category if result is not None else None,
        urgency=result.urgency if result is not None else None,
        l1=L1Summary(level=l1.level, rules=l1.rules),
        l2=l2,
        calibrated_fields=result.calibrated_fields if result is not None else [],
    )


async def queue_listing(store: AsyncStore, queue: str, limit: int, cursor: str | None) -> QueuePage:
    """One page of a queue, oldest first (the API route and the console both serve this)."""
    page = await store.queue_page(queue, limit, _parse_cursor(cursor))
    depth = await store.queue_depth(queue)
    now = time.time()
    items = []
    for ticket_id, _score in page:
        stored = await store.ticket(ticket_id)
        if stored is None or stored.request is None:
            continue  # expired ticket whose id is still queued: skip, never fail the page
        items.append(queue_item(stored, now))
    next_cursor = f"{page[-1][1]!r}:{page[-1][0]}" if len(page) == limit else None
    return QueuePage(queue=queue, depth=int(depth), items=items, next_cursor=next_cursor)


@get(
    "/v1/queues/{queue:str}",
    guards=[require("operator")],
    summary="Tickets waiting for review",
    tags=["operators"],
    responses=problem_responses(400, 401, 403, 503),
)
async def list_queue(
    queue: Queue,
    state: State,
    limit: int = Parameter(default=50, ge=1, le=500),
    cursor: str | None = None,
) -> QueuePage:
    return await queue_listing(state.store, queue, limit, cursor)


@post(
    "/v1/tickets/{ticket_id:str}/decision",
    guards=[require("operator")],
    status_code=201,
    summary="Record an operator's decision",
    tags=["operators"],
    responses=problem_responses(400, 401, 403, 404, 413, 503),
)
async def record_decision(ticket_id: str, data: DecisionIn, state: State) -> DecisionRecorded:
    await apply_decision(state.store, ticket_id, data, vocabulary(state.settings.prompts_dir))
    return DecisionRecorded(id=ticket_id, recorded=True, removed_from_queues=True)
