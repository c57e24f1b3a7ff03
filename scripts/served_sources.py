"""docs/results/served-sources.json: each labelled source graded as served (L1 + L2 + max) by an
artifact fitted without it, with the green threshold chosen as shipped and after L1
(`recalibrate --green-after-l1`), and the bundled artifact on the 150 unlabelled public tickets.

`train-held` and `public-style-held` are the parts of train.jsonl and of the public-style labels
that the breadth rules were not written against (service.labelled.in_held_part, as `triage
rules report` splits them; docs/l1.md, "Breadth"): with dev, the labelled tickets on which
neither the heads nor the rules have seen the graded tickets, so the honest grades of a
threshold that leans on L1. `public-style-held` is graded by the artifact that grades all of
public-style (one fit per set of fitted sources).

`make served` runs it. Artifacts go to var/served/<run>/ and are reused when present (delete the
folder to refit); the replay cache makes every step after the first replay a matter of minutes.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from service.labelled import in_held_part

ROOT = Path(__file__).resolve().parent.parent
TRIAGE = str(ROOT / ".venv" / "bin" / "triage")
TICKETS = ROOT.parent / "shared" / "data" / "tickets"
SOURCES = {
    "train": TICKETS / "train.jsonl",
    "dev": TICKETS / "dev.jsonl",
    "public-style": ROOT / "var" / "data" / "public-style.jsonl",
    "train-fit": ROOT / "var" / "data" / "train-fit.jsonl",
    "train-held": ROOT / "var" / "data" / "train-held.jsonl",
    "public-style-held": ROOT / "var" / "data" / "public-style-held.jsonl",
}
CORPUS = ROOT.parent / "shared" / "data" / "corpus" / "public-tickets.jsonl"
OUT = ROOT / "docs" / "results" / "served-sources.json"
# (graded source, the sources fitted on, green threshold after L1)
RUNS = (
    ("dev", ("train", "public-style"), False),
    ("public-style", ("train", "dev"), False),
    ("public-style-held", ("train", "dev"), False),
    ("train-held", ("train-fit", "dev", "public-style"), False),
    ("dev", ("train", "public-style"), True),
    ("public-style", ("train", "dev"), True),
    ("public-style-held", ("train", "dev"), True),
    ("train-held", ("train-fit", "dev", "public-style"), True),
)


# Each source split by in_held_part: (its fit part's name or None, its held part's name).
HELD_SPLITS = {"train": ("train-fit", "train-held"), "public-style": (None, "public-style-held")}


def _split_held_parts() -> None:
    """train-fit and train-held, and public-style's held part, as `triage rules report` splits
    them."""
    for source, (fit_name, held_name) in HELD_SPLITS.items():
        fit, held = [], []
        for line in SOURCES[source].read_text(encoding="utf-8").splitlines():
            if line.strip():
                part = held if in_held_part(str(json.loads(line).get("id", ""))) else fit
                part.append(line + "\n")
        for name, lines in ((fit_name, fit), (held_name, held)):
            if name is not None:
                SOURCES[name].parent.mkdir(parents=True, exist_ok=True)
                SOURCES[name].write_text("".join(lines), encoding="utf-8")


def _run(args: list[str]) -> None:
    print("+ triage " + shlex.join(args), file=sys.stderr, flush=True)
    subprocess.run([TRIAGE, *args], check=True, cwd=ROOT)


def _artifact(fitted_on: tuple[str, ...], after_l1: bool) -> tuple[Path, str]:
    folder = ROOT / "var" / "served" / ("fit-" + "+".join(fitted_on) + ("-l1" if after_l1 else ""))
    args = [
        "recalibrate",
        "-q",
        *(a for s in fitted_on for a in ("--from-file", str(SOURCES[s]))),
        "--out",
        str(folder),
    ]
    if after_l1:
        args.append("--green-after-l1")
    if not sorted(folder.glob("*/artifact.json")):
        _run(args)
    newest = sorted(folder.glob("*/artifact.json"))[-1].parent
    return newest, "triage " + shlex.join(args)


def _served(name: str, file: Path, artifact: Path, rows_dir: Path) -> dict:
    out = rows_dir / f"{name}.json"
    _run(
        [
            "study",
            "served",
            "--data",
            f"{name}={file}",
            "--calibration",
            str(artifact),
            "--rows",
            str(rows_dir),
            "--json",
            str(out),
        ]
    )
    return json.loads(out.read_text())["sources"][name]


def _unlabelled(rows_dir: Path) -> dict:
    """The 150 public tickets with a placeholder risk (they have no labels): levels only."""
    artifact = sorted((ROOT / "calibration").glob("*/artifact.json"))[-1].parent
    placeholder = rows_dir / "corpus-150.jsonl"
    with open(CORPUS, encoding="utf-8") as src, open(placeholder, "w", encoding="utf-8") as dst:
        for line in src:
            row = json.loads(line)
            record = {"id": row["id"], "subject": row.get("subject"), "body": row["body"], "risk": "yellow"}
            dst.write(json.dumps({**record, "language": row.get("language", "")}) + "\n")
    _served("corpus-150", placeholder, artifact, rows_dir)
    rows = [json.loads(line) for line in (rows_dir / "corpus-150.rows.jsonl").read_text().splitlines()]
    levels = Counter(r["predicted"] for r in rows)
    return {
        "source": "shared/data/corpus/public-tickets.jsonl "
        "(150 externally written tickets, never labelled or trained on)",
        "artifact": artifact.name,
        "command": "triage study served --data corpus-150=<the 150 with a placeholder risk> "
        f"--calibration calibration/{artifact.name}",
        "n": len(rows),
        "green": levels["green"],
        "yellow": levels["yellow"],
        "red": levels["red"],
        "held_back_by_gate": sum(r["ood_blocked"] for r in rows),
        "green_ids": sorted(r["id"] for r in rows if r["predicted"] == "green"),
    }


def main() -> int:
    missing = [str(SOURCES[name]) for name in ("train", "dev", "public-style") if not SOURCES[name].exists()]
    if not missing:
        _split_held_parts()
    if missing:
        print(
            f"served_sources: missing {missing} (data/public-style/README.md joins the public-style texts)",
            file=sys.stderr,
        )
        return 2
    # The fits are single-threaded (fit.single_thread_blas): two at a time on two cores. The
    # replay cache is shared, so a fit whose tickets are all cached never loads the model.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, min(2, os.cpu_count() or 1))) as pool:
        fits = sorted({(fitted_on, after_l1) for _, fitted_on, after_l1 in RUNS})
        made = dict(zip(fits, pool.map(lambda fit: _artifact(*fit), fits), strict=True))
    artifacts = [made[(fitted_on, after_l1)] for _, fitted_on, after_l1 in RUNS]
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        rows_dir = Path(tmp)
        for (graded, fitted_on, after_l1), (artifact, artifact_command) in zip(RUNS, artifacts, strict=True):
            report = _served(graded, SOURCES[graded], artifact, rows_dir)
            runs.append(
                {
                    "graded": graded,
                    "fitted_on": " + ".join(fitted_on),
                    "green_after_l1": after_l1,
                    "artifact": artifact.name,
                    "artifact_command": artifact_command,
                    "command": f"triage study served --data {graded}=… --calibration {artifact.relative_to(ROOT)}",
                    "report": {k: v for k, v in report.items() if k not in ("halves", "green_curve", "per_category")},
                }
            )
        unlabelled = _unlabelled(rows_dir)
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "",
    )
    document = {
        "runs": runs,
        "unlabelled": unlabelled,
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores ({cpu})",
        "command": "make served",
    }
    OUT.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
