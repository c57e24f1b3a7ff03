"""The L2 verdict table: pure, no model. Each row: answers -> expected level and flags."""

from __future__ import annotations

import pytest

from service.l2.decision import Thresholds, decide_level
from service.results import Answer


def risk(green: float, yellow: float, red: float) -> Answer:
    probs = {"green": green, "yellow": yellow, "red": red}
    return Answer(
        kind="choice", options=list(probs), chosen=max(probs, key=probs.get), probabilities=probs, coverage=0.9
    )


def flag(p_yes: float) -> Answer:
    return Answer(
        kind="boolean",
        options=["yes", "no"],
        chosen="yes" if p_yes >= 0.5 else "no",
        probabilities={"yes": p_yes, "no": 1 - p_yes},
        probability=p_yes,
        coverage=0.9,
    )


def generated(kind: str, chosen: str, options: list[str]) -> Answer:
    return Answer(kind=kind, options=options, chosen=chosen, method="generated")


NO_FLAGS = {
    "commitment": flag(0.1),
    "destructive_or_access": flag(0.1),
    "third_party_personal_data": flag(0.1),
    "instructions": flag(0.1),
}

CASES = [
    # (id, answers, expected level, expected red flags)
    ("clear green", {"risk": risk(0.9, 0.05, 0.05), **NO_FLAGS}, "green", []),
    ("green at exactly the threshold", {"risk": risk(0.8, 0.15, 0.05), **NO_FLAGS}, "green", []),
    ("green just under the threshold", {"risk": risk(0.79, 0.2, 0.01), **NO_FLAGS}, "yellow", []),
    ("argmax green but P(red) 0.3 -> red", {"risk": risk(0.5, 0.2, 0.3), **NO_FLAGS}, "red", []),
    ("P(red) just under 0.3", {"risk": risk(0.5, 0.21, 0.29), **NO_FLAGS}, "yellow", []),
    ("argmax yellow", {"risk": risk(0.2, 0.7, 0.1), **NO_FLAGS}, "yellow", []),
    (
        "commitment flag at 0.5 -> red",
        {"risk": risk(0.95, 0.04, 0.01), **NO_FLAGS, "commitment": flag(0.5)},
        "red",
        ["commitment"],
    ),
    ("flag at 0.49 does not fire", {"risk": risk(0.95, 0.04, 0.01), **NO_FLAGS, "commitment": flag(0.49)}, "green", []),
    (
        "two flags",
        {
            "risk": risk(0.2, 0.7, 0.1),
            **NO_FLAGS,
            "destructive_or_access": flag(0.9),
            "third_party_personal_data": flag(0.6),
        },
        "red",
        ["destructive_or_access", "third_party_personal_data"],
    ),
    (
        "instruction attempt blocks green",
        {"risk": risk(0.95, 0.04, 0.01), **NO_FLAGS, "instructions": flag(0.7)},
        "yellow",
        [],
    ),
    ("missing risk answer", {**NO_FLAGS}, "yellow", []),
    ("missing red-flag answer blocks green", {"risk": risk(0.95, 0.04, 0.01), "commitment": flag(0.1)}, "yellow", []),
    (
        "generated green is never green",
        {"risk": generated("choice", "green", ["green", "yellow", "red"]), **NO_FLAGS},
        "yellow",
        [],
    ),
    ("generated red is red", {"risk": generated("choice", "red", ["green", "yellow", "red"]), **NO_FLAGS}, "red", []),
    (
        "generated flag yes is red",
        {"risk": risk(0.95, 0.04, 0.01), **NO_FLAGS, "commitment": generated("boolean", "yes", ["yes", "no"])},
        "red",
        ["commitment"],
    ),
]


@pytest.mark.parametrize(("answers", "level", "flags"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_decision_table(answers, level, flags):
    got_level, got_flags, reason = decide_level(answers, Thresholds())
    assert (got_level, got_flags) == (level, flags)
    assert reason  # every verdict says why


def test_truncated_ticket_is_never_green():
    level, _, reason = decide_level({"risk": risk(0.99, 0.01, 0.0), **NO_FLAGS}, Thresholds(), truncated=True)
    assert level == "yellow" and "truncated" in reason


def test_thresholds_are_replaceable():
    answers = {"risk": risk(0.7, 0.25, 0.05), **NO_FLAGS}
    assert decide_level(answers, Thresholds())[0] == "yellow"
    assert decide_level(answers, Thresholds(green=0.6))[0] == "green"
    assert decide_level(answers, Thresholds(red=0.05))[0] == "red"
    strict = Thresholds(flags={"commitment": 0.05, "destructive_or_access": 0.5, "third_party_personal_data": 0.5})
    assert decide_level(answers, strict) == ("red", ["commitment"], "red flag: commitment P(yes)=0.10")


def test_default_thresholds_match_the_policy_card():
    t = Thresholds()
    assert (t.green, t.red, t.min_coverage) == (0.8, 0.3, 0.5)
    assert t.flags == {"commitment": 0.5, "destructive_or_access": 0.5, "third_party_personal_data": 0.5}


def test_a_ticket_unlike_the_labelled_greens_is_never_green():
    answers = {"risk": risk(0.99, 0.005, 0.005), **NO_FLAGS}
    assert decide_level(answers, Thresholds())[0] == "green"
    level, _, reason = decide_level(
        answers, Thresholds(), unlike_greens="unlike the labelled greens (gate distance 9.1)"
    )
    assert level == "yellow" and "unlike the labelled greens" in reason
    # the gate only takes green away: a red stays red
    red = {"risk": risk(0.05, 0.05, 0.9), **NO_FLAGS}
    assert decide_level(red, Thresholds(), unlike_greens="unlike")[0] == "red"


@pytest.mark.parametrize(
    ("p_green", "threshold", "level", "reason"),
    [
        (0.5, 0.8, "yellow", "P(green)=0.50 < 0.80"),
        # a calibrated threshold near 1 is not shown as 1.00, which no ticket could reach
        (0.9901, 0.9974, "yellow", "P(green)=0.990 < 0.997"),
        # the two read apart however close they are
        (0.99731, 0.9974, "yellow", "P(green)=0.9973 < 0.9974"),
        (0.99745, 0.9974, "green", "P(green)=0.99745 >= 0.99740"),
    ],
)
def test_a_reason_shows_the_probability_and_its_threshold_as_they_compare(p_green, threshold, level, reason):
    answers = {"risk": risk(p_green, 1 - p_green, 0.0), **NO_FLAGS}
    assert decide_level(answers, Thresholds(green=threshold)) == (level, [], reason)
