"""`triage eval`: the sub-command that replays a labelled file (or re-grades a ROWS file)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from service.progress import add_quiet_argument, progress

# Identity of a run, carried over when a report is recomputed from its rows.
IDENTITY_KEYS = (
    "model",
    "prompt_sha",
    "rules_sha",
    "calibrated",
    "l1_present",
    "mode",
    "n_threads",
    "calibration",
    "thresholds",
)


def _say(message: str) -> None:
    print(f"triage eval: {message}", file=sys.stderr, flush=True)


def cmd_eval(args: argparse.Namespace) -> int:
    from service.logs import configure_logging
    from service.settings import SettingsError, load_settings

    overrides = {}
    if args.model_size:
        overrides["model_size"] = args.model_size
    if args.model:
        overrides["model_path"] = args.model
    try:
        settings = load_settings(**overrides)
    except SettingsError as error:
        _say(f"invalid setting: {error}")
        return 2
    configure_logging("warning" if settings.log_level == "info" else settings.log_level)
    return main(args, settings)


def main(args: argparse.Namespace, settings: Any) -> int:
    from service.evaluation.report import table, write_json
    from service.evaluation.run import EvalError

    try:
        if args.from_rows:
            report, _ = from_rows(args)
        else:
            report, _ = replay(args, settings)
    except EvalError as error:
        _say(str(error))
        return 2
    write_json(report, args.json)
    if args.plots:
        from service.evaluation.report import write_plots

        for path in write_plots(report, args.plots):
            _say(f"plot: {path}")
    # With the JSON on stdout the table goes to stderr, so `--json - | jq` reads clean JSON.
    print(table(report), file=sys.stderr if args.json == "-" else sys.stdout)
    return 0


def _thresholds(value: Any) -> Any:
    import msgspec

    from service.l2.decision import Thresholds

    return msgspec.convert(value, Thresholds)


def from_rows(args: argparse.Namespace) -> tuple[dict, list[dict]]:
    """The report recomputed from a ROWS file (no model); identity keys from the previous JSON."""
    from service.evaluation.metrics import analysis, green_curve, summarize, summarize_halves
    from service.evaluation.run import EvalError, read_rows

    try:
        rows = read_rows(args.from_rows)
    except (OSError, ValueError) as error:
        raise EvalError(f"rows file {args.from_rows}: {error}") from None
    previous: dict = {}
    if args.json != "-" and Path(args.json).exists():
        previous = json.loads(Path(args.json).read_text(encoding="utf-8"))
    report = summarize(rows)
    report["halves"] = summarize_halves(rows)
    report.update({k: previous[k] for k in IDENTITY_KEYS if k in previous})
    thresholds = _rows_thresholds(args, previous, rows)
    report["green_curve"] = green_curve(rows, thresholds) if thresholds is not None else None
    if args.analysis:
        report["analysis"] = analysis(rows)
    return report, rows


def _rows_thresholds(args: argparse.Namespace, previous: dict, rows: list[dict]) -> Any:
    """The thresholds the rows were decided with, when anything says which."""
    from service.l2.decision import Thresholds

    if previous.get("thresholds"):
        return _thresholds(previous["thresholds"])
    choice = args.calibration or ""
    if choice and choice.lower() != "none":
        from service.calibration.artifact import ArtifactError, load_artifact
        from service.evaluation.run import EvalError

        try:
            return load_artifact(choice).thresholds or Thresholds()
        except ArtifactError as error:
            raise EvalError(f"calibration artifact {choice}: {error}") from None
    if not any(r.get("calibrated") for r in rows):
        return Thresholds()
    _say(
        "green_curve left out: the rows were calibrated and nothing says with which "
        "thresholds (pass --calibration ARTIFACT)"
    )
    return None


def replay(args: argparse.Namespace, settings: Any) -> tuple[dict, list[dict]]:
    from service.evaluation.metrics import analysis, green_curve
    from service.evaluation.run import L1, EvalError, load_calibration, run_eval, save_features
    from service.labelled import LabelledFileError, read_labelled

    try:
        records = read_labelled(args.data)
    except LabelledFileError as error:
        raise EvalError(str(error)) from None
    if args.limit:
        records = records[: args.limit]
    if not records:
        raise EvalError(f"{args.data} holds no ticket")
    l1 = L1(settings.rules_dir)  # before the model loads: a missing L1 fails in a second
    classifier = _classifier(args, settings)
    choice = args.calibration or ""
    if choice.lower() != "none":
        from service.evaluation.run import served_calibration

        classifier.set_calibrator(
            load_calibration(choice, classifier) if choice else served_calibration(settings, classifier, _say)
        )

    partial = Path(args.rows).open("w", encoding="utf-8") if args.rows else None
    features: dict[str, list] | None = {} if args.features else None
    with progress(total=len(records), desc="eval", unit="ticket", quiet=args.quiet) as bar:

        def on_row(row: dict) -> None:
            if partial is not None:  # streamed, so a long run that dies still leaves its rows
                partial.write(json.dumps(row, ensure_ascii=False) + "\n")
                partial.flush()
            bar.set_postfix_str(f"{row['id']} {row['truth']}->{row['predicted']}", refresh=False)
            bar.update(1)

        try:
            report, rows = run_eval(settings, records, classifier=classifier, on_row=on_row, features=features, l1=l1)
        finally:
            if partial is not None:
                partial.close()
    calibrator = classifier.calibrator
    report["calibration"] = calibrator.version if calibrator is not None else None
    report["green_curve"] = green_curve(rows, _thresholds(report["thresholds"]))
    if args.analysis:
        report["analysis"] = analysis(rows)
    if features:
        save_features(args.features, features)
    return report, rows


def _classifier(args: argparse.Namespace, settings: Any) -> Any:
    from service.evaluation.run import EvalError
    from service.l2 import Classifier
    from service.model_fetch import ModelError

    kwargs: dict[str, Any] = {}
    if args.risk_permutations:
        kwargs["risk_permutations"] = args.risk_permutations
    if args.mode:
        kwargs["mode"] = args.mode
    try:
        return Classifier.from_settings(settings, **kwargs)
    except ModelError as error:
        raise EvalError(str(error)) from None


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="run L1 + L2 offline over a labelled JSONL and print the metrics",
        description="Runs the whole pipeline (L1 rules, L2 model, max) over a labelled file in "
        "the risk policy's format; writes the metrics as JSON and prints a table.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", help="labelled JSONL (risk policy format)")
    source.add_argument("--from-rows", help="recompute the metrics from a ROWS file (no model)")
    parser.add_argument(
        "--json",
        required=True,
        help="where to write the metrics (JSON); '-' for stdout (the table then goes to stderr)",
    )
    parser.add_argument("--rows", help="optional JSONL: one line per ticket with probabilities")
    parser.add_argument("--features", help="optional .npz: the L2 hidden states per question")
    parser.add_argument("--limit", type=int, default=0, help="only the first N tickets")
    parser.add_argument(
        "--model-size", choices=("0.5b", "1.5b"), default="", help="bundled model to use (default TRIAGE_MODEL_SIZE)"
    )
    parser.add_argument("--model", default="", help="any GGUF path (default TRIAGE_MODEL_PATH)")
    parser.add_argument(
        "--risk-permutations",
        type=int,
        default=0,
        help="option orders averaged for the risk question (default: prompts/)",
    )
    parser.add_argument(
        "--mode",
        choices=("parallel", "rewind", "fused"),
        default="",
        help="how questions share the ticket's KV (default: fused)",
    )
    parser.add_argument(
        "--calibration",
        default="",
        metavar="ARTIFACT",
        help="calibration artifact to apply: a directory, or 'none' for raw "
        "logits and default thresholds (default: the artifact the worker "
        "would load from TRIAGE_CALIBRATION_DIR). Grading an artifact on the "
        "tickets it was trained on flatters it. With --from-rows: the "
        "artifact whose thresholds the green curve moves from.",
    )
    parser.add_argument(
        "--analysis",
        action="store_true",
        help="add the option-order study and a threshold choice (tune half -> "
        "holdout half, calibration's rule) under the key 'analysis'",
    )
    parser.add_argument(
        "--plots",
        default="",
        metavar="DIR",
        help="also draw the confusion matrix and the greens-cleared / "
        "false-greens curve as PNGs in DIR (matplotlib, offline extra)",
    )
    add_quiet_argument(parser)
    parser.set_defaults(func=cmd_eval)
