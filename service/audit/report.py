"""The audit report: the false-green estimate with its Wilson interval, verdicts, gating, as JSON
and Markdown. Pure except `write_report`.

The false-green rate is the share of audited greens on which the judge failed an eliminatory
criterion (a green that needed a person). Greens are drawn uniformly within their stratum, so
that share estimates the rate among all greens; times the greens' share of the window it gives
the share of all tickets that were false greens.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path

import msgspec

from .calibration import CriterionAgreement, GatingState
from .plots import criterion_agreement_png
from .stats import wilson_interval


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


def false_green_estimate(tickets: list[AuditedTicket],
                         population: dict[str, int]) -> FalseGreenEstimate:
    greens = [t for t in tickets if t.level == "green"]
    k, n = sum(t.false_green for t in greens), len(greens)
    low, high = wilson_interval(k, n)
    total = sum(population.values())
    window_greens = population.get("green", 0)
    weight = window_greens / total if total else None
    return FalseGreenEstimate(
        greens_judged=n, false_greens=k, rate=(k / n) if n else None, low=low, high=high,
        window_greens=window_greens, window_total=total,
        share_of_all=(k / n * weight) if n and weight is not None else None,
        share_low=low * weight if weight is not None else None,
        share_high=high * weight if weight is not None else None)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def render_markdown(report: AuditReport) -> str:
    fg, gate = report.false_green, report.gating
    kappa = "n/a" if gate.kappa is None else f"{gate.kappa:.3f}"
    state = "ON: unacceptable tickets go to the audit queue" if gate.gating else \
        "OFF: verdicts are indicative only"
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
        lines += ["*Indicative only: the judge has not earned gating, so these are its opinions, "
                  "not findings.*", ""]
    lines += [
        f"{fg.false_greens} of {fg.greens_judged} audited greens needed a person: rate "
        f"**{_pct(fg.rate)}**, Wilson 95 % [{_pct(fg.low)}, {_pct(fg.high)}].",
        f"Greens were {fg.window_greens} of {fg.window_total} finished tickets in the window; "
        f"share of all tickets: {_pct(fg.share_of_all)} "
        f"[{_pct(fg.share_low)}, {_pct(fg.share_high)}].",
        "",
        "## Sample",
        "",
        "| level | in window | sampled |",
        "|---|---|---|",
    ]
    lines += [f"| {level} | {report.population.get(level, 0)} | {report.sampled.get(level, 0)} |"
              for level in ("green", "yellow", "red")]
    lines += ["", "## Unacceptable decisions", ""]
    bad = [t for t in report.tickets if t.verdict == "unacceptable"]
    if not bad:
        lines.append("None.")
    else:
        lines += ["| ticket | level | category | urgency | failed | action |",
                  "|---|---|---|---|---|---|"]
        for t in bad:
            action = "queued for audit" if t.queued else "indicative"
            lines.append(f"| {t.ticket_id} | {t.level} | {t.category} | {t.urgency} | "
                         f"{', '.join(t.failed)} | {action} |")
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
    lines = ["## Judge agreement per criterion (calibration set)", "",
             "| criterion | applied | agree | failed by people | failed by the judge |",
             "|---|---|---|---|---|"]
    lines += [f"| {name} | {row.n} | {row.agree} ({_pct(row.agree / row.n if row.n else None)}) | "
              f"{row.human_failed} | {row.judge_failed} |" for name, row in criteria.items()]
    lines += ["", f"![agreement per criterion]({png})" if png else
              "*No picture: matplotlib (the `offline` extra) is not installed.*", ""]
    return "\n".join(lines)


def write_report(report: AuditReport, out_dir: str | Path,
                 criteria: Mapping[str, CriterionAgreement] | None = None) -> tuple[Path, Path]:
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
