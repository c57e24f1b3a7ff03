"""`triage rules …`: check a pack, explain a text, report L1 on a labelled set.

`register(subparsers)` adds the `rules` command; every sub-command sets `func(args) -> int`
on the parsed namespace (0 ok, 1 failure, 2 an invalid setting) for service/cli.py to call;
the settings (only needed without a pack path) come from `settings_or_exit`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from service.l1.engine import evaluate
from service.l1.pack import PackError, RulePack, load_pack
from service.l1.report import (
    corpus_fires,
    measure,
    read_jsonl,
    render,
    render_languages,
    summary,
    targets,
    write,
)
from service.labelled import in_held_part
from service.results import ticket_text


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    rules = subparsers.add_parser("rules", help="L1 rule packs: check, explain, report")
    commands = rules.add_subparsers(dest="rules_command", required=True, metavar="COMMAND")

    check = commands.add_parser("check", help="validate a rule pack and run its examples")
    check.add_argument("path", nargs="?", help="pack file or directory (default: TRIAGE_RULES_DIR)")
    check.set_defaults(func=check_command)

    explain = commands.add_parser("explain", help="show which rules fire on a text, and where")
    explain.add_argument("text", help='the ticket body ("-" reads standard input)')
    explain.add_argument("--subject", help="ticket subject, joined as service.results.ticket_text")
    explain.add_argument("--rules", help="pack file or directory (default: TRIAGE_RULES_DIR)")
    explain.set_defaults(func=explain_command)

    report = commands.add_parser("report", help="L1 alone on a labelled JSONL set, as Markdown")
    report.add_argument("--data", required=True, help="labelled tickets (JSON Lines)")
    report.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="FILE[@fit|@held]",
        help="another labelled set for the per-language table (repeatable); "
        "@fit / @held: the part of it rules were written against, or not",
    )
    report.add_argument("--json", help="write the per-language figures and green fires as JSON")
    report.add_argument("--before", help="a --json file from an earlier pack, shown beside")
    report.add_argument("--out", help="Markdown file to update (default: print)")
    report.add_argument("--corpus", help="unlabelled tickets to count rule fires on (JSON Lines)")
    report.add_argument("--rules", help="pack file or directory (default: TRIAGE_RULES_DIR)")
    report.set_defaults(func=report_command)

    latency = commands.add_parser("latency", help="the latency table of docs/l1.md, from a bench file")
    latency.add_argument("--results", default="bench/results.json", help="written by `triage bench`")
    latency.add_argument("--out", help="Markdown file whose GENERATED latency block to update")
    latency.set_defaults(func=latency_command)


def _rules_path(given: str | None) -> str:
    if given:
        return given  # a pack named on the command line needs no settings
    from service.settings import settings_or_exit

    return settings_or_exit("triage rules").rules_dir


def _load(given: str | None) -> RulePack | None:
    path = _rules_path(given)
    try:
        return load_pack(path)
    except PackError as error:
        print(f"rules BROKEN: {len(error.problems)} problem(s) in {path}", file=sys.stderr)
        for problem in error.problems:
            print(f"  {problem}", file=sys.stderr)
        return None


def check_command(args: argparse.Namespace) -> int:
    pack = _load(args.path)
    if pack is None:
        return 1
    examples = sum(len(rule.spec.examples.must_match) + len(rule.spec.examples.must_not_match) for rule in pack.rules)
    print(
        f"rules OK: {len(pack.rules)} rules in {len(pack.files)} file(s) at {pack.path}, "
        f"{examples} examples behave, {len(pack.sets)} pattern sets"
    )
    print(f"rules_sha {pack.sha}")
    return 0


def explain_command(args: argparse.Namespace) -> int:
    pack = _load(args.rules)
    if pack is None:
        return 1
    body = sys.stdin.read() if args.text == "-" else args.text
    text = ticket_text(args.subject, body)
    result = evaluate(pack, text)
    print(
        f"L1 level: {result.level}  ({len(result.rules)} hit(s), {result.elapsed_ms:.3f} ms, "
        f"rules_sha {result.rules_sha[:16]}…)"
    )
    for hit in result.rules:
        start, end = hit.span
        print(f"  {hit.level:<6} {hit.flag:<26} {hit.id:<36} [{start}:{end}] {hit.text!r}")
        rule = pack.rule(hit.id)
        print(f"         {rule.spec.description}")
    if result.rules:
        print("\n" + _highlight(text, [hit.span for hit in result.rules]))
    return 0


def _highlight(text: str, spans: list[tuple[int, int]]) -> str:
    """The text with every hit between »« (overlapping spans merged; an empty span, the hit of a
    rule that fires on no match, marks nothing)."""
    merged: list[list[int]] = []
    for start, end in sorted(span for span in spans if span[1] > span[0]):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out, last = [], 0
    for start, end in merged:
        out.append(text[last:start] + "»" + text[start:end] + "«")
        last = end
    out.append(text[last:])
    return "".join(out)


def report_command(args: argparse.Namespace) -> int:
    pack = _load(args.rules)
    if pack is None:
        return 1
    try:
        rows = read_jsonl(args.data)
        corpus_rows = read_jsonl(args.corpus) if args.corpus else None
        extra = {_set_name(path): _part(path) for path in args.also}
        before = json.loads(Path(args.before).read_text(encoding="utf-8")) if args.before else None
    except (OSError, ValueError) as error:
        print(f"cannot read tickets: {error}", file=sys.stderr)
        return 1
    measured = measure(pack, rows)
    sets = {Path(args.data).name: measured} | {name: measure(pack, data) for name, data in extra.items()}
    languages: list[str] = []
    for name, one in sets.items():
        # a set the earlier run did not measure gets no "before" columns rather than zeros
        old = before.get("data", {}).get(name) if before is not None else None
        languages += render_languages(name, one, old) + [""]
    if args.json:
        result = {
            "rules_sha": pack.sha,
            "rules": len(pack.rules),
            "data": {name: summary(one) for name, one in sets.items()},
        }
        Path(args.json).write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    command = "triage rules report " + " ".join(shlex.quote(part) for part in _argv(args))
    markdown = render(
        pack,
        measured,
        command=command,
        date=dt.date.today().isoformat(),
        data_name=Path(args.data).name,
        corpus=corpus_fires(pack, corpus_rows) if corpus_rows is not None else None,
        corpus_name=Path(args.corpus).name if args.corpus else "",
        languages=languages[:-1],
    )
    if args.out:
        write(args.out, markdown)
        print(f"wrote {args.out}")
    else:
        print(markdown, end="")
    failed = [target for target in targets(measured) if not target.met]
    for target in targets(measured):
        mark = "ok " if target.met else "MISSED"
        print(f"  {mark} {target.name}: {target.value} (limit {target.limit})")
    return 1 if failed else 0


def latency_command(args: argparse.Namespace) -> int:
    from service.l1 import bench

    try:
        report = json.loads(Path(args.results).read_text(encoding="utf-8"))
        report["l1"]["rules_sha"]
    except (OSError, ValueError, KeyError) as error:
        print(f"cannot read the l1 section of {args.results}: {error!r}", file=sys.stderr)
        return 1
    command = "triage rules latency --results " + shlex.quote(args.results)
    if args.out:
        command += " --out " + shlex.quote(args.out)
    markdown = bench.render(report, args.results, command)
    if args.out:
        write(args.out, markdown, bench.DOC_BEGIN, bench.DOC_END)
        print(f"wrote {args.out}")
    else:
        print(markdown, end="")
    return 0


def _set_name(spec: str) -> str:
    path, _, part = spec.partition("@")
    return Path(path).name + (f"@{part}" if part else "")


def _part(spec: str) -> list[dict[str, Any]]:
    """`FILE`, or `FILE@fit` / `FILE@held`: the two parts of a set rules were written against.

    `held` is what no rule was written against (service.labelled.in_held_part: a fixed third
    of train.jsonl, the second part of the public-style labels); `fit` is the rest.
    """
    path, _, part = spec.partition("@")
    rows = read_jsonl(path)
    if not part:
        return rows
    if part not in ("fit", "held"):
        raise ValueError(f"{spec}: the part after @ must be fit or held")
    return [row for row in rows if in_held_part(str(row.get("id", ""))) == (part == "held")]


def _argv(args: argparse.Namespace) -> list[str]:
    parts = ["--data", args.data]
    for path in args.also:
        parts += ["--also", path]
    for flag in ("out", "corpus", "rules", "json", "before"):
        if getattr(args, flag):
            parts += [f"--{flag}", getattr(args, flag)]
    return parts
