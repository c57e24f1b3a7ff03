"""The replay: every labelled ticket through L1 + L2 + max as the worker serves it, one row each.

Only this module touches the rule pack and the model; the rows it makes are graded by
service.evaluation.metrics, and can be re-graded later from a ROWS file without either.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgspec

from service.errors import EvalError
from service.evaluation.metrics import halves, summarize, summarize_halves
from service.labelled import LabelledTicket, read_labelled
from service.results import RED_FLAGS, max_level, ticket_text


class L1:
    """L1's evaluate bound to one rule pack."""

    def __init__(self, rules_dir: str) -> None:
        try:
            from service.l1 import PackError, evaluate, load_pack
        except ImportError as error:
            # Grading L2 alone and calling it the service would hide every L1 catch and miss.
            raise EvalError(
                f"L1 cannot be imported ({error}); the eval grades L1 + L2 as served and will not run without L1"
            ) from None
        try:
            self.pack = load_pack(rules_dir)
        except PackError as error:
            raise EvalError(f"rule pack {rules_dir} is invalid: {error}") from None
        self._evaluate = evaluate

    @property
    def sha(self) -> str:
        return self.pack.sha

    def __call__(self, text: str) -> Any:
        return self._evaluate(self.pack, text)


def run_eval(
    settings: Any,
    records: list[LabelledTicket],
    classifier: Any = None,
    on_row: Callable[[dict], None] | None = None,
    features: dict[str, list] | None = None,
    l1: L1 | None = None,
) -> tuple[dict, list[dict]]:
    """Run L1 + L2 + max over the records: (report, rows). When `features` is a dict, the hidden
    states are appended to it per question (with "ids"), exactly as serving computed them."""
    from service.l2 import Classifier

    l1 = l1 or L1(settings.rules_dir)
    classifier = classifier or Classifier.from_settings(settings)
    rows = []
    for record in records:
        text = ticket_text(record.subject, record.body)
        started = time.perf_counter()
        l1_result = l1(text)
        out = classifier.classify(text)
        latency = (time.perf_counter() - started) * 1000
        rows.append(make_row(record, l1_result, out, latency))
        if features is not None and out.features:
            features.setdefault("ids", []).append(record.id)
            for name, vector in out.features.items():
                features.setdefault(name, []).append(vector)
        if on_row is not None:
            on_row(rows[-1])
    report = summarize(rows)
    report["halves"] = summarize_halves(rows)
    report["model"] = msgspec.to_builtins(classifier.model_info)
    report["prompt_sha"] = classifier.prompt_sha
    report["rules_sha"] = l1.sha
    report["calibrated"] = bool(rows) and all(r["calibrated"] for r in rows)
    report["l1_present"] = True  # kept for readers of older reports: eval refuses to run without
    report["mode"] = classifier.mode
    report["n_threads"] = classifier.runner.n_threads
    report["thresholds"] = msgspec.to_builtins(served_thresholds(classifier))
    return report, rows


def served_thresholds(classifier: Any) -> Any:
    """The thresholds the classifier decides with: the artifact's, else its defaults."""
    calibrator = classifier.calibrator
    if calibrator is not None and calibrator.thresholds is not None:
        return calibrator.thresholds
    return classifier.thresholds


def make_row(record: LabelledTicket, l1_result: Any, out: Any, latency_ms: float) -> dict:
    from service.pipeline import fail_closed  # the worker's own L2 -> final rule

    result = fail_closed(out.result)
    answers = result.answers
    probabilities = {k: a.probabilities for k, a in answers.items() if a.probabilities}
    return {
        "id": record.id,
        "language": record.language,
        "truth": record.risk,
        "predicted": max_level(l1_result.level or "none", result.level),
        "l1": l1_result.level,
        "l2": result.level,
        "method": result.method,
        "calibrated": result.calibrated,
        "rules": [hit.id for hit in l1_result.rules],
        "category_truth": record.category,
        "category": result.category,
        "urgency_truth": record.urgency,
        "urgency": result.urgency,
        "team": result.team,
        "flags_truth": dict(record.flags),
        "flags": {f: answers[f].probability for f in RED_FLAGS if f in answers},
        "probabilities": probabilities,
        "coverage": {k: a.coverage for k, a in answers.items()},
        "answers": msgspec.to_builtins(answers),
        "risk_variants": msgspec.to_builtins(getattr(out, "variants", {}) or {}),
        "truncated": bool(getattr(out, "truncated", False)),
        # The out-of-distribution gate's veto on a green L2 would otherwise have given.
        "ood_blocked": bool(getattr(result, "ood_blocked", False)),
        "tokens_evaluated": result.tokens_evaluated,
        "latency_ms": latency_ms,
        "reason": result.reason,
    }


# ---------------------------------------------------------------------- calibration to apply
def served_calibration(settings: Any, classifier: Any, say: Callable[[str], None]) -> Any:
    """The artifact a worker with these settings would load (None: it would serve raw logits)."""
    from service.calibration.loader import load_latest

    outcome = load_latest(settings.calibration_dir, classifier.model_info.sha256, classifier.prompt_sha)
    where = outcome.calibrator.path if outcome.calibrator is not None else "none (raw logits)"
    say(f"calibration: {where}")
    return outcome.calibrator


def load_calibration(path: str, classifier: Any) -> Any:
    """The artifact at `path`; EvalError when it is unreadable or was made for another model or
    prompt (its heads would read hidden states they were not trained on)."""
    from service.calibration.artifact import ArtifactError, load_artifact
    from service.calibration.loader import stale_reasons

    try:
        calibrator = load_artifact(path)
    except ArtifactError as error:
        raise EvalError(f"calibration artifact {path}: {error}") from None
    mismatched = stale_reasons(
        classifier.model_info.sha256, classifier.prompt_sha, calibrator.model_sha, calibrator.prompt_sha
    )
    if mismatched:
        raise EvalError(
            f"calibration artifact {path} is stale for this classifier (different "
            f"{', '.join(mismatched)}); re-run `triage recalibrate`"
        )
    return calibrator


# ---------------------------------------------------------------------- files
def write_rows(path: str | Path, rows: Iterable[dict]) -> None:
    with Path(path).open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def read_rows(path: str | Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def write_halves(path: str | Path, out_dir: str | Path) -> tuple[Path, Path]:
    """Split a labelled JSONL into <stem>-tune.jsonl and <stem>-holdout.jsonl with `halves`
    (lines copied byte for byte), so a calibration can be trained on one half and graded on the
    other. Returns the two paths."""
    path, out = Path(path), Path(out_dir)
    records = read_labelled(path)
    tune, _ = halves([{"id": r.id, "truth": r.risk} for r in records])
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, keep in (("tune", True), ("holdout", False)):
        target = out / f"{path.stem}-{name}.jsonl"
        target.write_text(
            "".join(line + "\n" for line, r in zip(lines, records, strict=True) if (r.id in tune) == keep),
            encoding="utf-8",
        )
        written.append(target)
    return written[0], written[1]


def save_features(path: str | Path, features: dict[str, list]) -> None:
    """npz: "ids" (n,) and one (n, n_embd) float32 array per question (only complete ones)."""
    import numpy as np

    n = len(features["ids"])
    arrays = {"ids": np.array(features["ids"])}
    for name, vectors in features.items():
        if name != "ids" and len(vectors) == n:  # a ticket that fell back to unavailable has none
            arrays[name] = np.stack(vectors).astype(np.float32)
    np.savez_compressed(path, **arrays)
