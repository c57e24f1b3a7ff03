"""`triage recalibrate`: operator decisions (or a labelled file) -> a calibration artifact.

Labels come from the decisions stream joined with the stored L2 answers and hidden states of
the same tickets (service.calibration.dataset), plus a labelled starting corpus (the dev set)
replayed through the real classifier (service.calibration.replay); or, with --from-file, from
labelled JSONL files replayed alone. The fitting is service.calibration.fit (pure); this module
runs the job: gathers the examples, fits, writes the artifact and its report (Markdown +
reliability diagrams). A refusal (too few
labels, degenerate fit) writes nothing and leaves the current artifact in place.
"""

from __future__ import annotations

import shlex
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import structlog

from service.calibration.artifact import (
    ArtifactMeta,
    Evaluation,
    HeadInfo,
    QuestionEntry,
    new_version,
    write_artifact,
)
from service.calibration.dataset import build_dataset, collect_decisions, merge
from service.calibration.fit import (
    CALIBRATED,
    Calibration,
    Dataset,
    FitConfig,
    Refused,
    calibrate,
)
from service.calibration.replay import (
    Example,
    ReplayCache,
    feature_names,
    replay,
    replay_capture,
)
from service.errors import RecalibrateError
from service.l2.features import RECORDED
from service.labelled import read_labelled
from service.machine import summary as machine_summary
from service.results import ModelInfo
from service.store import Keys

log = structlog.get_logger()


# ------------------------------------------------------------------------------ the run
# The features the heads read and the green gate's, chosen by `triage study features`
# (docs/results.md, "Features"): names of service.calibration.replay.FEATURE_SETS.
# Workers record these on every ticket (service.l2.features.RECORDED), so that operator decisions
# can train them: a different default must change RECORDED too.
DEFAULT_FEATURES = RECORDED
DEFAULT_GATE = RECORDED


@dataclass
class Options:
    from_file: str | list[str] | None = None  # one labelled file or several (sources)
    features: str = DEFAULT_FEATURES
    gate: str | None = DEFAULT_GATE  # None: no green gate
    out: str | None = None  # default settings.calibration_dir
    folds: int = 5
    min_per_class: int = 15
    corpus: str | None = None  # starting corpus joined with the decisions
    seed: int = 0
    cache_dir: str | None = None  # default <var_dir>/calibration-cache
    command: str = ""
    green_after_l1: bool = False  # FitConfig.green_after_l1; labelled files only


@dataclass
class Outcome:
    path: Path
    meta: ArtifactMeta
    calibration: Calibration


def rules_sha(settings: Any) -> str:
    """The L1 rule pack's hash, recorded for provenance (thresholds are fitted on L2 alone)."""
    try:
        from service.l1 import load_pack

        return load_pack(settings.rules_dir).sha
    except Exception as exc:  # an absent or invalid pack must not stop recalibration
        log.warning("recalibrate_rules_sha_unavailable", error=str(exc))
        return ""


def l1_level(settings: Any) -> Callable[[str], str]:
    """text -> the level the running rule pack gives it (for FitConfig.green_after_l1)."""
    from service.l1 import evaluate, load_pack

    pack = load_pack(settings.rules_dir)
    return lambda text: evaluate(pack, text).level


def gather(
    settings: Any,
    opts: Options,
    model_sha: str,
    prompt_sha: str,
    mode: str,
    classifier: Callable[[], Any],
    redis_client: Any = None,
    capture: Any = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> tuple[list[Example], dict[str, int], Counter]:
    """The labelled examples for this run, their sources, and what was left out."""
    cache = ReplayCache(
        opts.cache_dir or Path(settings.var_dir) / "calibration-cache", model_sha, prompt_sha, mode, capture
    )
    skipped: Counter = Counter()
    if opts.from_file:
        files = [opts.from_file] if isinstance(opts.from_file, str) else list(opts.from_file)
        l1 = l1_level(settings) if opts.green_after_l1 else None
        examples = []
        for file in files:
            got, missed = replay(read_labelled(file), Path(file).stem, cache, classifier, progress=progress, l1=l1)
            examples = merge(examples, got)
            skipped.update(missed)
    else:
        client = redis_client
        if client is None:  # before the replay: no Redis should not cost a model load
            from service.store.connection import connect

            client = connect(settings, allow_embedded=False)
        corpus: list[Example] = []
        if opts.corpus:
            corpus, skipped = replay(read_labelled(opts.corpus), "corpus", cache, classifier, progress=progress)
        decided, missing = collect_decisions(client, Keys(settings.redis_prefix), model_sha, prompt_sha)
        skipped.update(missing)
        examples = merge(decided, corpus)
        skipped["corpus ticket relabelled by an operator"] += len(decided) + len(corpus) - len(examples)
    sources = dict(Counter(e.source for e in examples))
    return examples, sources, +skipped


def build_meta(
    calibration: Calibration,
    data: Dataset,
    *,
    version: str,
    created_at: float,
    command: str,
    model: ModelInfo,
    prompt_sha: str,
    rules: str,
    cfg: FitConfig,
    sources: dict[str, int],
    elapsed_s: float,
) -> ArtifactMeta:
    final = calibration.final
    questions: dict[str, QuestionEntry] = {}
    for name, fit in final.questions.items():
        m = fit.model
        rep = calibration.reports[name]
        head = None
        if m.head is not None:
            head = HeadInfo(
                dim=m.head.dim,
                c=m.head.c,
                inputs=list(m.inputs),
                arrays=[f"{name}.{part}" for part in ("mean", "scale", "coef", "intercept")],
            )
        questions[name] = QuestionEntry(
            kind=m.kind,
            options=list(m.options),
            method=m.method,  # type: ignore[arg-type]
            temperature=m.scaling.temperature if m.scaling is not None else None,
            bias=list(m.scaling.bias) if m.scaling is not None else None,
            head=head,
            label_counts=fit.counts,
            candidates=fit.candidates,
            n=rep.n,
            ece_before=rep.ece_before,
            ece_after=rep.ece_after,
            nll_before=rep.nll_before,
            nll_after=rep.nll_after,
            accuracy_before=rep.accuracy_before,
            accuracy_after=rep.accuracy_after,
        )
    counts = {q: d.counts() for q, d in data.questions.items() if q in CALIBRATED}
    t = final.thresholds
    return ArtifactMeta(
        schema=1,
        version=version,
        created_at=created_at,
        command=command,
        model=model,
        prompt_sha=prompt_sha,
        rules_sha=rules,
        thresholds=msgspec.structs.replace(t, yellow_flags=dict(t.yellow_flags)),
        questions=questions,
        skipped=final.skipped,
        label_counts=counts,
        n_tickets=len(data),
        sources=sources,
        folds=cfg.folds,
        seed=cfg.seed,
        min_per_class=cfg.min_per_class,
        green=final.green,
        red=final.red,
        yellow=final.yellow,
        gate=final.gate.info if final.gate is not None else None,
        green_after_l1=cfg.green_after_l1,
        evaluation=Evaluation(
            nested=calibration.nested, selection=final.selection, raw_default=calibration.raw_default
        ),
        machine=machine_summary(),
        elapsed_s=round(elapsed_s, 1),
    )


def fit_and_write(
    examples: list[Example],
    questions: dict[str, Any],
    out_dir: str | Path,
    *,
    cfg: FitConfig,
    model: ModelInfo,
    prompt_sha: str,
    rules: str,
    command: str,
    sources: dict[str, int],
    skipped: Counter | None = None,
    started: float | None = None,
    head_inputs: tuple[str, ...] | None = None,
    gate_inputs: tuple[str, ...] = (),
    step: Callable[[str, int, int, str], None] | None = None,
) -> Outcome:
    """Fit, then write the artifact and its report atomically. Raises Refused, writing nothing."""
    from service.calibration.report import write_report

    started = time.time() if started is None else started
    if not examples:
        raise Refused("no labelled tickets to fit on")
    data = build_dataset(examples, questions, head_inputs, gate_inputs)
    calibration = calibrate(data, cfg, step)
    created_at = time.time()
    draft = build_meta(
        calibration,
        data,
        version="",
        created_at=created_at,
        command=command,
        model=model,
        prompt_sha=prompt_sha,
        rules=rules,
        cfg=cfg,
        sources=sources,
        elapsed_s=created_at - started,
    )
    version = new_version(created_at, msgspec.json.encode(draft))
    meta = msgspec.structs.replace(draft, version=version)
    heads = {q: f.model.head for q, f in calibration.final.questions.items() if f.model.head is not None}
    path = write_artifact(
        out_dir,
        meta,
        heads,  # type: ignore[arg-type]
        extra=lambda tmp: write_report(tmp, meta, calibration, data, dict(skipped or {})),
        gate=calibration.final.gate,
    )
    log.info(
        "recalibrate_written",
        path=str(path),
        version=version,
        methods={q: e.method for q, e in meta.questions.items()},
        thresholds=msgspec.to_builtins(meta.thresholds),
    )
    return Outcome(path=path, meta=meta, calibration=calibration)


def run(
    settings: Any,
    opts: Options,
    *,
    classifier: Callable[[], Any] | None = None,
    redis_client: Any = None,
    progress: Callable[[int, int, str], None] | None = None,
    step: Callable[[str, int, int, str], None] | None = None,
) -> Outcome:
    """The whole job. Raises Refused (nothing written) or RecalibrateError (bad input)."""
    from service.l2.classifier import DEFAULT_MODE, bundled_model_path, model_sha256
    from service.l2.prompts import load_prompts
    from service.l2.runner import model_layers

    started = time.time()
    prompts = load_prompts(settings.prompts_dir)
    model_path = bundled_model_path(settings)
    if not model_path.exists():
        raise RecalibrateError(f"{model_path}: model file not found (triage fetch-model)")
    model = ModelInfo(name=model_path.name, sha256=model_sha256(model_path))
    capture = replay_capture(model_layers(model_path))  # every candidate: the cache is shared

    def default_classifier() -> Any:
        from service.l2 import Classifier

        # Uncalibrated on purpose: the maps are fitted on raw log-probs and hidden states.
        return Classifier.from_settings(settings, calibrator=None, capture=capture)

    cfg = FitConfig(
        folds=opts.folds,
        seed=opts.seed,
        min_per_class=opts.min_per_class,
        max_false_green_rate=settings.max_false_green_rate,
        green_after_l1=opts.green_after_l1,
    )
    n_layer = model_layers(model_path)
    names = [q for q in prompts.questions]
    head_inputs = feature_names(opts.features, names, n_layer)
    gate_inputs = feature_names(opts.gate, names, n_layer) if opts.gate else ()
    log.info(
        "recalibrate_started",
        source=opts.from_file or "decisions",
        corpus=opts.corpus,
        folds=opts.folds,
        min_per_class=opts.min_per_class,
        model=model.name,
        prompt_sha=prompts.sha[:12],
    )
    # Serving's classifier (Classifier.from_settings) runs the default mode; so does the replay.
    examples, sources, skipped = gather(
        settings,
        opts,
        model.sha256,
        prompts.sha,
        DEFAULT_MODE,
        classifier or default_classifier,
        redis_client,
        capture,
        progress,
    )
    out_dir = opts.out or settings.calibration_dir
    try:
        return fit_and_write(
            examples,
            prompts.questions,
            out_dir,
            cfg=cfg,
            model=model,
            prompt_sha=prompts.sha,
            rules=rules_sha(settings),
            command=opts.command,
            sources=sources,
            skipped=skipped,
            started=started,
            head_inputs=head_inputs,
            gate_inputs=gate_inputs,
            step=step,
        )
    except Refused as exc:
        log.error("recalibrate_refused", reason=str(exc), out=str(out_dir))
        raise


def command_line(argv: list[str] | None = None) -> str:
    return "triage " + shlex.join(argv if argv is not None else sys.argv[1:])
