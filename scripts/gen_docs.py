"""Fill the generated blocks of README.md and docs/*.md from the result files.

A block is `<!-- generated:NAME -->` ... `<!-- /generated -->`; NAME is one of RENDERERS below,
each reading a result file the measuring command wrote (bench/results.json, docs/results/*.json),
so a figure in a generated block is never typed by hand. `make docs` rewrites the blocks;
`--check` only reports stale ones (exit 1), which tests/test_docs.py runs.

    python scripts/gen_docs.py [--check]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(<!-- generated:(?P<name>[a-z0-9.-]+) -->\n)(?P<body>.*?)(<!-- /generated -->)",
                   re.DOTALL)
LEVELS = ("green", "yellow", "red")


def _json(relative: str) -> dict[str, Any]:
    return json.loads((ROOT / relative).read_text(encoding="utf-8"))


def _pct(value: float | None) -> str:
    """One decimal, halves rounded up (11.25 % -> 11.3 %), as a person would write it."""
    if value is None:
        return "–"
    percent = Decimal(repr(round(value * 100, 9))).quantize(Decimal("0.1"), ROUND_HALF_UP)
    return f"{percent} %"


def _ms(value: float) -> str:
    return f"{value:,.0f}"


def _auto(metrics: dict[str, Any]) -> float:
    """Share of tickets answered green (automatically), from the confusion matrix."""
    confusion = metrics["confusion"]
    return sum(confusion[truth].get("green", 0) for truth in LEVELS) / metrics["n"]


def bench_l2() -> str:
    report = _json("bench/results.json")
    l2 = report["l2"]
    run = {key: l2.get(key, report.get(key)) for key in ("command", "created_at")}
    same = l2["same_answers_as_json"]
    suffix = sum(l2["suffix_tokens"].values())
    rows = [
        "| path | median ms per ticket | tokens evaluated per ticket | ratio to JSON |",
        "|---|---:|---:|---:|",
        f"| (a) a JSON object (category, risk, confidence, reasoning) generated under a grammar "
        f"| {_ms(l2['json_ms_median'])} | ticket + instruction, then "
        f"{l2['json_generated_tokens_median']} generated | 1 |",
        f"| (b) logits, all {l2['questions']} questions | **{_ms(l2['logits_ms_median'])}** | "
        f"{l2['tokens_per_ticket_median']} = {l2['ticket_tokens_median']} + {suffix} | "
        f"**{l2['ratio']:.2f}×** |",
        f"| (b') logits, the answers the JSON gives ({', '.join(same['questions'])}) | "
        f"{_ms(same['logits_ms_median'])} | | {same['ratio']:.2f}× |",
        f"| first question alone | {_ms(l2['first_question_ms'])} | | |",
    ]
    kv = l2["kv_sharing"]
    notes = [
        f"- An extra question costs {_ms(l2['extra_question_ms'])} ms = "
        f"{l2['extra_question_share'] * 100:.1f} % of the first; the system context "
        f"({l2['system_tokens']} tokens) re-evaluated per ticket: "
        f"{l2['system_tokens_reevaluated']} tokens.",
        f"- Sharing the ticket's KV: fused {_ms(kv['fused_ms_median'])} ms, parallel "
        f"{_ms(kv['parallel_ms_median'])} ms, rewind {_ms(kv['rewind_ms_median'])} ms; served: "
        f"{kv['served_mode']}; largest probability difference from rewind "
        f"{kv['max_probability_difference_vs_rewind']:.3f}.",
        f"- {l2['n_tickets']} dev tickets, model {l2['model']}, {l2['n_threads']} threads, "
        f"peak RSS {l2['peak_rss_mb']:.0f} MB; `{run['command']}` at {run['created_at']}.",
    ]
    return "\n".join(rows) + "\n\n" + "\n".join(notes) + "\n"


def models() -> str:
    runs = {"0.5B raw": "docs/results/dev-0.5b.json", "1.5B raw": "docs/results/dev-1.5b.json",
            "0.5B calibrated (holdout)": "docs/results/holdout-0.5b-calibrated.json",
            "1.5B calibrated (holdout)": "docs/results/holdout-1.5b-calibrated.json"}
    data = {name: _json(path) for name, path in runs.items()}

    def line(label: str, cell: Callable[[dict[str, Any]], str]) -> str:
        return f"| {label} | " + " | ".join(cell(run) for run in data.values()) + " |"

    return "\n".join([
        "| | " + " | ".join(runs) + " |",
        "|---|" + "---:|" * len(runs),
        line("tickets", lambda r: str(r["n"])),
        line("level accuracy, L1 + L2", lambda r: _pct(r["accuracy"])),
        line("false greens", lambda r: str(r["false_greens"])),
        line("red recall", lambda r: _pct(r["red_recall"])),
        line("answered automatically (green)", lambda r: _pct(_auto(r))),
        line("L2 alone: accuracy / red recall",
             lambda r: f"{_pct(r['l2_only']['accuracy'])} / {_pct(r['l2_only']['red_recall'])}"),
        line("category accuracy", lambda r: _pct(r["category_accuracy"])),
        line("ms per ticket, p50 / p95",
             lambda r: f"{_ms(r['latency_ms']['p50'])} / {_ms(r['latency_ms']['p95'])}"),
    ]) + "\n\nSources: " + ", ".join(f"[{Path(p).name}]({p})" for p in runs.values()) + ".\n"


RENDERERS: dict[str, Callable[[], str]] = {
    "bench-l2": bench_l2,
    "models": models,
}


def _fix_links(text: str, doc: Path) -> str:
    """Links are written relative to the repository root; a doc under docs/ needs ../."""
    if doc.parent.name != "docs":
        return text
    return re.sub(r"\]\((?!https?:|#|\.\./)", "](../", text)


def render(doc: Path) -> str:
    text = doc.read_text(encoding="utf-8")

    def fill(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in RENDERERS:  # a block another command writes (e.g. `triage study`)
            return match.group(0)
        return match.group(1) + _fix_links(RENDERERS[name](), doc) + match.group(4)

    return BLOCK.sub(fill, text)


def stale(docs: list[Path] = DOCS) -> list[str]:
    """The documents whose generated blocks differ from what the result files say."""
    return [_name(doc) for doc in docs if render(doc) != doc.read_text(encoding="utf-8")]


def _name(doc: Path) -> str:
    return str(doc.relative_to(ROOT)) if doc.is_relative_to(ROOT) else doc.name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report stale blocks, write nothing")
    args = parser.parse_args(argv)
    if args.check:
        out_of_date = stale()
        for name in out_of_date:
            print(f"{name}: generated blocks are stale; run `make docs`", file=sys.stderr)
        return 1 if out_of_date else 0
    for doc in DOCS:
        new = render(doc)
        if new != doc.read_text(encoding="utf-8"):
            doc.write_text(new, encoding="utf-8")
            print(f"updated {_name(doc)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
