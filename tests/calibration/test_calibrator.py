"""Calibrator.apply: calibrated copies of logits answers, raw kept, all-or-nothing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from service.calibration.calibrator import CalibrationMismatch, Calibrator, QuestionModel
from service.calibration.heads import LinearHead
from service.calibration.maths import Scaling
from service.l2.decision import Thresholds
from service.results import Answer

RISK = ("green", "yellow", "red")


def _answer(kind, options, logprobs, method="logits", coverage=0.9):
    lp = np.array([logprobs[o] for o in options])
    p = np.exp(lp - lp.max())
    p /= p.sum()
    probs = {o: float(v) for o, v in zip(options, p, strict=True)}
    chosen = options[int(np.argmax(p))]
    a = Answer(
        kind=kind,
        options=list(options),
        chosen=chosen,
        probabilities=probs,
        logprobs=dict(logprobs),
        coverage=coverage,
        confidence=probs[chosen] * coverage,
        method=method,
    )
    if kind == "boolean":
        a.probability = probs["yes"]
    if kind == "score":
        a.value = sum(int(o) * v for o, v in probs.items())
        a.mode = int(chosen)
    return a


def _calibrator(models):
    return Calibrator("v1", models, Thresholds(green=0.9))


def test_temperature_softens_and_keeps_the_raw_probabilities():
    raw = _answer("choice", RISK, {"green": -0.1, "yellow": -3.0, "red": -4.0})
    cal = _calibrator(
        {"risk": QuestionModel("temperature", RISK, "choice", scaling=Scaling(temperature=2.0, bias=[0, 0, 0]))}
    )
    out = cal.apply({"risk": raw}, {})["risk"]
    assert out.calibrated and out.method == "logits"
    assert out.raw_probabilities == raw.probabilities
    z = np.array([-0.1, -3.0, -4.0]) / 2.0
    expected = np.exp(z) / np.exp(z).sum()
    assert [out.probabilities[o] for o in RISK] == pytest.approx(list(expected))
    assert out.chosen == "green"
    assert out.confidence == pytest.approx(expected[0] * 0.9)
    assert out.logprobs == raw.logprobs
    assert raw.calibrated is False  # the input is not modified


def test_a_head_reads_the_hidden_state_and_can_change_the_answer():
    d = 4
    coef = np.zeros((3, d))
    coef[2, 0] = 5.0  # feature 0 high -> red
    head = LinearHead(np.zeros(d), np.ones(d), coef, np.zeros(3), c=1.0)
    raw = _answer("choice", RISK, {"green": -0.1, "yellow": -3.0, "red": -4.0})
    cal = _calibrator({"risk": QuestionModel("head", RISK, "choice", head=head)})
    out = cal.apply({"risk": raw}, {"risk": np.array([2.0, 0, 0, 0], dtype=np.float32)})["risk"]
    assert out.method == "head" and out.calibrated
    assert out.chosen == "red"
    assert out.probabilities["red"] == pytest.approx(math.exp(10) / (math.exp(10) + 2))
    assert out.raw_probabilities["green"] > 0.9


def test_boolean_and_score_fields_follow_the_calibrated_distribution():
    flag = _answer("boolean", ("yes", "no"), {"yes": -0.05, "no": -3.0})
    urgency = _answer("score", tuple("012345"), {str(i): -float(i) for i in range(6)})
    cal = _calibrator(
        {
            "commitment": QuestionModel(
                "vector", ("yes", "no"), "boolean", scaling=Scaling(temperature=1.0, bias=[-3.0, 3.0])
            ),
            "urgency": QuestionModel(
                "vector", tuple("012345"), "score", scaling=Scaling(temperature=1.0, bias=[0, 0, 0, 0, 0, 8.0])
            ),
        }
    )
    out = cal.apply({"commitment": flag, "urgency": urgency}, {})
    assert out["commitment"].probability == pytest.approx(out["commitment"].probabilities["yes"])
    assert out["commitment"].chosen == "no"
    assert out["urgency"].mode == 5 and out["urgency"].chosen == "5"
    assert out["urgency"].value == pytest.approx(sum(int(o) * p for o, p in out["urgency"].probabilities.items()))


def test_uncovered_and_generated_answers_pass_through():
    team = _answer("choice", ("a", "b"), {"a": -1.0, "b": -2.0})
    generated = Answer(kind="choice", options=list(RISK), chosen="red", method="generated")
    cal = _calibrator({"risk": QuestionModel("raw", RISK, "choice")})
    out = cal.apply({"team": team, "risk": generated}, {})
    assert out["team"] is team and out["risk"] is generated


def test_applying_twice_is_idempotent():
    raw = _answer("choice", RISK, {"green": -0.1, "yellow": -3.0, "red": -4.0})
    cal = _calibrator(
        {"risk": QuestionModel("temperature", RISK, "choice", scaling=Scaling(temperature=3.0, bias=[0, 0, 0]))}
    )
    once = cal.apply({"risk": raw}, {})
    twice = cal.apply(once, {})
    assert twice["risk"].probabilities == pytest.approx(once["risk"].probabilities)
    assert twice["risk"].raw_probabilities == raw.probabilities


def test_missing_hidden_state_or_other_options_raise():
    head = LinearHead(np.zeros(4), np.ones(4), np.zeros((3, 4)), np.zeros(3), c=1.0)
    cal = _calibrator({"risk": QuestionModel("head", RISK, "choice", head=head)})
    raw = _answer("choice", RISK, {"green": -0.1, "yellow": -3.0, "red": -4.0})
    with pytest.raises(CalibrationMismatch, match="hidden state"):
        cal.apply({"risk": raw}, {})
    with pytest.raises(CalibrationMismatch, match="shape"):
        cal.apply({"risk": raw}, {"risk": np.zeros(5, dtype=np.float32)})
    other = _answer("choice", ("green", "red"), {"green": -0.1, "red": -2.0})
    with pytest.raises(CalibrationMismatch, match="options"):
        cal.apply({"risk": other}, {"risk": np.zeros(4)})


def test_a_head_on_all_positions_reads_them_in_order():
    d = 2
    coef = np.zeros((3, 2 * d))
    coef[2, d] = 5.0  # the second input's first coordinate -> red
    head = LinearHead(np.zeros(2 * d), np.ones(2 * d), coef, np.zeros(3), c=1.0)
    model = QuestionModel("head_all", RISK, "choice", head=head, inputs=("risk", "commitment"))
    cal = _calibrator({"risk": model})
    raw = _answer("choice", RISK, {"green": -0.1, "yellow": -3.0, "red": -4.0})
    feats = {"risk": np.array([0.0, 0.0]), "commitment": np.array([2.0, 0.0])}
    out = cal.apply({"risk": raw}, feats)["risk"]
    assert out.method == "head" and out.chosen == "red"
    swapped = {"risk": feats["commitment"], "commitment": feats["risk"]}
    assert cal.apply({"risk": raw}, swapped)["risk"].chosen != "red"
    with pytest.raises(CalibrationMismatch, match="'commitment', which is missing"):
        cal.apply({"risk": raw}, {"risk": feats["risk"]})


def test_an_answer_mapped_by_the_raw_softmax_is_not_called_calibrated():
    import numpy as np

    from service.calibration.calibrator import calibrated_answer
    from service.results import Answer

    answer = Answer(kind="choice", options=["a", "b"], chosen="a", probabilities={"a": 0.6, "b": 0.4}, coverage=0.9)
    assert calibrated_answer(answer, np.array([0.6, 0.4]), "raw").calibrated is False
    assert calibrated_answer(answer, np.array([0.7, 0.3]), "temperature").calibrated is True
