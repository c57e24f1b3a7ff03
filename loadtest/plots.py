"""Pictures of a load-test report: the accept-latency histogram and the backlog over time.

    .venv/bin/python loadtest/plots.py var/loadtest/<run>/report.json   # PNGs beside the JSON

run.py draws them after every run (accept-latency.png, backlog.png beside report.md). A report
from before the histogram was recorded gets the backlog picture only. matplotlib comes from the
`offline` extra (in `make setup`'s lock); no image carries it.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

# Accept-latency bucket edges in ms: fine where the 50 ms objective is, coarse beyond.
EDGES_MS = (
    0.0,
    1.0,
    2.0,
    3.0,
    5.0,
    7.5,
    10.0,
    15.0,
    20.0,
    30.0,
    50.0,
    75.0,
    100.0,
    150.0,
    250.0,
    500.0,
    1000.0,
    2500.0,
    5000.0,
    math.inf,
)


def histogram(values_ms: list[float], edges: tuple[float, ...] = EDGES_MS) -> dict[str, list]:
    """Counts per [edge_i, edge_i+1) bucket; the last bucket is open (JSON: null upper edge)."""
    counts = [0] * (len(edges) - 1)
    for value in values_ms:
        for i in range(len(counts)):
            if edges[i] <= value < edges[i + 1]:
                counts[i] += 1
                break
    return {"edges_ms": [None if math.isinf(e) else e for e in edges], "counts": counts}


def accept_png(report: dict[str, Any], path: Path, objective_ms: float = 50.0) -> Path | None:
    hist = report.get("results", {}).get("accept_histogram")
    if not hist or not sum(hist["counts"]):
        return None
    from matplotlib.figure import Figure

    edges, counts = hist["edges_ms"], hist["counts"]
    labels = [f"<{e:g}" if e is not None else f">={edges[-2]:g}" for e in edges[1:]]
    quant = report["results"]["accept_ms"]
    fig = Figure(figsize=(9, 3.8))
    ax = fig.add_subplot()
    ax.bar(range(len(counts)), counts, color="#4c78a8")
    ax.set_xticks(range(len(counts)), labels, rotation=45, ha="right", rotation_mode="anchor", fontsize=7)
    ax.set_yscale("symlog")
    ax.set_ylim(0, max(counts) * 3)
    ax.set_xlabel("accept latency, ms (bucket upper edge)")
    ax.set_ylabel("requests (log scale)")
    under = sum(c for c, e in zip(counts, edges[1:], strict=True) if e is not None and e <= objective_ms)
    ax.set_title(
        f"POST /v1/tickets: p50 {quant['p50']} ms, p99 {quant['p99']} ms over "
        f"{quant['n']} requests; {under}/{sum(counts)} within {objective_ms:g} ms"
    )
    objective_at = next(i for i, e in enumerate(edges[1:]) if e is None or e >= objective_ms)
    ax.axvline(objective_at + 0.5, color="#e45756", ls="--", lw=1.2, label=f"objective: p99 < {objective_ms:g} ms")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def backlog_png(report: dict[str, Any], path: Path) -> Path | None:
    samples = [s for s in report.get("samples", []) if "backlog" in s]
    if len(samples) < 2:
        return None
    from matplotlib.figure import Figure

    window = report.get("load_window") or {}
    start = window.get("start", samples[0]["t"])
    t = [s["t"] - start for s in samples]
    fig = Figure(figsize=(9, 3.8))
    ax = fig.add_subplot()
    ax.plot(t, [s["backlog"] for s in samples], color="#e45756", label="stream backlog (XLEN)")
    ax.plot(t, [s["pending"] for s in samples], color="#eeca3b", label="pending (delivered, not acked)")
    ax.set_xlabel("seconds since the load started")
    ax.set_ylabel("tickets")
    if "end" in window:
        ax.axvspan(0, window["end"] - start, color="grey", alpha=0.12, label="load")
    right = ax.twinx()
    right.plot(t, [s["results"] for s in samples], color="#4c78a8", ls=":", label="results stored")
    right.set_ylabel("results stored (cumulative)")
    lines = ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    ax.legend(lines, [line.get_label() for line in lines], fontsize=8, loc="upper left")
    cfg = report.get("config", {})
    ax.set_title(
        f"{cfg.get('rate')} tickets/s for {cfg.get('duration_s')} s, {cfg.get('workers')} worker(s): backlog over time"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def draw(report: dict[str, Any], folder: Path, stem: str = "") -> list[Path]:
    """accept-latency.png and backlog.png (prefixed with `stem-` when given) in `folder`;
    the ones the report has data for."""
    prefix = f"{stem}-" if stem else ""
    drawn = [
        accept_png(report, folder / f"{prefix}accept-latency.png"),
        backlog_png(report, folder / f"{prefix}backlog.png"),
    ]
    return [p for p in drawn if p is not None]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path, help="report JSON files")
    args = parser.parse_args(argv)
    for path in args.reports:
        stem = "" if path.name == "report.json" else path.stem
        for png in draw(json.loads(path.read_text()), path.parent, stem):
            print(png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
