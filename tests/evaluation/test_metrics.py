"""Evaluation metrics as tables over synthetic rows whose answers are known by hand."""

from __future__ import annotations

import pytest

from service.evaluation import metrics as m
from service.l2.decision import Thresholds
from tests.evaluation.support import answers, row, scored

CASES = [
    # truth/predicted pairs -> expected helpdesk figures
    pytest.param(
        [
            ("green", "green"),
            ("green", "green"),
            ("green", "yellow"),
            ("yellow", "yellow"),
            ("red", "red"),
            ("red", "yellow"),
        ],
        {
            "answered_automatically": 2 / 6,
            "greens_cleared": 2 / 3,
            "false_green_ids": [],
            "greens_escalated": 1,
            "greens_escalated_share": 1 / 3,
            "red_recall": 1 / 2,
            "over_escalations": 1,
            "false_greens": 0,
            "missed_reds": 1,
        },
        id="two-of-three-greens-cleared",
    ),
    pytest.param(
        [("green", "red"), ("yellow", "green"), ("red", "green"), ("red", "red")],
        {
            "answered_automatically": 2 / 4,
            "greens_cleared": 0.0,
            "false_green_ids": ["T-001", "T-002"],
            "greens_escalated": 1,
            "greens_escalated_share": 1.0,
            "red_recall": 1 / 2,
            "over_escalations": 1,
            "false_greens": 2,
            "missed_reds": 1,
        },
        id="false-greens-named-by-id",
    ),
    pytest.param(
        [("yellow", "red"), ("yellow", "yellow")],
        {
            "answered_automatically": 0.0,
            "greens_cleared": None,
            "false_green_ids": [],
            "greens_escalated": 0,
            "greens_escalated_share": None,
            "red_recall": None,
            "over_escalations": 1,
            "false_greens": 0,
            "missed_reds": 0,
        },
        id="no-greens-no-reds-undefined-shares",
    ),
]


@pytest.mark.parametrize(("pairs", "expected"), CASES)
def test_helpdesk_figures(pairs, expected):
    rows = [row(i, t, p) for i, (t, p) in enumerate(pairs)]
    s = m.summarize(rows)
    for key, value in expected.items():
        assert s[key] == (pytest.approx(value) if isinstance(value, float) else value), key


def test_risk_metrics_counts_each_error_kind():
    truth = ["green", "green", "yellow", "yellow", "red", "red", "red"]
    pred = ["green", "yellow", "green", "yellow", "yellow", "red", "green"]
    s = m.risk_metrics(truth, pred)
    assert s["n"] == 7
    assert s["accuracy"] == pytest.approx(3 / 7)
    assert s["false_greens"] == 2  # yellow->green, red->green
    assert s["missed_reds"] == 2  # red->yellow, red->green
    assert s["over_escalations"] == 1  # green->yellow
    assert s["red_recall"] == pytest.approx(1 / 3)
    assert s["confusion"]["red"] == {"green": 1, "yellow": 1, "red": 1}
    assert s["confusion"]["green"] == {"green": 1, "yellow": 1, "red": 0}


def test_empty_rows_have_no_accuracy():
    s = m.risk_metrics([], [])
    assert s["n"] == 0 and s["accuracy"] is None and s["red_recall"] is None


def test_blocked_by_ood_counts_the_rows_the_gate_vetoed():
    rows = [
        row(0, "green", "yellow", ood_blocked=True),
        row(1, "green", "green"),
        row(2, "yellow", "yellow", ood_blocked=False),
        row(3, "red", "yellow", ood_blocked=True),
    ]
    assert m.summarize(rows)["blocked_by_ood"] == 2


def test_per_language_and_category():
    rows = [
        row(0, "green", "green", lang="en", category="billing"),
        row(1, "green", "yellow", lang="en", category="account"),
        row(2, "green", "green", lang="fr", category="account"),
        row(3, "yellow", "green", lang="fr", category="billing"),
    ]
    s = m.summarize(rows)
    assert s["per_language"]["en"]["greens_cleared"] == 0.5
    assert s["per_language"]["fr"]["false_green_ids"] == ["T-003"]
    assert s["per_language"]["fr"]["answered_automatically"] == 1.0
    assert s["per_category"]["account"]["n"] == 2
    assert s["per_category"]["account"]["greens_cleared"] == 0.5
    assert s["per_category"]["billing"]["false_greens"] == 1


def test_summarize_layers_and_languages():
    rows = [
        row(0, "green", "green", l1="none", l2="green", lang="en"),
        row(1, "red", "red", l1="red", l2="yellow", lang="fr"),
        row(2, "yellow", "red", l1="none", l2="red", lang="fr"),
    ]
    s = m.summarize(rows)
    assert s["l1_only"]["accuracy"] == pytest.approx(2 / 3)  # none counts as green
    assert s["l2_only"]["accuracy"] == pytest.approx(1 / 3)
    assert s["accuracy"] == pytest.approx(2 / 3)
    assert s["per_language"]["fr"]["n"] == 2 and s["per_language"]["fr"]["accuracy"] == 0.5
    assert s["latency_ms"]["p50"] == 101.0


@pytest.mark.parametrize(
    ("probs", "truth", "expected"),
    [
        # one bin: confidence 0.9 four times, right three times -> |0.75 - 0.9|
        ([(0.9, 0.05, 0.05)] * 4, ["green", "green", "green", "yellow"], 0.15),
        ([(1.0, 0.0, 0.0)] * 2, ["green", "green"], 0.0),
        # confidence 0.5 wrong (off by 0.5) and 0.7 right (off by 0.3), each weighing 1/2
        ([(0.5, 0.3, 0.2), (0.1, 0.2, 0.7)], ["yellow", "red"], 0.4),
    ],
)
def test_risk_ece_is_calibrations_ece(probs, truth, expected):
    rows = [
        row(i, t, "yellow", probabilities={"risk": dict(zip(("green", "yellow", "red"), p, strict=True))})
        for i, (p, t) in enumerate(zip(probs, truth, strict=True))
    ]
    assert m.risk_ece(rows) == pytest.approx(expected)


def test_risk_ece_without_probabilities():
    assert m.risk_ece([row(0, "green", "green")]) is None


def test_percentile_interpolates():
    assert m.percentile([10, 20, 30, 40], 50) == 25
    assert m.percentile([5], 95) == 5
    assert m.percentile([], 50) is None


def test_halves_are_stratified_and_disjoint():
    rows = [row(i, ["green", "yellow", "red"][i % 3], "red") for i in range(30)]
    tune, holdout = m.halves(rows)
    assert not tune & holdout and len(tune | holdout) == 30
    for label in ("green", "yellow", "red"):
        ids = {r["id"] for r in rows if r["truth"] == label}
        assert len(ids & tune) == len(ids & holdout) == 5


def test_relevel_applies_other_thresholds_and_keeps_l1():
    rows = [
        row(0, "green", "yellow", l1="none", l2="yellow", answers=answers(0.7, 0.1)),
        row(1, "red", "red", l1="red", l2="yellow", answers=answers(0.7, 0.1)),
    ]
    loose = m.relevel(rows, Thresholds(green=0.6))
    assert [r["l2"] for r in loose] == ["green", "green"]
    assert [r["predicted"] for r in loose] == ["green", "red"]  # L1's red is never lowered


def test_relevel_keeps_the_ood_veto():
    rows = [row(0, "green", "yellow", answers=answers(0.9, 0.05), ood_blocked=True)]
    assert m.relevel(rows, Thresholds(green=0.5))[0]["predicted"] == "yellow"


def test_relevel_with_one_option_order():
    variant = answers(0.95, 0.01)["risk"]
    rows = [row(0, "green", "red", l2="red", answers=answers(0.4, 0.4), risk_variants={"risk": variant})]
    assert m.relevel(rows, Thresholds())[0]["l2"] == "red"
    assert m.relevel(rows, Thresholds(), variant="risk")[0]["l2"] == "green"


def test_green_curve_trades_cleared_greens_for_false_greens():
    # greens at P(green) 0.95, 0.85, 0.6; one yellow at 0.9; one red made red by L1 at 0.98
    rows = [
        scored(0, "green", 0.95),
        scored(1, "green", 0.85),
        scored(2, "green", 0.6),
        scored(3, "yellow", 0.9),
        scored(4, "red", 0.98, 0.01, l1="red"),
    ]
    curve = {p["green"]: p for p in m.green_curve(rows, Thresholds(), grid=(0.5, 0.86, 0.91, 1.0))}
    assert curve[0.5]["greens_cleared"] == 1.0 and curve[0.5]["false_greens"] == 1
    assert curve[0.86]["greens_cleared"] == pytest.approx(1 / 3) and curve[0.86]["false_greens"] == 1
    assert curve[0.91]["greens_cleared"] == pytest.approx(1 / 3) and curve[0.91]["false_greens"] == 0
    assert curve[1.0]["greens_cleared"] == 0.0 and curve[1.0]["false_greens"] == 0


def test_threshold_study_uses_calibrations_choice_and_never_buys_false_greens():
    rows = []
    for i in range(40):
        truth = ["green", "yellow", "red", "green"][i % 4]
        # greens at P(green) 0.9, yellows at 0.85; reds carry P(red) 0.5
        p_green, p_red = {"green": (0.9, 0.05), "yellow": (0.85, 0.05), "red": (0.3, 0.5)}[truth]
        rows.append(scored(i, truth, p_green, p_red))
    out = m.threshold_study(rows)
    # calibration's rule: highest non-green P(green) 0.85 + the 0.02 margin
    assert out["chosen"]["green"] == pytest.approx(0.87)
    assert out["tune"]["false_greens"] == 0 and out["tune"]["greens_cleared"] == 1.0
    assert out["holdout"]["n"] == 20 and out["holdout"]["false_greens"] == 0
    assert out["holdout"]["red_recall"] == 1.0


def test_permutation_study_compares_one_order_with_the_average():
    one = answers(0.9, 0.05)["risk"]
    rows = [
        row(
            i,
            "green",
            "red",
            l2="red",
            answers=answers(0.5, 0.35),
            risk_variants={"risk": one, "risk@1": answers(0.1, 0.65)["risk"]},
        )
        for i in range(4)
    ]
    out = m.permutation_study(rows)
    assert out["orders"] == ["risk", "risk@1"]
    assert out["one_order"]["l2_accuracy"] == 1.0  # the canonical order alone says green
    assert out["averaged"]["l2_accuracy"] == 0.0


@pytest.mark.parametrize(
    ("scores", "labels", "expected"),
    [
        ([0.9, 0.8, 0.2, 0.1], [True, True, False, False], 1.0),
        ([0.1, 0.2, 0.8, 0.9], [True, True, False, False], 0.0),
        ([0.5, 0.5, 0.5, 0.5], [True, False, True, False], 0.5),  # ties count half
        ([0.9, 0.3, 0.5], [True, False, True], 1.0),
        ([0.4], [True], None),
    ],
)
def test_auc(scores, labels, expected):
    assert m.auc(scores, labels) == expected
