"""`triage recalibrate`: registers the recalibration sub-command on the `triage` console script."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from service.calibration.recalibrate import DEFAULT_FEATURES, DEFAULT_GATE
from service.calibration.replay import FEATURE_SETS
from service.progress import add_quiet_argument
from service.progress import progress as progress_bar


def _positive(minimum: int):
    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {raw!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def cmd_recalibrate(args: argparse.Namespace) -> int:
    from service.calibration.fit import Refused
    from service.calibration.recalibrate import Options, RecalibrateError, command_line, run
    from service.labelled import LabelledFileError
    from service.settings import settings_or_exit

    if args.green_after_l1 and not args.from_file:  # a usage error: before settings and logging
        print("triage recalibrate: --green-after-l1 needs --from-file (labelled texts)", file=sys.stderr)
        return 2
    settings = settings_or_exit("triage recalibrate")
    min_per_class = args.min_per_class
    if min_per_class is None:
        min_per_class = settings.calibration_min_per_class
    corpus = args.corpus
    if corpus is None:
        # The dev set is the starting corpus where it exists; elsewhere decisions stand alone.
        corpus = settings.dev_set if Path(settings.dev_set).exists() else ""
    opts = Options(
        from_file=args.from_file,
        out=args.out,
        folds=args.folds,
        min_per_class=min_per_class,
        corpus=corpus or None,
        seed=args.seed,
        cache_dir=args.cache_dir,
        command=command_line(),
        features=args.features,
        gate=None if args.gate == "none" else args.gate,
        green_after_l1=args.green_after_l1,
    )
    bars: dict[str, Any] = {}

    def progress(done: int, total: int, ticket: str) -> None:
        bar = bars.get("replay")
        if bar is None or bar.total != total or bar.n > done:
            if bar is not None:
                bar.close()
            bar = bars["replay"] = progress_bar(total=total, desc="replay", unit="ticket", quiet=args.quiet)
        bar.update(done - bar.n)
        bar.set_postfix_str(ticket)

    def step(stage: str, fold: int, folds: int, question: str) -> None:
        # One bar over every question fit: the final fit, then each outer fold of the nested
        # cross-validation that grades it (the figures in the report).
        bar = bars.get("fit")
        if bar is None:
            if "replay" in bars:
                bars["replay"].close()
            bar = bars["fit"] = progress_bar(total=None, desc="fit", unit="question", quiet=args.quiet)
        bar.update(1)
        bar.set_postfix_str(question if stage == "final" else f"{question}, fold {fold}/{folds}")

    out = args.out or settings.calibration_dir
    try:
        outcome = run(settings, opts, progress=progress, step=step)
    except Refused as exc:
        print(
            f"triage recalibrate: refused: {exc}. Nothing was written; the current artifact in {out} is untouched.",
            file=sys.stderr,
        )
        return 3
    except (RecalibrateError, LabelledFileError) as exc:
        print(f"triage recalibrate: {exc}", file=sys.stderr)
        return 2
    meta = outcome.meta
    for bar in bars.values():
        bar.close()
    print(f"wrote {outcome.path} (report: {outcome.path / 'report.md'})")
    for name, q in meta.questions.items():
        print(
            f"  {name:<26} {q.method:<12} ECE {q.ece_before:.3f} -> {q.ece_after:.3f}  "
            f"NLL {q.nll_before:.3f} -> {q.nll_after:.3f}"
        )
    for name, why in meta.skipped.items():
        print(f"  {name:<26} uncalibrated: {why}")
    t = meta.thresholds
    print(
        f"  thresholds: green {t.green:.3f}, red {t.red:.2f}, flags "
        + ", ".join(f"{k} {v:.2f}" for k, v in t.flags.items())
    )
    if meta.evaluation is not None:
        ev = meta.evaluation.nested
        print(
            f"  nested CV: accuracy {ev.accuracy:.1%}, false greens {ev.false_greens}, "
            f"red recall {ev.red_recall:.1%}, green rate {ev.green_rate:.1%}"
        )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "recalibrate",
        help="fit calibration and thresholds from operator decisions",
        description="Fits, per question, temperature/vector scaling and a learned head on the "
        "hidden state, keeps the lowest cross-validated NLL, chooses thresholds "
        "(zero false greens, then red recall 0.9), and writes a versioned artifact "
        "with its report. Workers load it without a restart. Refuses (writing "
        "nothing) when there are too few labels or the fit is degenerate.",
    )
    parser.add_argument(
        "--from-file",
        metavar="FILE.jsonl",
        action="append",
        help="labelled JSONL (risk policy format) replayed through the model, "
        "instead of the decisions stream and the corpus; repeat it to "
        "join several sources (each named after its file)",
    )
    parser.add_argument(
        "--features",
        default=DEFAULT_FEATURES,
        metavar="SPEC",
        help="hidden-state features the heads read: names of "
        f"{', '.join(FEATURE_SETS)} joined by '+' "
        f"(default {DEFAULT_FEATURES})",
    )
    parser.add_argument(
        "--gate",
        default=DEFAULT_GATE,
        metavar="SPEC",
        help=f"the green gate's features, or 'none' for no gate (default {DEFAULT_GATE})",
    )
    add_quiet_argument(parser)
    parser.add_argument("--out", metavar="DIR", help="artifact directory (default TRIAGE_CALIBRATION_DIR)")
    parser.add_argument("--folds", metavar="K", type=_positive(2), default=5, help="cross-validation folds (default 5)")
    parser.add_argument(
        "--min-per-class",
        metavar="N",
        type=_positive(1),
        default=None,
        help="refuse below N labels in any class of risk or a red flag; "
        "category/urgency below N are left uncalibrated "
        "(default TRIAGE_CALIBRATION_MIN_PER_CLASS, 15)",
    )
    parser.add_argument(
        "--corpus",
        metavar="FILE.jsonl",
        default=None,
        help="labelled starting corpus replayed and joined with the decisions "
        "(default: TRIAGE_DEV_SET when present; '' for none; ignored with "
        "--from-file)",
    )
    parser.add_argument("--seed", type=int, default=0, help="fold assignment seed")
    parser.add_argument(
        "--green-after-l1",
        action="store_true",
        help="choose the green threshold only on tickets the rule pack leaves at none (as "
        "served, L1 keeps the others from green); with --from-file; measured in "
        "docs/calibration.md, off by default",
    )
    parser.add_argument(
        "--cache-dir",
        metavar="DIR",
        default=None,
        help="replayed answers and hidden states (default <TRIAGE_VAR_DIR>/calibration-cache)",
    )
    parser.set_defaults(func=cmd_recalibrate)
