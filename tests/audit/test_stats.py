"""Kappa, confusion and Wilson against vectors computed by hand."""

from __future__ import annotations

import math

import pytest

from service.audit.stats import checks_needed, cohen_kappa, confusion_matrix, wilson_interval
from service.calibration.thresholds import false_green_upper

A, U = "acceptable", "unacceptable"


def _vectors() -> tuple[list[str], list[str]]:
    # 22 cases: human 13 acceptable / 9 unacceptable, judge 14 / 8, one disagreement
    # (human unacceptable, judge acceptable): 21 agreements.
    human = [A] * 13 + [U] * 9
    judge = [A] * 13 + [A] + [U] * 8
    return human, judge


def test_kappa_hand_computed_22_cases() -> None:
    human, judge = _vectors()
    agreement = cohen_kappa(human, judge)
    assert agreement.n == 22
    assert agreement.observed == pytest.approx(21 / 22)
    assert round(agreement.observed, 3) == 0.955
    # p_e = (13*14 + 9*8) / 22^2 = 254 / 484
    assert agreement.expected == pytest.approx(254 / 484)
    assert round(agreement.expected, 3) == 0.525
    assert agreement.kappa == pytest.approx((21 / 22 - 254 / 484) / (1 - 254 / 484))
    assert round(agreement.kappa, 2) == 0.90
    assert agreement.confusion == {A: {A: 13, U: 0}, U: {A: 1, U: 8}}
    assert agreement.per_class[A].precision == pytest.approx(13 / 14)
    assert agreement.per_class[A].recall == 1.0
    assert agreement.per_class[U].precision == 1.0
    assert agreement.per_class[U].recall == pytest.approx(8 / 9)
    assert agreement.per_class[U].support == 9


def test_kappa_matches_sklearn_on_random_vectors() -> None:
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    import random

    rng = random.Random(3)
    for _ in range(20):
        n = rng.randint(5, 60)
        human = [rng.choice((A, U)) for _ in range(n)]
        judge = [h if rng.random() < 0.8 else rng.choice((A, U)) for h in human]
        ours = cohen_kappa(human, judge).kappa
        theirs = sklearn_metrics.cohen_kappa_score(human, judge)
        if math.isnan(theirs):
            assert ours is None
        else:
            assert ours == pytest.approx(theirs)


def test_kappa_chance_agreement_is_zero_and_constant_judge_undefined() -> None:
    # Judge says "acceptable" to everything: agreement = share of acceptable, kappa 0.
    human = [A] * 6 + [U] * 4
    assert cohen_kappa(human, [A] * 10).kappa == pytest.approx(0.0)
    # Both raters constant and identical: p_e = 1, kappa undefined, never "perfect".
    assert cohen_kappa([A] * 5, [A] * 5).kappa is None


def test_confusion_rejects_mismatched_or_unknown_labels() -> None:
    with pytest.raises(ValueError, match="as many"):
        confusion_matrix([A], [A, U])
    with pytest.raises(ValueError, match="label outside"):
        confusion_matrix([A], ["maybe"])


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [
        # Reference values: Wilson score interval, z = 1.96 (e.g. statsmodels proportion_confint
        # method="wilson").
        (5, 10, 0.2366, 0.7634),
        (0, 10, 0.0, 0.2775),
        (1, 20, 0.0089, 0.2361),
        (10, 10, 0.7225, 1.0),
        (3, 100, 0.0103, 0.0845),
    ],
)
def test_wilson_known_values(k: int, n: int, low: float, high: float) -> None:
    got_low, got_high = wilson_interval(k, n)
    assert got_low == pytest.approx(low, abs=1e-4)
    assert got_high == pytest.approx(high, abs=1e-4)


def test_wilson_edge_cases() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


@pytest.mark.parametrize(
    "k, n, upper",
    [
        # k = 0: the bound solves (1 - u)^n = 0.05
        (0, 1, 0.95),
        (0, 10, 1 - 0.05 ** (1 / 10)),
        (0, 299, 1 - 0.05 ** (1 / 299)),
        # k = 1 of 2: P(X <= 1 | u) = 1 - u^2 = 0.05
        (1, 2, math.sqrt(0.95)),
        # nothing bounds the rate below 1
        (0, 0, 1.0),
        (3, 3, 1.0),
    ],
)
def test_false_green_upper_is_the_exact_one_sided_bound(k: int, n: int, upper: float) -> None:
    assert false_green_upper(k, n) == pytest.approx(upper, abs=1e-9)


def test_checks_needed_is_where_the_bound_first_reaches_the_rate() -> None:
    n = checks_needed(0.01)
    assert n == 299
    assert false_green_upper(0, n) <= 0.01 < false_green_upper(0, n - 1)
    assert checks_needed(0.05) == 59
