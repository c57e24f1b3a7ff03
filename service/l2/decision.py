"""The L2 verdict from answers and thresholds: pure, no model, one table of cases in its tests.

Order of the rules follows the policy's cost of errors (no false greens first, then red recall):
1. any red flag with P(yes) >= its threshold -> red;
2. P(red) >= red threshold -> red (risk is not argmax: a minority red is still red);
3. green only if P(green) >= green threshold AND nothing blocks green (generated answers,
   truncated ticket, an instruction attempt, a missing answer, a ticket unlike every labelled
   green) -> otherwise yellow.
"""

from __future__ import annotations

import msgspec

from service.results import RED_FLAGS, Answer, Level

# Yellow flags: questions whose "yes" forbids green without making the ticket red.
YELLOW_FLAGS: tuple[str, ...] = ("instructions",)


class Thresholds(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Decision thresholds; a calibration artifact may replace them."""

    green: float = 0.8  # P(green) needed for green
    red: float = 0.3  # P(red) from which the ticket is red
    flags: dict[str, float] = msgspec.field(default_factory=lambda: {flag: 0.5 for flag in RED_FLAGS})  # P(yes) -> red
    yellow_flags: dict[str, float] = msgspec.field(
        default_factory=lambda: {flag: 0.5 for flag in YELLOW_FLAGS}
    )  # P(yes) -> not green
    min_coverage: float = 0.5  # risk/category coverage under this -> constrained generation


def p_yes(answer: Answer) -> float:
    """P(yes) of a boolean answer; a generated answer counts as certain."""
    if answer.probability is not None:
        return answer.probability
    if answer.probabilities is not None:
        return answer.probabilities.get("yes", 0.0)
    return 1.0 if answer.chosen == "yes" else 0.0


def _apart(value: float, limit: float) -> tuple[str, str]:
    """A probability and the threshold it is compared with, for a reason line: two decimals, or
    as many more as it takes for the two to read apart and for neither to read as 0 or 1 when it
    is not. A calibrated green threshold of 0.9974 read "1.00", and "P(green)=0.99 < 1.00" looked
    like a threshold no ticket can reach."""
    for places in range(2, 7):
        shown = f"{value:.{places}f}", f"{limit:.{places}f}"
        apart = shown[0] != shown[1] or value == limit
        none_rounded_to_bound = all(
            not 0.0 < x < 1.0 or float(text) not in (0.0, 1.0) for x, text in zip((value, limit), shown, strict=True)
        )
        if apart and none_rounded_to_bound:
            return shown
    return f"{value:.6f}", f"{limit:.6f}"


def decide_level(
    answers: dict[str, Answer], thresholds: Thresholds, *, truncated: bool = False, unlike_greens: str | None = None
) -> tuple[Level, list[str], str]:
    """(level, red flags raised, one-line reason) from the answers; fails closed to yellow."""
    red_flags = [
        flag for flag in RED_FLAGS if flag in answers and p_yes(answers[flag]) >= thresholds.flags.get(flag, 0.5)
    ]
    if red_flags:
        detail = ", ".join(f"{f} P(yes)={p_yes(answers[f]):.2f}" for f in red_flags)
        return "red", red_flags, f"red flag: {detail}"
    risk = answers.get("risk")
    if risk is None:
        return "yellow", [], "risk question unanswered"
    if risk.probabilities is None:
        # Generated (fallback) answer: red is believed, green never is.
        if risk.chosen == "red":
            return "red", [], "generated risk answer: red"
        return "yellow", [], f"generated risk answer ({risk.chosen}) is never green"
    p_red = risk.probabilities.get("red", 0.0)
    p_green = risk.probabilities.get("green", 0.0)
    if p_red >= thresholds.red:
        return "red", [], "P(red)={} >= {}".format(*_apart(p_red, thresholds.red))
    if p_green < thresholds.green:
        return "yellow", [], "P(green)={} < {}".format(*_apart(p_green, thresholds.green))
    blockers = []
    for flag in RED_FLAGS:
        if flag not in answers:
            blockers.append(f"{flag} unanswered")
    for flag, limit in thresholds.yellow_flags.items():
        if flag in answers and p_yes(answers[flag]) >= limit:
            blockers.append(f"{flag} P(yes)={p_yes(answers[flag]):.2f}")
    if truncated:
        blockers.append("ticket truncated to fit the context")
    if unlike_greens:
        blockers.append(unlike_greens)
    if blockers:
        return "yellow", [], "not green: " + "; ".join(blockers)
    return "green", [], "P(green)={} >= {}".format(*_apart(p_green, thresholds.green))
