"""docs/results/served-{before,after}-<name>.json: what one rule file changes as served.

Each labelled source is graded by the artifact `make served` fitted without it (green threshold
as shipped), once with today's pack less the rule file and once with today's pack. The artifact
and the replayed answers are the same in both, so the difference is the rules' alone (a refit
from a new replay moves a borderline ticket or two, so packs are compared on one artifact). Reads
var/served/ and the replay cache that `make served` leaves; no model run.

    python scripts/served_rule_effect.py --rule rules/green_evidence.yaml --name evidence
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/ is no package: its sources and paths
from served_sources import ROOT, SOURCES, TRIAGE  # noqa: E402

SERVED = ROOT / "docs" / "results" / "served-sources.json"
RESULTS = ROOT / "docs" / "results"


def _artifacts(served: dict) -> dict[Path, list[str]]:
    """Artifact folder -> the sources it grades in the served run (threshold as shipped)."""
    graded: dict[Path, list[str]] = {}
    for run in served["runs"]:
        if run["green_after_l1"]:
            continue
        folder = ROOT / "var" / "served" / ("fit-" + run["fitted_on"].replace(" + ", "+")) / run["artifact"]
        graded.setdefault(folder, []).append(run["graded"])
    return graded


def _grade(rules_dir: Path, artifacts: dict[Path, list[str]]) -> dict[str, dict]:
    sources: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n, (folder, graded) in enumerate(artifacts.items()):
            out = Path(tmp) / f"{n}.json"
            data = [a for g in graded for a in ("--data", f"{g}={SOURCES[g]}")]
            args = ["study", "served", "-q", *data, "--calibration", str(folder), "--json", str(out)]
            print("+ triage " + shlex.join(args), file=sys.stderr, flush=True)
            env = {**os.environ, "TRIAGE_RULES_DIR": str(rules_dir)}
            subprocess.run([TRIAGE, *args], check=True, cwd=ROOT, env=env)
            for name, report in json.loads(out.read_text())["sources"].items():
                keep = {k: v for k, v in report.items() if k not in ("halves", "green_curve", "per_category")}
                sources[name] = keep | {"calibration": folder.name}
    return sources


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rule", required=True, help="a rule file of rules/ (today's pack holds it)")
    parser.add_argument("--name", required=True, help="names the output files: served-{before,after}-NAME.json")
    args = parser.parse_args(argv)
    rules, rule = ROOT / "rules", Path(args.rule).resolve()
    if not rule.is_file() or not rule.is_relative_to(rules):
        print(f"served_rule_effect: {args.rule} is not a file of {rules}", file=sys.stderr)
        return 2
    if not SERVED.exists():
        print(f"served_rule_effect: {SERVED} is missing: run `make served` first", file=sys.stderr)
        return 2
    artifacts = _artifacts(json.loads(SERVED.read_text()))
    missing = [str(f) for f in artifacts if not (f / "artifact.json").exists()]
    if missing:
        print(f"served_rule_effect: {missing} not found: `make served` fits them", file=sys.stderr)
        return 2
    command = f"python scripts/served_rule_effect.py --rule {rule.relative_to(ROOT)} --name {args.name}"
    with tempfile.TemporaryDirectory() as tmp:
        without = Path(tmp) / "rules"
        shutil.copytree(rules, without, ignore=lambda folder, names: [n for n in names if Path(folder, n) == rule])
        for variant, rules_dir, described in (
            ("before", without, f"today's pack less {rule.relative_to(ROOT)}, via TRIAGE_RULES_DIR"),
            ("after", rules, "today's pack"),
        ):
            document = {"command": command, "rules_dir": described, "sources": _grade(rules_dir, artifacts)}
            path = RESULTS / f"served-{variant}-{args.name}.json"
            path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
