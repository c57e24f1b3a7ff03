"""`triage study`: the measurements behind the calibration's feature and gate choices, the
cross-source grading and the learning curve (service.calibration.study), written as JSON and,
for the curve, a PNG."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from service.progress import add_quiet_argument


def replayed_sources(args: argparse.Namespace, settings) -> tuple[dict, list[str], int, Callable[[], Any]]:
    """{source name: examples} for every --data NAME=FILE, replayed through the cache, and the
    classifier factory (the model loads only when called or when some text was not cached)."""
    from service.calibration.replay import ReplayCache, replay, replay_capture
    from service.l2.classifier import DEFAULT_MODE, Classifier, bundled_model_path, model_sha256
    from service.l2.prompts import load_prompts
    from service.l2.runner import model_layers
    from service.labelled import read_labelled
    from service.progress import progress

    path = bundled_model_path(settings)
    n_layer = model_layers(path)
    capture = replay_capture(n_layer)
    prompts = load_prompts(settings.prompts_dir)
    cache = ReplayCache(
        args.cache_dir or Path(settings.var_dir) / "calibration-cache",
        model_sha256(path),
        prompts.sha,
        DEFAULT_MODE,
        capture,
    )
    model = None

    def factory():
        nonlocal model
        if model is None:
            model = Classifier.from_settings(settings, calibrator=None, capture=capture)
        return model

    l1 = _l1_features(settings) if args.l1_features else None
    sources = {}
    for item in args.data:
        name, _, file = item.partition("=")
        records = read_labelled(file)
        with progress(total=len(records), desc=f"replay {name}", unit="ticket", quiet=args.quiet) as bar:
            examples, _ = replay(
                records, name, cache, factory, progress=lambda done, total, _id: bar.update(done - bar.n)
            )
        if l1 is not None:
            from service.results import ticket_text

            texts = {r.id: ticket_text(r.subject, r.body) for r in records}
            for e in examples:
                e.features["l1"] = l1(texts[e.id])
        sources[name] = examples
    return sources, list(prompts.questions), n_layer, factory


def _l1_features(settings):
    """text -> L1's verdict as numbers: one 0/1 per rule of the pack, then the level one-hot."""
    import numpy as np

    from service.l1 import evaluate, load_pack

    pack = load_pack(settings.rules_dir)
    ids = sorted({rule.id for rule in pack.rules})
    index = {rid: i for i, rid in enumerate(ids)}
    levels = ("green", "yellow", "red")

    def vector(text: str):
        result = evaluate(pack, text)
        v = np.zeros(len(ids) + len(levels), dtype=np.float32)
        for hit in result.rules:
            if hit.id in index:
                v[index[hit.id]] = 1.0
        if result.level in levels:
            v[len(ids) + levels.index(result.level)] = 1.0
        return v

    return vector


def _write(report: dict, out: str) -> None:
    text = json.dumps(report, indent=2, sort_keys=False) + "\n"
    if out == "-":
        sys.stdout.write(text)
    else:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text)
        print(f"wrote {out}", file=sys.stderr)


def cmd_study(args: argparse.Namespace) -> int:
    from service.calibration import study
    from service.calibration.fit import single_thread_blas
    from service.calibration.recalibrate import DEFAULT_FEATURES
    from service.calibration.replay import FEATURE_SETS
    from service.logs import configure_logging
    from service.settings import settings_or_exit

    settings = settings_or_exit("triage study")
    configure_logging(settings.log_level)
    if args.what == "framing":
        return _framing(args, settings)
    sources, questions, n_layer, _ = replayed_sources(args, settings)
    if args.what == "served":
        return _served(args, settings)
    from service.calibration.recalibrate import DEFAULT_GATE

    gate = None if args.gate == "none" else (args.gate or DEFAULT_GATE)
    with single_thread_blas():
        if args.what == "features":
            specs = args.features or list(FEATURE_SETS)
            report = study.feature_study(
                sources,
                args.train,
                [s for s in sources if s != args.train],
                specs,
                questions,
                n_layer,
                gate,
                head=args.head,
            )
        elif args.what == "sources":
            report = study.cross_source(
                sources,
                args.features[0] if args.features else DEFAULT_FEATURES,
                gate,
                questions,
                n_layer,
                args.head,
                tuple(args.source_thresholds or ()),
                args.source_min_labels,
            )
        else:
            pool = [e for name in args.train.split("+") for e in sources[name]]
            graded = {k: v for k, v in sources.items() if k not in args.train.split("+")}
            report = study.learning_curve(
                pool,
                graded,
                args.features[0] if args.features else DEFAULT_FEATURES,
                gate,
                questions,
                n_layer,
                repeats=args.repeats,
            )
            if args.plot:
                study.plot_curve(report, args.plot)
    report["sources"] = {k: len(v) for k, v in sources.items()}
    report["command"] = "triage " + shlex.join(sys.argv[1:])
    _write(report, args.json)
    return 0


def _served(args: argparse.Namespace, settings) -> int:
    """`triage eval` per source with an artifact, from the replay cache: L1 + L2 + max as served."""
    from service.calibration.artifact import load_artifact
    from service.calibration.replay import ReplayCache, ReplayedClassifier, replay_capture
    from service.evaluation.run import run_eval
    from service.l2.classifier import DEFAULT_MODE, bundled_model_path, model_sha256
    from service.l2.prompts import load_prompts
    from service.l2.runner import model_layers
    from service.labelled import read_labelled
    from service.results import ModelInfo

    if not args.calibration:
        print("triage study served: --calibration ARTIFACT is required", file=sys.stderr)
        return 2
    path = bundled_model_path(settings)
    prompts = load_prompts(settings.prompts_dir)
    sha = model_sha256(path)
    cache = ReplayCache(
        args.cache_dir or Path(settings.var_dir) / "calibration-cache",
        sha,
        prompts.sha,
        DEFAULT_MODE,
        replay_capture(model_layers(path)),
    )
    calibrator = load_artifact(args.calibration)
    classifier = ReplayedClassifier(cache, prompts, calibrator, ModelInfo(name=path.name, sha256=sha))
    report: dict = {"calibration": calibrator.version, "sources": {}, "command": "triage " + shlex.join(sys.argv[1:])}
    for item in args.data:
        name, _, file = item.partition("=")
        result, rows = run_eval(settings, read_labelled(file), classifier=classifier)
        result["source"] = name
        report["sources"][name] = result
        if args.rows:
            Path(args.rows).mkdir(parents=True, exist_ok=True)
            (Path(args.rows) / f"{name}.rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _write(report, args.json)
    return 0


def _framing(args: argparse.Namespace, settings) -> int:
    """The served framing against `turn_end: once` on the same tickets (service.calibration.framing)."""
    import msgspec

    from service.calibration import framing
    from service.calibration.fit import FitConfig, single_thread_blas
    from service.calibration.recalibrate import DEFAULT_FEATURES, DEFAULT_GATE
    from service.errors import Refused
    from service.l2.decision import Thresholds
    from service.l2.features import feature_names
    from service.l2.prompts import load_prompts

    cfg = FitConfig(
        min_per_class=settings.calibration_min_per_class, max_false_green_rate=settings.max_false_green_rate
    )
    report: dict = {"folds": cfg.folds, "min_per_class": cfg.min_per_class, "variants": {}}
    for turn_end in framing.TURN_ENDS:
        prompts_dir = framing.variant_prompts(settings.prompts_dir, Path(settings.var_dir) / "study", turn_end)
        variant = msgspec.structs.replace(settings, prompts_dir=str(prompts_dir))
        sources, names, n_layer, classifier = replayed_sources(args, variant)
        prompts = load_prompts(prompts_dir)
        examples = [e for found in sources.values() for e in found]
        try:
            with single_thread_blas():
                graded = framing.grade(
                    examples,
                    prompts.questions,
                    cfg,
                    feature_names(DEFAULT_FEATURES, names, n_layer),
                    feature_names(DEFAULT_GATE, names, n_layer),
                )
        except Refused as exc:
            print(f"triage study framing: {exc} (TRIAGE_CALIBRATION_MIN_PER_CLASS sets the floor)", file=sys.stderr)
            return 2
        report["variants"][turn_end] = {
            "prompt_sha": prompts.sha,
            "tokens": framing.fixed_tokens(classifier().runner, prompts),
            "coverage": framing.coverage(examples, Thresholds().min_coverage),
            **graded,
        }
        report["sources"] = {k: len(v) for k, v in sources.items()}
    report["decision"] = framing.decision(report["variants"]["per_question"], report["variants"]["once"])
    report["command"] = "triage " + shlex.join(sys.argv[1:])
    _write(report, args.json)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "study",
        help="measure feature sets, the green gate, cross-source grading, learning curve",
        description="Offline measurements on replayed labelled files (cached; the model runs only "
        "for texts not replayed yet). Every figure grades tickets the head, its "
        "threshold and its gate were not fitted on.",
    )
    parser.add_argument(
        "what",
        choices=["features", "sources", "curve", "served", "framing"],
        help="features: each feature set fitted on --train, graded on the other "
        "sources; sources: each source graded by a fit on all the others; "
        "curve: refits on growing subsets of --train, graded on the others; "
        "served: `triage eval` of --calibration on each source, from the "
        "replay cache (L1 + L2 + max as served, no model run); framing: the "
        "served question framing against one that pays the turn end once per "
        "ticket, by tokens, coverage and nested cross-validation",
    )
    parser.add_argument(
        "--data", action="append", required=True, metavar="NAME=FILE.jsonl", help="a labelled source (repeat)"
    )
    parser.add_argument("--train", default="train", help="source(s) to fit on, joined by '+'")
    parser.add_argument(
        "--features",
        action="append",
        metavar="SPEC",
        help="feature set(s) to measure (default: all; curve/sources: the first, default recalibrate's)",
    )
    parser.add_argument(
        "--gate", default=None, metavar="SPEC", help="the green gate's features, or 'none' (default: recalibrate's)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="curve: subsets per size")
    parser.add_argument(
        "--l1-features",
        action="store_true",
        help="features: also offer L1's rule hits as the feature set 'l1' (e.g. --features ticket@mid+l1)",
    )
    parser.add_argument(
        "--head",
        choices=["linear", "mlp", "bagged"],  # study.HEAD_KINDS (not imported: registration stays light)
        default="linear",
        help="features, sources: the risk head (mlp: one hidden layer, scikit-learn; bagged: 8 linear heads "
        "on bootstrap resamples, green only as far as all of them agree)",
    )
    parser.add_argument(
        "--source-thresholds",
        action="append",
        type=float,
        metavar="Q",
        help="sources: also grade with a green threshold per fitted source, for tickets as near that source's "
        "greens as the quantile Q of them are to each other (repeat for several Q)",
    )
    parser.add_argument(
        "--source-min-labels",
        type=int,
        default=300,  # study.SOURCE_MIN_LABELS (not imported: registration stays light)
        metavar="N",
        help="sources, with --source-thresholds: the labels a fitted source needs for a threshold of its own",
    )
    parser.add_argument("--plot", metavar="FILE.png", help="curve: draw it here")
    parser.add_argument("--cache-dir", metavar="DIR", default=None)
    parser.add_argument("--calibration", metavar="ARTIFACT", help="served: the artifact to apply")
    parser.add_argument("--rows", metavar="DIR", help="served: per-ticket rows, one file a source")
    parser.add_argument("--json", required=True, metavar="OUT.json", help="'-' for stdout")
    add_quiet_argument(parser)
    parser.set_defaults(func=cmd_study)
