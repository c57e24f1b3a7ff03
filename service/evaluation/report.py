"""The eval's outputs: the printed table, the JSON (a file or stdout), and the plots."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from service.labelled import LEVELS

COLUMNS = (
    "n",
    "accuracy",
    "false_greens",
    "missed_reds",
    "over_escalations",
    "red_recall",
    "greens_cleared",
    "answered_automatically",
)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _line(name: str, metrics: dict, width: int = 16) -> str:
    return f"{name:{width}}" + "".join(f"{_fmt(metrics.get(c)):>12}" for c in COLUMNS)


def table(report: dict) -> str:
    """The printed summary: one line per layer, per language and category, the confusion
    matrix, and the false greens by ticket id."""
    short = ("n", "accuracy", "false_g", "missed_r", "over_esc", "red_rec", "greens_clr", "auto")
    lines = [f"{'':16}" + "".join(f"{c:>12}" for c in short)]
    for name, metrics in (
        ("L1 + L2 (final)", report),
        ("L1 only", report.get("l1_only")),
        ("L2 only", report.get("l2_only")),
    ):
        if metrics:
            lines.append(_line(name, metrics))
    for title, key in (("language", "per_language"), ("category", "per_category")):
        groups = report.get(key) or {}
        if groups:
            lines.append(f"per {title}:")
            lines.extend(_line(f"  {name}", metrics) for name, metrics in groups.items())
    lines.append(
        f"category accuracy {_fmt(report.get('category_accuracy'))}   "
        f"ECE(risk) {_fmt(report.get('ece_risk'))}   latency ms p50 "
        f"{_fmt(report['latency_ms']['p50'])} p95 {_fmt(report['latency_ms']['p95'])}"
        f"   blocked by OOD gate {_fmt(report.get('blocked_by_ood'))}"
    )
    lines.append(
        "confusion (rows truth, columns predicted): "
        + "  ".join(f"{t}: " + "/".join(str(report["confusion"][t][p]) for p in LEVELS) for t in LEVELS)
    )
    ids = report.get("false_green_ids")
    if ids:
        lines.append("false greens: " + ", ".join(ids))
    return "\n".join(lines)


def write_json(report: dict, destination: str) -> None:
    """The report as JSON at `destination`; "-" writes it to stdout."""
    text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    if destination == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    Path(destination).parent.mkdir(parents=True, exist_ok=True)
    Path(destination).write_text(text, encoding="utf-8")


def write_plots(report: dict, directory: str | Path) -> list[Path]:
    """PNGs beside the JSON: the confusion matrix of L1 + L2 and, when the report has one, the
    greens-cleared / false-greens curve against the green threshold. Returns the paths."""
    # Offline only: matplotlib is in the `offline` extra, never imported by serving.
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []

    fig = Figure(figsize=(4.2, 3.6))
    ax = fig.add_subplot()
    counts = [[report["confusion"][t][p] for p in LEVELS] for t in LEVELS]
    ax.imshow(counts, cmap="Blues")
    top = max(max(row) for row in counts) or 1
    for i, row in enumerate(counts):
        for j, value in enumerate(row):
            ax.text(j, i, str(value), ha="center", va="center", color="white" if value > top / 2 else "black")
    ax.set_xticks(range(3), LEVELS)
    ax.set_yticks(range(3), LEVELS)
    ax.set_xlabel("predicted (L1 + L2)")
    ax.set_ylabel("labelled")
    ax.set_title(f"confusion, n = {report['n']}")
    fig.tight_layout()
    written.append(out / "confusion.png")
    fig.savefig(written[-1], dpi=100)

    curve = report.get("green_curve")
    if curve:
        fig = Figure(figsize=(6, 3.6))
        ax = fig.add_subplot()
        x = [p["green"] for p in curve]
        ax.step(
            x,
            [100 * (p["greens_cleared"] or 0.0) for p in curve],
            where="post",
            color="tab:green",
            label="greens cleared (%)",
        )
        ax.set_xlabel("green threshold (P(green) needed)")
        ax.set_ylabel("greens cleared (%)")
        ax.set_ylim(0, 100)
        other = ax.twinx()
        false_greens = [p["false_greens"] for p in curve]
        other.step(x, false_greens, where="post", color="tab:red", label="false greens")
        other.set_ylabel("false greens (tickets)")
        other.set_ylim(0, max(1, *false_greens) * 1.1)
        other.yaxis.set_major_locator(MaxNLocator(integer=True))
        served = (report.get("thresholds") or {}).get("green")
        if served is not None:
            ax.axvline(served, color="grey", linestyle="--", label=f"served {served:.3f}")
        lines = ax.get_legend_handles_labels()
        more = other.get_legend_handles_labels()
        ax.legend(lines[0] + more[0], lines[1] + more[1], loc="lower left", fontsize="small")
        ax.set_title("cleared greens and false greens against the green threshold")
        fig.tight_layout()
        written.append(out / "green-threshold.png")
        fig.savefig(written[-1], dpi=100)
    return written
