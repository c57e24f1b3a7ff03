"""Pure statistics for the judge audit: Cohen's kappa, confusion matrix, per-class scores, Wilson,
and how many operator checks it takes for the false-green bound to reach a rate.

No I/O and no model here, so every number the audit reports can be checked by hand in a test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec

VERDICTS: tuple[str, str] = ("acceptable", "unacceptable")


class ClassScores(msgspec.Struct, frozen=True):
    precision: float | None  # None when the judge never predicted the class
    recall: float | None  # None when the humans never gave the class
    support: int  # how many human labels of this class


class Agreement(msgspec.Struct, frozen=True):
    """How far the judge agrees with the humans on one set of cases."""

    n: int
    observed: float  # p_o: share of cases where judge and human agree
    expected: float  # p_e: agreement expected by chance from the two marginals
    kappa: float | None  # (p_o - p_e) / (1 - p_e); None when p_e == 1 (undefined)
    kappa_se: float | None  # large-sample standard error of kappa, for a rough interval
    confusion: dict[str, dict[str, int]]  # confusion[human][judge]
    per_class: dict[str, ClassScores]


def confusion_matrix(
    human: Sequence[str], judge: Sequence[str], labels: Sequence[str] = VERDICTS
) -> dict[str, dict[str, int]]:
    """confusion[h][j] = number of cases the human labelled h and the judge labelled j."""
    if len(human) != len(judge):
        raise ValueError(f"expected as many judge labels as human labels, got {len(judge)} and {len(human)}")
    matrix = {h: dict.fromkeys(labels, 0) for h in labels}
    for h, j in zip(human, judge, strict=True):
        if h not in matrix or j not in matrix:
            raise ValueError(f"label outside {list(labels)}: human {h!r}, judge {j!r}")
        matrix[h][j] += 1
    return matrix


def cohen_kappa(human: Sequence[str], judge: Sequence[str], labels: Sequence[str] = VERDICTS) -> Agreement:
    """Cohen's kappa of two raters over the same cases, with the pieces that make it up."""
    matrix = confusion_matrix(human, judge, labels)
    n = len(human)
    if n == 0:
        raise ValueError("kappa needs at least one case")
    observed = sum(matrix[c][c] for c in labels) / n
    human_marg = {c: sum(matrix[c].values()) for c in labels}
    judge_marg = {c: sum(matrix[h][c] for h in labels) for c in labels}
    expected = sum(human_marg[c] * judge_marg[c] for c in labels) / (n * n)
    if expected >= 1.0:
        # Both raters used a single, identical label: agreement is certain by chance, kappa is
        # undefined. Reporting 1.0 would let a constant judge earn gating, so it stays None.
        kappa = None
        kappa_se = None
    else:
        kappa = (observed - expected) / (1.0 - expected)
        kappa_se = math.sqrt(observed * (1.0 - observed) / (n * (1.0 - expected) ** 2))
    per_class = {
        c: ClassScores(
            precision=(matrix[c][c] / judge_marg[c]) if judge_marg[c] else None,
            recall=(matrix[c][c] / human_marg[c]) if human_marg[c] else None,
            support=human_marg[c],
        )
        for c in labels
    }
    return Agreement(
        n=n, observed=observed, expected=expected, kappa=kappa, kappa_se=kappa_se, confusion=matrix, per_class=per_class
    )


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (95 % by default).

    Chosen over the normal approximation because the audit's counts are small and the rate is
    near zero, where the Wald interval collapses to [0, 0] and lies about its width.
    """
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"expected 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return (0.0, 1.0)  # no evidence: the whole range
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def checks_needed(max_rate: float, confidence: float = 0.95) -> int:
    """The fewest checked greens, all right, whose upper bound is at most `max_rate`:
    (1 - max_rate)^n <= 1 - confidence (299 for 1 % at 95 %)."""
    if not 0.0 < max_rate < 1.0:
        raise ValueError(f"max_rate: expected a number in (0, 1), got {max_rate}")
    return math.ceil(math.log(1.0 - confidence) / math.log(1.0 - max_rate))
