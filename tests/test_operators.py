"""service.operators.check_decision: what the policy requires of any operator decision.

apply_decision itself (store, metrics, log line) is exercised through the API in
tests/api/test_operators.py and through the console in tests/console/test_pages.py.
"""

from __future__ import annotations

import pytest

from service.errors import InvalidTicket
from service.operators import check_decision
from service.policy import vocabulary
from service.results import DecisionIn

OK = {"operator": "ana", "action": "edit", "correct_level": "yellow"}


@pytest.mark.parametrize(("change", "field"), [
    ({"operator": "  "}, "operator"),
    ({"category": "weather"}, "category"),
    ({"flags": {"refund": True}}, "flags"),
    ({"flags": {"commitment": True}}, "correct_level"),  # a red flag on a yellow decision
])
def test_refused(change, field):
    with pytest.raises(InvalidTicket) as refused:
        check_decision(DecisionIn(**{**OK, **change}), vocabulary())
    assert refused.value.field == field


@pytest.mark.parametrize("change", [
    {},
    {"category": "billing"},
    {"flags": {"commitment": False, "destructive_or_access": False}},
    {"flags": {"commitment": True}, "correct_level": "red"},
])
def test_accepted(change):
    check_decision(DecisionIn(**{**OK, **change}), vocabulary())
