"""The audit's picture: how often the judge agrees with people, criterion by criterion.

Drawn from the calibration record's per-criterion counts (cases where the criterion applied,
agreements, and how often each side failed it). matplotlib is in the `offline` extra: without
it no PNG is drawn and the caller says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .calibration import CriterionAgreement


def criterion_agreement_png(criteria: Mapping[str, CriterionAgreement], path: str | Path) -> Path:
    """Left: agreement rate per criterion (n above each bar). Right: how many cases people and
    the judge each failed on it. Raises ImportError without matplotlib."""
    from matplotlib.figure import Figure

    names = [name for name, row in criteria.items() if row.n]
    fig = Figure(figsize=(9, 0.45 * max(len(names), 3) + 1.4))
    left, right = fig.subplots(1, 2, sharey=True)
    ys = range(len(names))
    rates = [criteria[n].agree / criteria[n].n for n in names]
    left.barh(ys, rates, color="#4c78a8")
    for y, name, rate in zip(ys, names, rates, strict=True):
        row = criteria[name]
        left.text(
            min(rate, 0.98),
            y,
            f" {row.agree}/{row.n}",
            va="center",
            ha="right" if rate > 0.8 else "left",
            fontsize=8,
            color="white" if rate > 0.8 else "black",
        )
    left.set_yticks(list(ys), names)
    left.invert_yaxis()
    left.set_xlim(0, 1)
    left.set_xlabel("judge agrees with people (share of cases where it applied)")
    height = 0.38
    right.barh(
        [y - height / 2 for y in ys],
        [criteria[n].human_failed for n in names],
        height=height,
        color="#54a24b",
        label="failed by people",
    )
    right.barh(
        [y + height / 2 for y in ys],
        [criteria[n].judge_failed for n in names],
        height=height,
        color="#e45756",
        label="failed by the judge",
    )
    right.set_xlabel("cases failed")
    right.legend(fontsize=7, loc="lower right")
    fig.suptitle("Judge against human verdicts, per rubric criterion")
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    return out
