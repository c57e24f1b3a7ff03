"""var/served-rules-now.json: what rules added since `make served` change in its grades,
without a new replay.

finalLevel = max(L1, L2), so a rule can only keep a ticket from green, never make one green. Given
the served grades (docs/results/served-sources.json: per run, the false-green ids and the share of
greens cleared) and the pack they were served with, the current pack's effect is exact for false
greens (each served false green the new rules fire on is kept from green) and bounded for greens
cleared (at most the labelled greens the new rules fire on and the served pack did not were
cleared before and are not now). The served pack is rebuilt as the current rules directory less
the files added since (`--added`), and must hash to the served rules_sha.

    python scripts/rules_on_served.py --added rules/green_evidence.yaml
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from service.l1.engine import evaluate
from service.l1.pack import build_pack, load_pack, pack_files
from service.labelled import in_held_part
from service.results import ticket_text

ROOT = Path(__file__).resolve().parent.parent
TICKETS = ROOT.parent / "shared" / "data" / "tickets"
SERVED = ROOT / "docs" / "results" / "served-sources.json"
CORPUS = ROOT.parent / "shared" / "data" / "corpus" / "public-tickets.jsonl"
OUT = ROOT / "var" / "served-rules-now.json"
# graded source of served-sources.json -> (labelled file, which part of it)
GRADED = {
    "dev": (TICKETS / "dev.jsonl", "all"),
    "public-style": (ROOT / "var" / "data" / "public-style.jsonl", "all"),
    "public-style-held": (ROOT / "var" / "data" / "public-style.jsonl", "held"),
    "train-held": (TICKETS / "train.jsonl", "held"),
}


def _labelled(graded: str) -> dict[str, dict]:
    path, part = GRADED[graded]
    rows = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if part == "all" or in_held_part(row["id"]):
                rows[row["id"]] = row
    return rows


def _fires(pack, row: dict) -> bool:
    return evaluate(pack, ticket_text(row.get("subject"), row["body"])).level != "none"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--added", action="append", required=True, help="a rule file added since the served run")
    parser.add_argument("--served", default=str(SERVED))
    parser.add_argument("--rules", default=str(ROOT / "rules"), help="the pack directory (today's pack)")
    parser.add_argument("--json", default=str(OUT))
    args = parser.parse_args(argv)
    rules_dir = Path(args.rules)
    added = {Path(p).resolve() for p in args.added}
    files = {
        p.relative_to(rules_dir).as_posix(): p.read_bytes() for p in pack_files(rules_dir) if p.resolve() not in added
    }
    before, now = build_pack(files, "served pack"), load_pack(rules_dir)
    served = json.loads(Path(args.served).read_text(encoding="utf-8"))
    shas = {run["report"]["rules_sha"] for run in served["runs"]}
    if shas != {before.sha}:
        print(f"the served runs used rules_sha {sorted(shas)}; the pack less --added is {before.sha}", file=sys.stderr)
        return 1
    runs = []
    for run in served["runs"]:
        graded, report = run["graded"], run["report"]
        rows = _labelled(graded)
        greens = [row for row in rows.values() if row["risk"] == "green"]
        newly = sorted(r["id"] for r in greens if _fires(now, r) and not _fires(before, r))
        kept = sorted(i for i in report["false_green_ids"] if _fires(now, rows[i]))
        cleared = round(report["greens_cleared"] * len(greens))
        runs.append(
            {
                "graded": graded,
                "fitted_on": run["fitted_on"],
                "green_after_l1": run["green_after_l1"],
                "artifact": run["artifact"],
                "n": len(rows),
                "n_green": len(greens),
                "false_greens_served": report["false_greens"],
                "false_greens_now": report["false_greens"] - len(kept),
                "kept_from_green_now": kept,
                "greens_cleared_served": report["greens_cleared"],
                # every green the new rules fire on may have been among the cleared ones
                "greens_cleared_now_at_least": max(0, cleared - len(newly)) / len(greens) if greens else math.nan,
                "greens_newly_fired": newly,
            }
        )
    # The 150 unlabelled public tickets: which of the bundled artifact's greens the pack now holds back.
    corpus = {}
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            corpus[row["id"]] = row
    green_ids = served["unlabelled"]["green_ids"]
    unlabelled = {
        "artifact": served["unlabelled"]["artifact"],
        "n": served["unlabelled"]["n"],
        "green_served": len(green_ids),
        "held_back_now": sorted(i for i in green_ids if _fires(now, corpus[i])),
    }
    out = {
        "command": "python scripts/rules_on_served.py " + " ".join(f"--added {p}" for p in args.added),
        "served": Path(args.served).resolve().relative_to(ROOT).as_posix()
        if Path(args.served).resolve().is_relative_to(ROOT)
        else str(args.served),
        "rules_sha_served": before.sha,
        "rules_sha_now": now.sha,
        "runs": runs,
        "unlabelled": unlabelled,
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
