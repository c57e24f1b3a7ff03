"""service.operators.check_decision: what the policy requires of any operator decision.

apply_decision itself (store, metrics, log line) is exercised through the API in
tests/api/test_operators.py and through the console in tests/console/test_pages.py.
"""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from service.errors import InvalidTicket
from service.operators import check_decision
from service.policy import vocabulary
from service.results import DecisionIn

OK = {"operator": "ana", "action": "edit", "correct_level": "yellow"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"operator": "  "}, "operator"),
        ({"category": "weather"}, "category"),
        ({"flags": {"refund": True}}, "flags"),
        ({"flags": {"commitment": True}}, "correct_level"),  # a red flag on a yellow decision
    ],
)
def test_refused(change, field):
    with pytest.raises(InvalidTicket) as refused:
        check_decision(DecisionIn(**{**OK, **change}), vocabulary())
    assert refused.value.field == field


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"category": "billing"},
        {"flags": {"commitment": False, "destructive_or_access": False}},
        {"flags": {"commitment": True}, "correct_level": "red"},
    ],
)
def test_accepted(change):
    check_decision(DecisionIn(**{**OK, **change}), vocabulary())


# --- apply_decision against a real Redis: the record, the stream and the log line ------------------


def _accept_and_decide(prefix: str, data: DecisionIn):
    import asyncio

    from service.l1 import evaluate, load_pack
    from service.operators import apply_decision
    from service.results import TicketIn
    from service.store import AsyncStore, StoredTicket
    from tests.support import REDIS_URL, make_settings

    settings = make_settings(prefix)
    request = TicketIn(body="Please refund my last invoice.")

    async def go():
        store = AsyncStore.connect(REDIS_URL, settings)
        try:
            ticket = StoredTicket(
                id="t_log",
                status="queued",
                request=request,
                l1=evaluate(load_pack(settings.rules_dir), request.body),
                accepted_at=1.0,
            )
            await store.accept(ticket, "sha", None)
            with capture_logs() as logs:
                decision = await apply_decision(store, "t_log", data, vocabulary())
            return decision, logs, await store.ticket("t_log")
        finally:
            await store.aclose()

    return asyncio.run(go())


def test_decision_is_recorded_logged_and_streamed(redis_client, prefix):
    from service.store import Keys, decisions_since

    data = DecisionIn(
        operator="ana", action="escalate", correct_level="red", flags={"commitment": True}, category="billing"
    )
    decision, logs, stored = _accept_and_decide(prefix, data)
    # The log line is part of the contract: dashboards and the audit trail read these fields.
    assert [e for e in logs if e["event"] == "decision_recorded"] == [
        {
            "event": "decision_recorded",
            "log_level": "info",
            "operator": "ana",
            "action": "escalate",
            "correct_level": "red",
            "given_level": "yellow",
            "false_green": False,
        }
    ]
    assert stored.decision == decision and decision.given_level == "yellow"
    (entry,) = list(decisions_since(redis_client, Keys(prefix)))
    assert entry.decision == decision


def test_false_green_on_a_ticket_that_was_not_green_is_refused(prefix):
    data = DecisionIn(operator="ana", action="escalate", correct_level="yellow", false_green=True)
    with pytest.raises(InvalidTicket) as refused:
        _accept_and_decide(prefix, data)
    assert refused.value.field == "false_green"
