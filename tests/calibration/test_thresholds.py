"""Threshold choice on constructed examples, and the vectorised rule against decide_level."""

from __future__ import annotations

import numpy as np
import pytest

from service.calibration.thresholds import (
    GREEN,
    RED,
    YELLOW,
    above_all,
    choose_green,
    choose_red,
    choose_yellow_flag,
    confusion,
    false_green_upper,
    levels,
    summarise,
)
from service.l2.decision import Thresholds, decide_level
from service.results import RED_FLAGS, Answer


def test_conservative_green_threshold_sits_above_the_most_confident_non_green():
    p_green = np.array([0.95, 0.92, 0.90, 0.86, 0.40, 0.10])
    truth = np.array([GREEN, GREEN, GREEN, YELLOW, RED, YELLOW])
    choice = choose_green(p_green, truth, floor=0.8, margin=0.02)
    assert choice.rule == "zero_false_green"  # 6 tickets vouch for no rate
    assert choice.max_non_green == pytest.approx(0.86)
    assert choice.threshold == pytest.approx(0.88)
    predicted_green = p_green >= choice.threshold
    assert not (predicted_green & (truth != GREEN)).any()  # zero false greens
    assert predicted_green.sum() == 3  # and every green above it kept


def test_conservative_threshold_keeps_the_floor():
    p_green = np.array([0.9] * 10 + [0.5] * 40)
    truth = np.array([GREEN] * 10 + [YELLOW] * 40)
    choice = choose_green(p_green, truth, floor=0.8, margin=0.02)
    assert choice.threshold == 0.8 and choice.rule == "zero_false_green"
    assert choice.labels_needed > 50  # says how many labels the bound would need


def clopper_pearson_by_bisection(k: int, n: int, alpha: float) -> float:
    """The exact one-sided upper bound from its definition: the largest rate p whose
    binomial probability of k or fewer events is at least alpha."""
    from math import comb

    def cdf(p: float) -> float:
        return sum(comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))

    lo, hi = 0.0, 1.0
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) > alpha else (lo, mid)
    return lo


@pytest.mark.parametrize(("k", "n"), [(0, 10), (0, 299), (1, 50), (3, 400), (0, 1)])
def test_false_green_upper_is_the_exact_clopper_pearson_bound(k, n):
    assert false_green_upper(k, n, 0.95) == pytest.approx(clopper_pearson_by_bisection(k, n, 0.05), abs=1e-9)


def test_zero_in_n_gives_the_closed_form_bound():
    # k = 0: the bound is 1 - alpha^(1/n); about 3/n (rule of three) for large n.
    assert false_green_upper(0, 300, 0.95) == pytest.approx(1 - 0.05 ** (1 / 300))
    assert false_green_upper(0, 300, 0.95) == pytest.approx(3 / 300, rel=0.01)


def test_bound_rule_certifies_the_lowest_grid_threshold_the_labels_support():
    # 1,000 greens at 0.97 and 4,000 non-greens at 0.2; grid of two thresholds.
    # At 0.9 (and 0.5): 1,000 auto-answered, 0 false: bound 1 - 0.025^(1/1000) = 0.37 % <= 1 %.
    p_green = np.array([0.97] * 1000 + [0.2] * 4000)
    truth = np.array([GREEN] * 1000 + [YELLOW] * 4000)
    choice = choose_green(p_green, truth, max_rate=0.01, grid=(0.5, 0.9))
    assert choice.rule == "bound"
    assert choice.threshold == 0.5  # the lowest certified grid point; above every non-green
    assert choice.n_auto == 1000 and choice.false_greens == 0
    assert choice.upper_bound == pytest.approx(1 - 0.025 ** (1 / 1000))  # Bonferroni: 5 % / 2
    assert choice.greens_cleared == 1.0 and choice.labels_needed == 0


def test_bound_rule_never_goes_under_a_non_green_it_was_chosen_on():
    # 1,000 greens at 0.97, one yellow at 0.95, the rest low: 0.9 is certified (1 false green
    # in 1,001 is under 1 % with room), but the threshold still excludes the yellow.
    p_green = np.array([0.97] * 1000 + [0.95] + [0.2] * 3000)
    truth = np.array([GREEN] * 1000 + [YELLOW] + [RED] * 3000)
    choice = choose_green(p_green, truth, max_rate=0.01, grid=(0.9,))
    assert choice.rule == "bound"
    assert choice.threshold > 0.95 and choice.false_greens == 0


def test_too_few_labels_for_the_bound_fall_back_to_the_conservative_rule():
    # 100 greens, no false green: the 95 % bound is 2.9 %, over 1 % at every threshold.
    p_green = np.array([0.97] * 100 + [0.1] * 100)
    truth = np.array([GREEN] * 100 + [YELLOW] * 100)
    choice = choose_green(p_green, truth, max_rate=0.01, grid=(0.5,))
    assert choice.rule == "zero_false_green"
    assert choice.upper_bound > 0.01
    # 299 auto-answered without a false green would do; half the tickets are auto-answered.
    assert choice.labels_needed == 2 * 299


def test_saturated_probabilities_never_let_a_non_green_through():
    # A non-green ticket at exactly 1.0 (float64 saturation): no threshold <= 1 excludes it.
    p_green = np.array([1.0, 1.0, 0.999, 0.2])
    truth = np.array([GREEN, YELLOW, GREEN, RED])
    choice = choose_green(p_green, truth)
    assert choice.threshold > 1.0
    assert not (p_green >= choice.threshold).any()
    assert above_all(np.array([1.0])) > 1.0 and above_all(np.array([0.5])) > 0.5


# truth, P(red), P(flag a) per ticket
TICKETS = [
    (RED, 0.90, 0.10),
    (RED, 0.20, 0.90),  # only the flag catches it
    (RED, 0.45, 0.10),
    (YELLOW, 0.40, 0.10),  # a red threshold at 0.40 or below over-escalates it
    (YELLOW, 0.10, 0.60),  # a flag threshold at 0.60 or below over-escalates it
    (GREEN, 0.05, 0.05),
]


def _arrays(tickets):
    truth = np.array([t[0] for t in tickets])
    return truth, np.array([t[1] for t in tickets]), {"a": np.array([t[2] for t in tickets])}


def test_red_thresholds_reach_recall_with_no_over_escalation():
    truth, p_red, flags = _arrays(TICKETS)
    choice = choose_red(p_red, flags, truth, target=0.9)
    assert choice.red == pytest.approx(0.45)  # the only grid value in (0.40, 0.45]
    assert 0.6 < choice.flags["a"] <= 0.9
    assert choice.flags["a"] == pytest.approx(0.65)  # ties: nearest the grid's middle
    assert choice.recall == 1.0 and choice.over_escalations == 0 and choice.target_reached


def test_red_recall_comes_before_over_escalations():
    tickets = list(TICKETS)
    tickets[2] = (RED, 0.38, 0.10)  # now catching it drags the yellow at 0.40 along
    truth, p_red, flags = _arrays(tickets)
    choice = choose_red(p_red, flags, truth, target=0.9)
    assert choice.recall == 1.0
    assert choice.over_escalations == 1
    assert choice.red <= 0.35
    # with a lower target the over-escalation is not worth it
    relaxed = choose_red(p_red, flags, truth, target=0.6)
    assert relaxed.over_escalations == 0 and relaxed.recall == pytest.approx(2 / 3)


def test_unreachable_recall_gives_the_highest_recall():
    truth = np.array([RED, RED, YELLOW])
    p_red = np.array([0.9, 0.01, 0.5])
    choice = choose_red(p_red, {"a": np.array([0.0, 0.02, 0.0])}, truth, target=0.9)
    assert not choice.target_reached
    assert choice.recall == 0.5
    assert choice.over_escalations == 0


def test_flag_false_positives_break_ties():
    truth = np.array([RED, RED, YELLOW])
    p_red = np.array([0.9, 0.9, 0.0])  # the red threshold alone catches both reds
    # flag b says 0.6 on the red tickets, whose labels say b is absent there
    flags = {"b": np.array([0.6, 0.6, 0.0])}
    labels = {"b": np.array([0, 0, 0])}
    choice = choose_red(p_red, flags, truth, labels, target=0.9)
    assert choice.flag_false_positives == 0
    assert choice.flags["b"] > 0.6
    # without labels the middle of the grid wins the tie, and b would fire on both
    unlabelled = choose_red(p_red, flags, truth, target=0.9)
    assert unlabelled.flags["b"] == pytest.approx(0.5)


def _answer_choice(p):
    return Answer(
        kind="choice",
        options=["green", "yellow", "red"],
        chosen="green",
        probabilities={"green": p[0], "yellow": p[1], "red": p[2]},
    )


def _answer_bool(p):
    return Answer(
        kind="boolean",
        options=["yes", "no"],
        chosen="yes" if p >= 0.5 else "no",
        probabilities={"yes": p, "no": 1 - p},
        probability=p,
    )


def test_vectorised_levels_agree_with_decide_level():
    rng = np.random.default_rng(0)
    n = 400
    risk = rng.dirichlet([1, 1, 1], size=n)
    flags = {f: rng.random(n) for f in RED_FLAGS}
    instructions = rng.random(n)
    t = Thresholds(
        green=0.6, red=0.3, flags={"commitment": 0.7, "destructive_or_access": 0.8, "third_party_personal_data": 0.9}
    )
    blocked = instructions >= t.yellow_flags["instructions"]
    ours = levels(risk[:, 0], risk[:, 2], flags, t.green, t.red, t.flags, blocked)
    for i in range(n):
        answers = {"risk": _answer_choice(risk[i]), "instructions": _answer_bool(instructions[i])}
        answers.update({f: _answer_bool(flags[f][i]) for f in RED_FLAGS})
        level, _, _ = decide_level(answers, t)
        assert ("green", "yellow", "red")[ours[i]] == level, i
    assert len(set(ours)) == 3  # the sample exercises every branch


def test_confusion_and_summary_by_hand():
    truth = np.array([GREEN, GREEN, YELLOW, YELLOW, RED, RED])
    pred = np.array([GREEN, YELLOW, GREEN, RED, RED, YELLOW])
    assert confusion(truth, pred) == [[1, 1, 0], [1, 0, 1], [0, 1, 1]]
    s = summarise(truth, pred)
    assert s.false_greens == 1 and s.missed_reds == 1 and s.over_escalations == 2
    assert s.red_recall == 0.5 and s.accuracy == pytest.approx(2 / 6)
    assert s.green_rate == pytest.approx(2 / 6)


def test_yellow_flag_threshold_sits_above_its_noise_on_green_tickets():
    # a flag saying ~0.65 to everything, 0.9 on one injection attempt labelled yellow
    p_yes = np.array([0.62, 0.66, 0.64, 0.65, 0.90])
    truth = np.array([GREEN, GREEN, GREEN, YELLOW, YELLOW])
    choice = choose_yellow_flag(p_yes, truth, default=0.5, margin=0.02)
    assert choice.max_on_green == pytest.approx(0.66)
    assert choice.threshold == pytest.approx(0.68)
    assert not (p_yes[truth == GREEN] >= choice.threshold).any()  # no green blocked
    assert p_yes[4] >= choice.threshold  # the attempt still is
    assert choose_yellow_flag(p_yes, np.full(5, YELLOW), default=0.5).threshold == 0.5


def test_labels_needed_follow_from_the_bound_over_the_default_grid():
    # No false green: n auto-answered tickets bound the rate under 1 % at 95 % over the 7-point
    # grid once 1 - (0.05 / 7)^(1 / n) <= 1 %: n = 492 (docs/calibration.md says so).
    n = 492
    assert false_green_upper(0, n, 1 - 0.05 / 7) <= 0.01 < false_green_upper(0, n - 1, 1 - 0.05 / 7)
    p_green = np.array([0.97] * 100 + [0.1] * 100)
    truth = np.array([GREEN] * 100 + [YELLOW] * 100)
    assert choose_green(p_green, truth).labels_needed == 2 * n
