"""Labelled texts through the real classifier, uncalibrated, with every candidate feature, cached.

A recalibration fits heads on what serving computes: the raw L2 answers and the hidden states of
each ticket. Replaying a ticket costs about two seconds on two cores, so each text is replayed
once and kept on disk, keyed by the model, the prompts, the KV-sharing mode and the layers read
(the directory) and by the text's sha256 (the file). The replay reads every candidate layer
(`replay_capture`), whatever the current artifact needs, so a fit can choose among them
without a second replay; serving then reads only the layers its heads ask for.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import structlog

from service.errors import ReplayError
from service.hidden_states import features_from_bytes, features_to_bytes
from service.l2.features import FEATURE_SETS, feature_names, replay_capture
from service.l2.runner import Capture
from service.labelled import LabelledTicket
from service.results import RED_FLAGS, Answer, Decision, L2Result, ticket_text

log = structlog.get_logger()

__all__ = [
    "FEATURE_SETS",
    "Example",
    "ReplayCache",
    "ReplayError",
    "ReplayedClassifier",
    "feature_names",
    "labels_from_decision",
    "labels_from_record",
    "replay",
    "replay_capture",
    "text_sha",
]


@dataclass
class Example:
    """One labelled ticket with its raw L2 answers and hidden states, whatever its source."""

    id: str
    source: str  # "file", "corpus", "decisions" or a data set's name
    text_sha: str
    labels: dict[str, Any]  # question -> label (level, bool, category, int) or None
    answers: dict[str, Answer]
    features: dict[str, np.ndarray]
    truncated: bool = False
    language: str = ""
    l1_level: str = "none"  # what the rule pack says of the text, when the fit asked (l1_level)


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def labels_from_record(rec: LabelledTicket) -> dict[str, Any]:
    labels: dict[str, Any] = {"risk": rec.risk, "category": rec.category, "urgency": rec.urgency}
    for flag in RED_FLAGS:
        labels[flag] = rec.flags.get(flag, False if rec.risk != "red" else None)
    return labels


def labels_from_decision(dec: Decision) -> dict[str, Any]:
    """An operator's verdict as labels. Flags not given are known to be absent only when the
    ticket is not red (the policy: any flag makes it red); on a red ticket they stay unknown."""
    labels: dict[str, Any] = {"risk": dec.correct_level, "category": dec.category, "urgency": None}
    for flag in RED_FLAGS:
        if dec.flags is not None and flag in dec.flags:
            labels[flag] = bool(dec.flags[flag])
        else:
            labels[flag] = False if dec.correct_level != "red" else None
    return labels


class _Cached(msgspec.Struct, frozen=True):
    result: L2Result
    features: dict[str, bytes]  # service.hidden_states.features_to_bytes
    truncated: bool = False


class ReplayCache:
    """Raw L2 answers and hidden states of replayed texts, one msgpack file per text."""

    def __init__(
        self, root: str | Path, model_sha: str, prompt_sha: str, mode: str, capture: Capture | None = None
    ) -> None:
        self.mode = mode
        self.capture = capture or Capture()
        layers = ""
        if self.capture:
            layers = "-p" + ".".join(map(str, self.capture.pooled)) + "-a" + ".".join(map(str, self.capture.answers))
        self.dir = Path(root) / f"{model_sha[:16]}-{prompt_sha[:16]}-{mode}{layers}"

    def _path(self, sha: str) -> Path:
        return self.dir / f"{sha}.msgpack"

    def get(self, sha: str) -> tuple[L2Result, dict[str, np.ndarray], bool] | None:
        try:
            entry = msgspec.msgpack.decode(self._path(sha).read_bytes(), type=_Cached)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None
        return entry.result, features_from_bytes(entry.features), entry.truncated

    def put(self, sha: str, result: L2Result, features: dict[str, np.ndarray], truncated: bool) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        entry = _Cached(
            result=result,
            truncated=truncated,
            features=features_to_bytes(features),
        )
        tmp = self._path(sha).with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(msgspec.msgpack.encode(entry))
        os.replace(tmp, self._path(sha))


def replay(
    records: Iterable[LabelledTicket],
    source: str,
    cache: ReplayCache,
    classifier: Callable[[], Any],
    timeout_s: float = 300.0,
    progress: Callable[[int, int, str], None] | None = None,
    l1: Callable[[str], str] | None = None,
) -> tuple[list[Example], Counter]:
    """Labelled records through the real classifier (uncalibrated), cached.

    `classifier` is a factory so that the model is loaded only when some text is not cached;
    `l1`, when given, tells each example's L1 level (Example.l1_level).
    Returns the examples and a count of tickets left out (and why).
    """
    records = list(records)
    examples: list[Example] = []
    skipped: Counter = Counter()
    model = None
    for i, rec in enumerate(records):
        text = ticket_text(rec.subject, rec.body)
        sha = text_sha(text)
        hit = cache.get(sha)
        if hit is None:
            if model is None:
                model = classifier()
                if getattr(model, "calibrator", None) is not None:
                    raise ReplayError("the replay classifier must be uncalibrated")
                if getattr(model, "mode", cache.mode) != cache.mode:
                    raise ReplayError(f"the replay classifier runs mode {model.mode!r}, serving runs {cache.mode!r}")
                runner = getattr(model, "runner", None)
                if runner is not None and hasattr(runner, "set_capture"):
                    # every candidate layer, whatever the factory set up: the cache holds them all
                    runner.set_capture(cache.capture)
            out = model.classify(text, timeout_s=timeout_s)
            if out.result.method == "unavailable":
                skipped["l2 unavailable"] += 1
                log.warning("recalibrate_replay_unavailable", id=rec.id, reason=out.result.reason)
                continue
            cache.put(sha, out.result, out.features, out.truncated)
            hit = (out.result, out.features, out.truncated)
        result, feats, truncated = hit
        examples.append(
            Example(
                id=rec.id,
                source=source,
                text_sha=sha,
                labels=labels_from_record(rec),
                answers=result.answers,
                features=feats,
                truncated=truncated,
                language=rec.language,
                l1_level=l1(text) if l1 is not None else "none",
            )
        )
        if progress is not None:
            progress(i + 1, len(records), rec.id)
    return examples, skipped


class ReplayedClassifier:
    """The serving classifier's verdicts without the model: raw answers and hidden states from
    the replay cache (the same the model gives; tests/l2/test_features_model.py), the artifact
    applied and the level decided by the very functions serving uses. So `triage eval` figures
    for a new artifact cost seconds instead of a replay (`triage study served`)."""

    def __init__(self, cache: ReplayCache, prompts: Any, calibrator: Any, model: Any, thresholds: Any = None) -> None:
        from service.l2.decision import Thresholds

        self.cache = cache
        self.prompts = prompts
        self.calibrator = calibrator
        self.model_info = model
        self.prompt_sha = prompts.sha
        self.mode = cache.mode
        self.thresholds = thresholds or Thresholds()
        self.runner = type("Replayed", (), {"n_threads": 0})()

    def classify(self, text: str, timeout_s: float | None = None) -> Any:
        from service.l2.classifier import Classification, verdict
        from service.l2.decide import Decided, apply_calibration

        hit = self.cache.get(text_sha(text))
        if hit is None:
            raise ReplayError(f"text {text_sha(text)[:12]} is not in the replay cache {self.cache.dir}")
        result, features, truncated = hit
        answers, calibrated, version, gate, failure = apply_calibration(dict(result.answers), features, self.calibrator)
        reason = "; ".join(r for r in (result.reason if result.method == "generated" else None, failure) if r) or None
        decided = Decided(
            method=result.method,
            answers=answers,
            calibrated=calibrated,
            calibration_version=version,
            tokens_evaluated=result.tokens_evaluated,
            timings=dict(result.timings_ms),
            features=features,
            truncated=truncated,
            reason=reason,
            gate=gate,
        )
        return Classification(
            result=verdict(decided, self.calibrator, self.thresholds, self.prompts),
            features=features,
            truncated=truncated,
        )
