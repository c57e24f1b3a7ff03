"""The eval's outputs: the printed table, the JSON (a file or stdout), and the plots."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from service.labelled import LEVELS

COLUMNS = ("n", "accuracy", "false_greens", "missed_reds", "over_escalations", "red_recall",
           "greens_cleared", "answered_automatically")


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
    short = ("n", "accuracy", "false_g", "missed_r", "over_esc", "red_rec", "greens_clr",
             "auto")
    lines = [f"{'':16}" + "".join(f"{c:>12}" for c in short)]
    for name, metrics in (("L1 + L2 (final)", report), ("L1 only", report.get("l1_only")),
                          ("L2 only", report.get("l2_only"))):
        if metrics:
            lines.append(_line(name, metrics))
    for title, key in (("language", "per_language"), ("category", "per_category")):
        groups = report.get(key) or {}
        if groups:
            lines.append(f"per {title}:")
            lines.extend(_line(f"  {name}", metrics) for name, metrics in groups.items())
    lines.append(f"category accuracy {_fmt(report.get('category_accuracy'))}   "
                 f"ECE(risk) {_fmt(report.get('ece_risk'))}   latency ms p50 "
                 f"{_fmt(report['latency_ms']['p50'])} p95 {_fmt(report['latency_ms']['p95'])}"
                 f"   blocked by OOD gate {_fmt(report.get('blocked_by_ood'))}")
    lines.append("confusion (rows truth, columns predicted): " + "  ".join(
        f"{t}: " + "/".join(str(report["confusion"][t][p]) for p in LEVELS) for t in LEVELS))
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
