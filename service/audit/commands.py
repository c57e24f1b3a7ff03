"""`triage audit calibrate` and `triage audit run`: the judge audit's command line.

calibrate: judge the calibration set, measure Cohen's kappa against the human verdicts, write
           calibration.json (default var/audit/calibration.json) and optionally a --json summary.
run:       sample recent results, judge them, write the report (var/audit/audit-<stamp>.json/.md),
           queue unacceptable tickets while gating, publish {p}:audit:state.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import msgspec
import structlog

from ..output import human_stream, write_json
from ..progress import add_quiet_argument, progress
from .calibration import calibrate, gating_state, load_record, write_record
from .cases import DEFAULT_CASES_PATH, load_cases
from .judge import METHODS, Judge
from .plots import criterion_agreement_png
from .rubric import DEFAULT_RUBRIC_DIR, RubricError, load_rubric

log = structlog.get_logger()

# An offline job: the deadline only guards against a hung decode. The first call also evaluates
# the rubric prefix, which took over 120 s for the 1.5B on a loaded 2-core machine.
JUDGE_TIMEOUT_S = 600.0
DEFAULT_METHOD = "logits"  # measured against "generated" on the calibration set: docs/audit.md


def _settings():
    from ..settings import settings_or_exit

    return settings_or_exit("triage audit")


def _audit_dir(settings) -> Path:
    return Path(settings.var_dir) / "audit"


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--judge-model",
        default="",
        metavar="PATH|0.5b|1.5b",
        help="judge GGUF: a path or a bundled size (default TRIAGE_JUDGE_MODEL_PATH, else the classifier's model)",
    )
    parser.add_argument(
        "--method",
        choices=METHODS,
        default=DEFAULT_METHOD,
        help="one logits question per criterion, or one constrained generation",
    )
    parser.add_argument("--rubric", default=str(DEFAULT_RUBRIC_DIR), help="rubric folder")
    parser.add_argument(
        "--cases", default=str(DEFAULT_CASES_PATH), help="bundled calibration set (JSON Lines, read only)"
    )
    parser.add_argument(
        "--operator-cases",
        default="",
        help="operators' verdicts on audited tickets, appended by `run` and read "
        "by `calibrate` (default <TRIAGE_VAR_DIR>/audit/operator_cases.jsonl)",
    )
    parser.add_argument("--kappa-min", type=float, default=None, help="gating threshold (default TRIAGE_KAPPA_MIN)")
    add_quiet_argument(parser)


def register(subparsers) -> None:
    audit = subparsers.add_parser("audit", help="LLM-judge audit of triage decisions")
    actions = audit.add_subparsers(dest="audit_command", required=True, metavar="ACTION")

    cal = actions.add_parser("calibrate", help="measure the judge's agreement with people")
    _common(cal)
    cal.add_argument("--out", default="", help="calibration record (default <TRIAGE_VAR_DIR>/audit/calibration.json)")
    cal.add_argument(
        "--json",
        default="",
        metavar="OUT",
        help="also write n, observed, expected, kappa, confusion, gating, stale ('-': stdout)",
    )
    cal.add_argument(
        "--limit", type=int, default=0, help="N evenly spaced cases only (smoke runs; every kind represented)"
    )
    cal.set_defaults(func=cmd_calibrate)

    run = actions.add_parser("run", help="judge a sample of recent results and report")
    _common(run)
    run.add_argument(
        "--calibration", default="", help="calibration record (default <TRIAGE_VAR_DIR>/audit/calibration.json)"
    )
    run.add_argument("--out-dir", default="", help="report folder (default var/audit/)")
    run.add_argument("--sample", type=int, default=60, help="tickets to judge")
    run.add_argument("--window", type=int, default=5000, help="newest results to sample from")
    run.add_argument("--green-share", type=float, default=0.6, help="share of the sample drawn from greens")
    run.add_argument(
        "--check-greens",
        type=int,
        default=10,
        metavar="N",
        help="sampled greens sent to the audit queue for operators to check, "
        "whatever the judge says (the false-green rate on real traffic)",
    )
    run.add_argument(
        "--checks-window-days", type=float, default=30.0, help="operator checks counted in the false-green bound"
    )
    run.add_argument("--seed", type=int, default=None, help="sampling seed (reproducible runs)")
    run.add_argument("--json", default="", metavar="OUT", help="also write the report here ('-': stdout)")
    run.set_defaults(func=cmd_run)

    build = actions.add_parser("cases", help="build the bundled calibration set from dev labels")
    build.add_argument("--dev", default="", metavar="FILE.jsonl", help="labelled dev set (default TRIAGE_DEV_SET)")
    build.add_argument("--out", default=str(DEFAULT_CASES_PATH), help="cases file to write")
    build.add_argument("--seed", type=int, default=6)
    build.set_defaults(func=cmd_cases)


def cmd_cases(args: argparse.Namespace) -> int:
    from .cases import build_calibration_set, write_cases

    dev = Path(args.dev or _settings().dev_set)
    if not dev.exists():
        print(f"triage audit cases: {dev}: no such file (pass --dev or set TRIAGE_DEV_SET)", file=sys.stderr)
        return 2
    rows = [json.loads(line) for line in dev.read_text(encoding="utf-8").splitlines() if line.strip()]
    cases = build_calibration_set(rows, seed=args.seed)
    write_cases(cases, args.out)
    verdicts = [c.human_verdict for c in cases]
    print(
        f"wrote {len(cases)} cases to {args.out}: {verdicts.count('acceptable')} acceptable, "
        f"{verdicts.count('unacceptable')} unacceptable"
    )
    return 0


def _judge(settings, args, cache=None) -> Judge:
    from ..model_fetch import ModelError
    from .backend import L2Backend, resolve_judge_model

    try:
        rubric = load_rubric(args.rubric)
        path, sha = resolve_judge_model(settings, args.judge_model)
    except (RubricError, ModelError) as error:
        print(f"triage audit: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    backend = L2Backend.load(
        path,
        sha,
        rubric.framing,
        n_threads=settings.n_threads,
        n_ctx=settings.n_ctx,
        answer_orders=rubric.answer_orders,
        timeout_s=max(JUDGE_TIMEOUT_S, settings.l2_timeout_s),
        answer_words=rubric.answer_words,
    )
    return Judge(backend, rubric, method=args.method, cache=cache)


def _gating(record, judge: Judge, kappa_min: float):
    """The gating state of this judge (model, rubric, method) against the calibration record."""
    return gating_state(
        record,
        judge_model_sha256=judge.model_sha256,
        rubric_sha256=judge.rubric.sha256,
        method=judge.method,
        kappa_min=kappa_min,
    )


def _operator_cases(settings, args) -> Path:
    return Path(args.operator_cases) if args.operator_cases else _audit_dir(settings) / "operator_cases.jsonl"


def calibration_set(bundled: str | Path, operator: str | Path) -> tuple[list, list[str]]:
    """The bundled cases, then the operators' cases (when any), each source once; and the
    files read."""
    cases, seen, used = [], set(), []
    for path in (Path(bundled), Path(operator)):
        if path == Path(operator) and not path.exists():
            continue
        used.append(str(path))
        for case in load_cases(path):
            if case.source not in seen:
                seen.add(case.source)
                cases.append(case)
    return cases, used


def spread(cases: list, limit: int) -> list:
    """`limit` cases evenly spaced through the set: the file is grouped by kind, so its first
    N cases would all be acceptable and kappa undefined."""
    if limit >= len(cases):
        return list(cases)
    return [cases[i * len(cases) // limit] for i in range(limit)]


def _fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def cmd_calibrate(args: argparse.Namespace) -> int:
    settings = _settings()
    kappa_min = settings.kappa_min if args.kappa_min is None else args.kappa_min
    cases, used = calibration_set(args.cases, _operator_cases(settings, args))
    if args.limit:
        cases = spread(cases, args.limit)
    judge = _judge(settings, args)
    print(
        f"audit calibrate: {len(cases)} cases, judge {judge.backend.model_name} "
        f"({judge.method}), rubric {judge.rubric.sha256[:12]}",
        file=sys.stderr,
    )

    agreed = 0
    with progress(total=len(cases), desc="audit calibrate", unit="case", quiet=args.quiet) as bar:

        def on_case(index: int, result) -> None:
            nonlocal agreed
            agreed += result.human_verdict == result.judge_verdict
            bar.set_postfix_str(f"agree {agreed}/{index + 1}", refresh=False)
            bar.update(1)

        record, _ = calibrate(judge, cases, cases_path=" + ".join(used), on_case=on_case)
    out = Path(args.out) if args.out else _audit_dir(settings) / "calibration.json"
    write_record(record, out)
    try:
        png = criterion_agreement_png(record.criteria, out.with_name(out.stem + "-criteria.png"))
    except ImportError:
        png = None  # matplotlib is the offline extra's; the numbers are in the record anyway
    state = _gating(record, judge, kappa_min)
    summary_to = human_stream(args.json or None)
    _print_calibration(record, state, out, file=summary_to)
    print(f"wrote {png}" if png else "no picture: matplotlib (the offline extra) is not installed", file=summary_to)
    if args.json:
        summary = {
            "n": record.n,
            "observed": record.observed,
            "expected": record.expected,
            "kappa": record.kappa,
            "confusion": record.confusion,
            "gating": state.gating,
            "stale": state.stale,
        }
        write_json(msgspec.json.format(msgspec.json.encode(summary)), args.json)
    return 0


def _print_calibration(record, state, out: Path, file=None) -> None:
    se = f" (se {record.kappa_se:.3f})" if record.kappa_se is not None else ""
    lines = [
        f"n={record.n}  observed={record.observed:.3f}  expected={record.expected:.3f}  "
        f"kappa={_fmt(record.kappa)}{se}  ({record.elapsed_s:.0f} s)",
        f"green decisions only: kappa={_fmt(record.green_kappa)}; level-only baseline "
        f"(every green unacceptable): kappa={_fmt(record.baseline_kappa)}",
        "confusion (rows human, columns judge):",
    ]
    for human, row in record.confusion.items():
        lines.append(f"  {human:13s} " + "  ".join(f"{j}={n}" for j, n in row.items()))
    for label, scores in record.per_class.items():
        lines.append(
            f"  {label:13s} precision={_fmt(scores.precision)} recall={_fmt(scores.recall)} support={scores.support}"
        )
    lines.append("per criterion (cases where it applied):")
    for criterion, row in record.criteria.items():
        lines.append(
            f"  {criterion:22s} n={row.n:3d} agree={row.agree:3d} "
            f"human_failed={row.human_failed:3d} judge_failed={row.judge_failed:3d}"
        )
    lines.append(f"disagreements ({len(record.disagreements)}):")
    for d in record.disagreements:
        p = ", ".join(f"{k}={_fmt(v, 2)}" for k, v in d.p_fail.items())
        lines.append(
            f"  {d.case_id} {d.source} [{d.kind}] level {d.level_given}: human "
            f"{d.human_verdict} {d.human_failed}, judge {d.judge_verdict} "
            f"{d.judge_failed}  p_fail {p}"
        )
    for case_id, why in record.unjudged.items():
        lines.append(f"  not judged: {case_id}: {why}")
    gate = "ON" if state.gating else "OFF (" + "; ".join(state.reasons) + ")"
    lines.append(f"gating: {gate}")
    lines.append(f"wrote {out}")
    print("\n".join(lines), file=file)


def cmd_run(args: argparse.Namespace) -> int:
    from ..store import AuditStore, Keys, RedisVerdictCache
    from ..store.connection import connect
    from .job import run_audit
    from .report import write_report

    settings = _settings()
    kappa_min = settings.kappa_min if args.kappa_min is None else args.kappa_min
    client = connect(settings, allow_embedded=True)
    keys = Keys(settings.redis_prefix)
    judge = _judge(settings, args, cache=RedisVerdictCache(client, keys))
    record_path = Path(args.calibration) if args.calibration else _audit_dir(settings) / "calibration.json"
    record = load_record(record_path)
    state = _gating(record, judge, kappa_min)
    operator_cases = _operator_cases(settings, args)
    operator_cases.parent.mkdir(parents=True, exist_ok=True)
    report = run_audit(
        AuditStore(client, keys),
        judge,
        state,
        cases_path=operator_cases,
        sample_size=args.sample,
        window=args.window,
        green_share=args.green_share,
        rng=random.Random(args.seed),
        max_age_s=settings.result_ttl_s,
        quiet=args.quiet,
        check_greens=args.check_greens,
        max_false_green_rate=settings.max_false_green_rate,
        checks_window_s=args.checks_window_days * 86400,
    )
    json_path, md_path = write_report(
        report, args.out_dir or _audit_dir(settings), criteria=record.criteria if record else None
    )
    if args.json:
        write_json(json_path.read_bytes(), args.json)
    fg, check = report.false_green, report.checked_greens
    print(
        f"audit: {len(report.tickets)} judged, false greens {fg.false_greens}/"
        f"{fg.greens_judged} (rate {_fmt(fg.rate)}, Wilson 95% [{fg.low:.3f}, {fg.high:.3f}]), "
        f"gating {'ON' if state.gating else 'OFF'}, queued {len(report.queued)}, "
        f"indicative {len(report.indicative)}\n"
        f"operator checks: {check.false_greens}/{check.checked} false greens, 95% upper bound "
        f"{check.upper:.4f} (max {check.max_rate}), {check.queued} greens queued for a check\n"
        f"report: {md_path}\n        {json_path}",
        file=human_stream(args.json or None),
    )
    return 0
