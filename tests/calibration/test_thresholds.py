"""Threshold choice on constructed examples, and the vectorised rule against decide_level."""

from __future__ import annotations

import numpy as np
import pytest

from service.calibration.thresholds import (
    GREEN,
    RED,
    YELLOW,
    choose_green,
    choose_red,
    choose_yellow_flag,
    confusion,
    levels,
    summarise,
)
from service.l2.decision import Thresholds, decide_level
from service.results import RED_FLAGS, Answer


def test_green_threshold_sits_just_above_the_most_confident_non_green():
    p_green = np.array([0.95, 0.92, 0.90, 0.86, 0.40, 0.10])
    truth = np.array([GREEN, GREEN, GREEN, YELLOW, RED, YELLOW])
    choice = choose_green(p_green, truth, floor=0.8, margin=0.02)
    assert choice.max_non_green == pytest.approx(0.86)
    assert choice.threshold == pytest.approx(0.88)
    assert not choice.floor_applied
    predicted_green = p_green >= choice.threshold
    assert not (predicted_green & (truth != GREEN)).any()  # zero false greens
    assert predicted_green.sum() == 3  # and every green above it kept


def test_green_floor_is_kept_when_the_data_cannot_justify_going_lower():
    p_green = np.array([0.9] * 10 + [0.5] * 40)
    truth = np.array([GREEN] * 10 + [YELLOW] * 40)
    choice = choose_green(p_green, truth, floor=0.8, margin=0.02)
    assert choice.zero_false_green == pytest.approx(0.52)
    assert choice.threshold == 0.8 and choice.floor_applied
    assert "floor kept" in choice.reason and "300 needed" in choice.reason


def test_green_floor_is_dropped_with_enough_non_green_labels():
    # 300 non-green tickets without a false green bound the rate under 1% (rule of three).
    p_green = np.array([0.9] * 50 + [0.3] * 300)
    truth = np.array([GREEN] * 50 + [RED] * 300)
    choice = choose_green(p_green, truth, floor=0.8, margin=0.02)
    assert choice.threshold == pytest.approx(0.32)
    assert not choice.floor_applied
    assert choice.false_green_upper_95 == pytest.approx(0.01)


def test_green_threshold_is_capped_at_one():
    choice = choose_green(np.array([0.99, 0.995]), np.array([GREEN, YELLOW]), margin=0.02)
    assert choice.threshold == 1.0
    assert "only P(green) = 1 passes" in choice.reason


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
    return Answer(kind="choice", options=["green", "yellow", "red"], chosen="green",
                  probabilities={"green": p[0], "yellow": p[1], "red": p[2]})


def _answer_bool(p):
    return Answer(kind="boolean", options=["yes", "no"], chosen="yes" if p >= 0.5 else "no",
                  probabilities={"yes": p, "no": 1 - p}, probability=p)


def test_vectorised_levels_agree_with_decide_level():
    rng = np.random.default_rng(0)
    n = 400
    risk = rng.dirichlet([1, 1, 1], size=n)
    flags = {f: rng.random(n) for f in RED_FLAGS}
    instructions = rng.random(n)
    t = Thresholds(green=0.6, red=0.3, flags={"commitment": 0.7, "destructive_or_access": 0.8,
                                              "third_party_personal_data": 0.9})
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
