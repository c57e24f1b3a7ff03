"""`triage bench`: L1 and L2 benchmarks in one run on this machine, written to one JSON file."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import msgspec

from .machine import describe
from .output import STDOUT, write_json
from .progress import add_quiet_argument, progress
from .results import ticket_text
from .settings import settings_or_exit

SECTIONS = ("l1", "l2", "batching")


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def cmd_bench(args: argparse.Namespace) -> int:
    from .logs import configure_logging

    settings = settings_or_exit("triage bench")
    configure_logging("warning")
    dev = Path(args.dev or settings.dev_set)
    corpus = Path(args.corpus or settings.corpus)
    novel = Path(args.novel or settings.train_set)
    report: dict[str, object] = {
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": "triage bench "
        + " ".join(f"--{k} {v}" for k, v in vars(args).items() if k in ("json", "tickets", "only") and v),
        "machine": describe(),
    }
    if args.only in ("all", "l1"):
        from .l1 import bench as l1_bench

        # One step: L1 is timed over every small ticket, 32 KiB tickets, the dense worst case,
        # then tickets the process has not read.
        with progress(total=1, desc="bench l1", unit="run", quiet=args.quiet) as bar:
            report["l1"] = l1_bench.run(dev, corpus, novel_path=novel)
            bar.update(1)
    if args.only in ("all", "l2"):
        from .l2 import bench as l2_bench

        tickets = _read_jsonl(dev)[: args.tickets]
        report["l2"] = l2_bench.run(settings, tickets, quiet=args.quiet)
    if args.only == "batching":
        from .l2 import batching

        # Not part of "all": it loads the model with room for 8 tickets and takes minutes.
        texts = [ticket_text(t.get("subject"), t["body"]) for t in _read_jsonl(dev)[: args.tickets]]
        report["batching"] = batching.measure(settings, texts)
    if args.json != STDOUT:
        report = keep_other_sections(Path(args.json), report)
    write_json(msgspec.json.format(msgspec.json.encode(report), indent=2), args.json)
    if args.json != STDOUT:
        print(Path(args.json).read_text())
    return 0


def keep_other_sections(out: Path, report: dict) -> dict:
    """The sections not re-measured in this run are kept from the existing file, each under its
    own created_at, command and machine, so the file never mixes two runs without saying so."""
    if not out.exists():
        return report
    try:
        previous = json.loads(out.read_text())
    except (OSError, ValueError):
        return report
    if not isinstance(previous, dict):
        return report
    for other in SECTIONS:
        if other in report or other not in previous:
            continue
        kept = dict(previous[other])
        for key in ("created_at", "command", "machine"):
            kept.setdefault(key, previous.get(key))
        report[other] = kept
    return report


def register(subparsers) -> None:
    bench = subparsers.add_parser("bench", help="measure L1 and L2 latency on this machine")
    bench.add_argument("--json", default="bench/results.json", help="where to write the results ('-': stdout)")
    bench.add_argument("--dev", default="", help="labelled dev set (default TRIAGE_DEV_SET)")
    bench.add_argument("--corpus", default="", help="unlabelled public corpus (default TRIAGE_CORPUS)")
    bench.add_argument(
        "--novel", default="", help="tickets L1 is timed on once each, unread before (default TRIAGE_TRAIN_SET)"
    )
    bench.add_argument("--tickets", type=int, default=16, help="tickets for the L2 comparison")
    bench.add_argument(
        "--only", choices=("all", *SECTIONS), default="all", help="all = l1 and l2; batching runs only when named"
    )
    add_quiet_argument(bench)
    bench.set_defaults(func=cmd_bench)
