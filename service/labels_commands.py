"""`triage labels join`: a labelled file from labels kept apart from their texts.

The public-style labels (data/public-style/labels.jsonl) carry no ticket text: the texts are
someone else's (CC BY-NC) and stay out of the repository. Given a local copy of the texts (the
corpus CSV, a folder of its pages, or JSONL with id, subject, body), this writes the labelled
file `triage recalibrate`, `eval` and `study` read, matching each label to its text by the
text's sha256.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmd_join(args: argparse.Namespace) -> int:
    import msgspec

    from service.labelled import LabelledFileError, join_labels

    try:
        records, missing = join_labels(args.texts, args.labels)
    except LabelledFileError as exc:
        print(f"triage labels join: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(b"".join(msgspec.json.encode(r) + b"\n" for r in records))
    print(f"wrote {len(records)} labelled tickets to {out}", file=sys.stderr)
    if missing:
        print(
            f"triage labels join: {len(missing)} labels found no text (first: {', '.join(missing[:5])})",
            file=sys.stderr,
        )
        return 1
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("labels", help="labelled files from labels kept apart from texts")
    sub = parser.add_subparsers(dest="labels_command", required=True)
    join = sub.add_parser("join", help="join texts and labels by the text's sha256")
    join.add_argument(
        "--texts",
        required=True,
        metavar="TEXTS",
        help="JSONL with id, subject, body; or the corpus CSV (subject and body columns); "
        "or a folder of its pages saved as <offset>.txt",
    )
    join.add_argument(
        "--labels",
        required=True,
        metavar="LABELS.jsonl",
        help="labels with text_sha256 (data/public-style/labels.jsonl)",
    )
    join.add_argument("--out", required=True, metavar="OUT.jsonl")
    join.set_defaults(func=cmd_join)
