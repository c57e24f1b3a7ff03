"""The audit report: the false-green estimate with its Wilson interval, verdicts, gating, as JSON
and Markdown. Pure except `write_report`.

The false-green rate is the share of audited greens on which the judge failed an eliminatory
criterion (a green that needed a person). Greens are drawn uniformly within their stratum, so
that share estimates the rate among all greens; times the greens' share of the window it gives
the share of all tickets that were false greens.

The judge's figure is only as good as the judge. The figure that counts is the operators': some
of the sampled greens go to the audit queue whatever the judge said, and the operators'
decisions on them give the false-green rate on real traffic with an exact one-sided 95 % upper
bound, compared with TRIAGE_MAX_FALSE_GREEN_RATE (the rate the green threshold promises).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path

import msgspec

# The same exact bound `triage recalibrate` states for its green threshold, so the figure on
# real traffic is comparable with the promise made on the labelled tickets.
from ..calibration.thresholds import false_green_upper
from ..results import LEVELS
from .calibration import CriterionAgreement, GatingState
from .plots import criterion_agreement_png
from .stats import checks_needed, wilson_interval


class AuditedTicket(msgspec.Struct, frozen=True):
    ticket_id: str
    level: str
    category: str | None
    urgency: int | None
    verdict: str
    failed: list[str]
    false_green: bool  # green with an eliminatory criterion failed
    p_fail: dict[str, float | None]
    cached: bool = False
    queued: bool = False  # pushed to the "audit" queue (only when gating)
    checked: bool = False  # a sampled green sent to operators for a check, whatever the verdict


class FalseGreenEstimate(msgspec.Struct, frozen=True):
    greens_judged: int
    false_greens: int
    rate: float | None  # among greens; None when no green was judged
    low: float  # Wilson 95 %
    high: float
    window_greens: int
    window_total: int
    share_of_all: float | None  # rate * greens / total in the window
    share_low: float | None
    share_high: float | None


class CheckedGreens(msgspec.Struct, frozen=True):
    """Served greens drawn uniformly by the audit and checked by operators (in the window)."""

    checked: int  # operator decisions on them
    false_greens: int  # decisions that raised the level or marked a false green
    rate: float | None  # false_greens / checked; None before the first check
    upper: float  # one-sided 95 % Clopper-Pearson upper bound on the rate
    max_rate: float  # TRIAGE_MAX_FALSE_GREEN_RATE
    exceeded: bool  # upper > max_rate: the bound is not shown on real traffic
    checks_needed: int  # checks, all right, it takes for the upper bound to reach max_rate
    window_days: float
    queued: int  # greens this run sent to the audit queue for a check


def checked_greens(false_greens: int, checked: int, max_rate: float, window_s: float, queued: int) -> CheckedGreens:
    upper = false_green_upper(false_greens, checked)
    return CheckedGreens(
        checked=checked,
        false_greens=false_greens,
        rate=false_greens / checked if checked else None,
        upper=upper,
        max_rate=max_rate,
        exceeded=upper > max_rate,
        checks_needed=checks_needed(max_rate),
        window_days=round(window_s / 86400, 3),
        queued=queued,
    )


class AuditReport(msgspec.Struct, frozen=True, kw_only=True):
    run_at: str  # ISO 8601 UTC
    finished_at: float  # unix time
    judge_model: str
    judge_model_sha256: str
    rubric_sha256: str
    method: str
    gating: GatingState
    population: dict[str, int]  # distinct finished tickets per level in the window
    sampled: dict[str, int]
    false_green: FalseGreenEstimate
    unacceptable: list[str]
    queued: list[str]  # pushed to the audit queue (gating on)
    indicative: list[str]  # judged unacceptable but not queued (gating off)
    unjudged: dict[str, str]  # ticket id -> why (expired, model failure)
    operator_cases_added: list[str]
    tickets: list[AuditedTicket]
    elapsed_s: float
    checked_greens: CheckedGreens | None = None


def false_green_estimate(tickets: list[AuditedTicket], population: dict[str, int]) -> FalseGreenEstimate:
    greens = [t for t in tickets if t.level == "green"]
    k, n = sum(t.false_green for t in greens), len(greens)
    low, high = wilson_interval(k, n)
    total = sum(population.values())
    window_greens = population.get("green", 0)
    weight = window_greens / total if total else None
    return FalseGreenEstimate(
        greens_judged=n,
        false_greens=k,
        rate=(k / n) if n else None,
        low=low,
        high=high,
        window_greens=window_greens,
        window_total=total,
        share_of_all=(k / n * weight) if n and weight is not None else None,
        share_low=low * weight if weight is not None else None,
        share_high=high * weight if weight is not None else None,
    )


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _checked_markdown(check: CheckedGreens | None) -> list[str]:
    if check is None:
        return []
    lines = [
        "## False greens checked by operators",
        "",
        f"{check.false_greens} of {check.checked} served greens checked by operators in the "
        f"last {check.window_days:g} days needed a person: rate **{_pct(check.rate)}**, "
        f"one-sided 95 % upper bound **{check.upper:.2%}** "
        f"(maximum {check.max_rate:.2%}, TRIAGE_MAX_FALSE_GREEN_RATE).",
        f"This run sent {check.queued} sampled greens to the audit queue for a check.",
    ]
    if not check.exceeded:
        lines.append("The upper bound is within the maximum on real traffic.")
    elif check.false_greens:
        lines.append(
            "**Operators found false greens and the upper bound is above the maximum.** "
            "Raise the green threshold or recalibrate with these decisions."
        )
    else:
        lines.append(
            f"Not yet shown on real traffic: it takes {check.checks_needed} checked "
            f"greens, all right, for the upper bound to reach {check.max_rate:.2%}."
        )
    return [*lines, ""]


def render_markdown(report: AuditReport) -> str:
    fg, gate = report.false_green, report.gating
    kappa = "n/a" if gate.kappa is None else f"{gate.kappa:.3f}"
    state = "ON: unacceptable tickets go to the audit queue" if gate.gating else "OFF: verdicts are indicative only"
    lines = [
        f"# Triage audit, {report.run_at}",
        "",
        f"- Judge: `{report.judge_model}` (sha256 `{report.judge_model_sha256[:12]}`), "
        f"method {report.method}, rubric `{report.rubric_sha256[:12]}`",
        f"- Calibration: kappa {kappa} (min {gate.kappa_min:.2f}), "
        f"{'stale' if gate.stale else 'fresh'}, calibrated {gate.calibrated_at or 'never'}",
        f"- Gating: **{state}**",
    ]
    lines += [f"  - {reason}" for reason in gate.reasons]
    lines += [
        "",
        "## False greens",
        "",
    ]
    if not gate.gating:
        lines += ["*Indicative only: the judge has not earned gating, so these are its opinions, not findings.*", ""]
    lines += [
        f"{fg.false_greens} of {fg.greens_judged} audited greens needed a person: rate "
        f"**{_pct(fg.rate)}**, Wilson 95 % [{_pct(fg.low)}, {_pct(fg.high)}].",
        f"Greens were {fg.window_greens} of {fg.window_total} finished tickets in the window; "
        f"share of all tickets: {_pct(fg.share_of_all)} "
        f"[{_pct(fg.share_low)}, {_pct(fg.share_high)}].",
        "",
    ]
    lines += _checked_markdown(report.checked_greens)
    lines += [
        "## Sample",
        "",
        "| level | in window | sampled |",
        "|---|---|---|",
    ]
    lines += [f"| {level} | {report.population.get(level, 0)} | {report.sampled.get(level, 0)} |" for level in LEVELS]
    lines += ["", "## Unacceptable decisions", ""]
    bad = [t for t in report.tickets if t.verdict == "unacceptable"]
    if not bad:
        lines.append("None.")
    else:
        lines += ["| ticket | level | category | urgency | failed | action |", "|---|---|---|---|---|---|"]
        for t in bad:
            action = "queued for audit" if t.queued else "indicative"
            lines.append(
                f"| {t.ticket_id} | {t.level} | {t.category} | {t.urgency} | {', '.join(t.failed)} | {action} |"
            )
    if report.unjudged:
        lines += ["", "## Not judged", ""]
        lines += [f"- {ticket}: {why}" for ticket, why in report.unjudged.items()]
    if report.operator_cases_added:
        lines += ["", "## Operator verdicts added to the calibration set", ""]
        lines += [f"- {ticket}" for ticket in report.operator_cases_added]
    lines += ["", f"Run took {report.elapsed_s:.1f} s.", ""]
    return "\n".join(lines)


def criteria_markdown(criteria: Mapping[str, CriterionAgreement], png: str | None) -> str:
    """The judge's agreement with people per criterion (from the calibration record), with the
    picture beside the report when one was drawn."""
    lines = [
        "## Judge agreement per criterion (calibration set)",
        "",
        "| criterion | applied | agree | failed by people | failed by the judge |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {name} | {row.n} | {row.agree} ({_pct(row.agree / row.n if row.n else None)}) | "
        f"{row.human_failed} | {row.judge_failed} |"
        for name, row in criteria.items()
    ]
    lines += [
        "",
        f"![agreement per criterion]({png})"
        if png
        else "*No picture: matplotlib (the `offline` extra) is not installed.*",
        "",
    ]
    return "\n".join(lines)


def write_report(
    report: AuditReport, out_dir: str | Path, criteria: Mapping[str, CriterionAgreement] | None = None
) -> tuple[Path, Path]:
    """audit-<UTC stamp>.json and .md under `out_dir` (default var/audit/); with the calibration
    record's `criteria`, also their agreement table and audit-<stamp>-criteria.png."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.fromtimestamp(report.finished_at, dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    json_path, md_path = out / f"audit-{stamp}.json", out / f"audit-{stamp}.md"
    json_path.write_bytes(msgspec.json.format(msgspec.json.encode(report), indent=2) + b"\n")
    text = render_markdown(report)
    if criteria:
        png = out / f"audit-{stamp}-criteria.png"
        try:
            criterion_agreement_png(criteria, png)
        except ImportError:
            png = None
        text += "\n" + criteria_markdown(criteria, png.name if png else None)
    md_path.write_text(text, encoding="utf-8")
    return json_path, md_path
