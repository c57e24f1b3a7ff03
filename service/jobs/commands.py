"""`triage eval`: registers the offline evaluation sub-command on the `triage` console script."""

from __future__ import annotations

import argparse
import sys


def cmd_eval(args: argparse.Namespace) -> int:
    from service.jobs.eval import main
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
        print(f"triage eval: invalid setting: {error}", file=sys.stderr)
        return 2
    configure_logging("warning" if settings.log_level == "info" else settings.log_level)
    return main(args, settings)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval", help="run L1 + L2 offline over a labelled JSONL and print the metrics",
        description="Runs the whole pipeline (L1 rules, L2 model, max) over a labelled file in "
                    "the risk policy's format; writes the metrics as JSON and prints a table.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", help="labelled JSONL (risk policy format)")
    source.add_argument("--from-rows", help="recompute the metrics from a ROWS file (no model)")
    parser.add_argument("--json", required=True, help="where to write the metrics (JSON)")
    parser.add_argument("--rows", help="optional JSONL: one line per ticket with probabilities")
    parser.add_argument("--features", help="optional .npz: the L2 hidden states per question")
    parser.add_argument("--limit", type=int, default=0, help="only the first N tickets")
    parser.add_argument("--model-size", choices=("0.5b", "1.5b"), default="",
                        help="bundled model to use (default TRIAGE_MODEL_SIZE)")
    parser.add_argument("--model", default="", help="any GGUF path (default TRIAGE_MODEL_PATH)")
    parser.add_argument("--risk-permutations", type=int, default=0,
                        help="option orders averaged for the risk question (default: prompts/)")
    parser.add_argument("--mode", choices=("parallel", "rewind", "fused"), default="",
                        help="how questions share the ticket's KV (default: fused)")
    parser.add_argument("--calibration", default="", metavar="ARTIFACT",
                        help="calibration artifact to apply: a directory, or 'none' for raw "
                             "logits and default thresholds (default: the artifact the worker "
                             "would load from TRIAGE_CALIBRATION_DIR). Grading an artifact on the "
                             "tickets it was trained on flatters it.")
    parser.add_argument("--analysis", action="store_true",
                        help="add the option-order study and a threshold sweep (tune half -> "
                             "holdout half) under the key 'analysis'")
    parser.set_defaults(func=cmd_eval)
