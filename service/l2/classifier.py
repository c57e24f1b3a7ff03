"""The L2 classifier the worker holds: one resident model, the policy questions, fail-closed.

`Classifier.classify(text)` never raises. Whatever goes wrong (model error, timeout, low
coverage, malformed fallback output, a broken calibrator) the verdict is at least yellow and the
reason says why. The hidden states read at each answer position come back beside the result
(`Classification.features`), never inside it: they are for the recalibration job, not the API.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import numpy as np
import structlog

from service.l2.decide import (
    Calibrator,
    Decided,
    Fallback,
    capture_for,
    check_aliases,
    decide,
    prefix_layout,
)
from service.l2.decision import Thresholds, decide_level
from service.l2.features import RECORDED, feature_names
from service.l2.prompts import Prompts, load_prompts
from service.l2.runner import Capture, Runner
from service.model_fetch import recorded_sha256, resolve_model_path
from service.results import Answer, L2Result, ModelInfo, max_level
from service.settings import PROJECT_ROOT, Settings

log = structlog.get_logger()

DEFAULT_MODE = "fused"  # measured fastest of fused / parallel / rewind: see docs/l2.md
FALLBACK_QUESTIONS = ("risk", "category")


@dataclass
class Classification:
    """One ticket's L2 outcome: the stored result and, beside it, the hidden states."""

    result: L2Result
    features: dict[str, np.ndarray] = field(default_factory=dict)  # float32 (n_embd,) each
    variants: dict[str, Answer] = field(default_factory=dict)  # per option order (risk@k)
    truncated: bool = False


def bundled_model_path(settings: Settings) -> Path:
    """TRIAGE_MODEL_PATH if set (must be a GGUF), else the bundled model, which must verify
    against its known sha256: an unverified file is never loaded (ModelError otherwise)."""
    return resolve_model_path(settings.model_path, settings.model_dir, settings.model_size)[0]


def model_sha256(path: Path) -> str:
    """From the `<file>.sha256` sidecar (written by fetch-model) when fresh, else hashed."""
    return recorded_sha256(path)


class Classifier:
    """Risk, red flags, category, urgency and team of a ticket from one resident GGUF."""

    def __init__(
        self,
        model_path: str | Path,
        n_threads: int = 2,
        n_ctx: int = 4096,
        prompts_dir: str | Path = PROJECT_ROOT / "prompts",
        calibrator: Calibrator | None = None,
        *,
        timeout_s: float = 30.0,
        mode: str = DEFAULT_MODE,
        thresholds: Thresholds | None = None,
        risk_permutations: int | None = None,
        runner: Runner | None = None,
        capture: Capture | None = None,
        record: str | None = RECORDED,
    ) -> None:
        self.prompts: Prompts = load_prompts(prompts_dir)
        self.questions = dict(self.prompts.questions)
        if risk_permutations is not None:
            risk = msgspec.structs.replace(self.questions["risk"], permutations=risk_permutations)
            risk.validate("risk")
            self.questions["risk"] = risk
        self.mode = mode
        self.timeout_s = timeout_s
        self.thresholds = thresholds or Thresholds()
        self._lock = threading.Lock()
        self._model_info: ModelInfo | None = None
        self.runner = runner or Runner(model_path, n_threads=n_threads, n_ctx=n_ctx)
        self._fixed_capture = capture  # a replay reads every candidate layer, whatever heads need
        # read on every ticket, artifact or not, so that operator decisions can train one
        self._recorded = frozenset(feature_names(record, self.questions, self.runner.n_layer) if record else ())
        self._calibrator = None
        self.set_calibrator(calibrator)
        check_aliases(self.runner, self.questions)  # a multi-token alias stops start-up here
        # Level 1 at start-up: the system context goes into the KV cache before any ticket.
        started = time.perf_counter()
        prefix_tokens, _, _ = prefix_layout(self.runner, self.prompts.context, self.prompts.framing)
        self.runner.prefix(prefix_tokens)
        log.info(
            "l2_ready",
            model=self.runner.model_path.name,
            prompt_sha=self.prompt_sha[:12],
            system_tokens=len(prefix_tokens),
            mode=mode,
            warmup_ms=round((time.perf_counter() - started) * 1000, 1),
        )

    @classmethod
    def from_settings(cls, settings: Settings, calibrator: Calibrator | None = None, **kwargs) -> Classifier:
        return cls(
            bundled_model_path(settings),
            n_threads=settings.n_threads,
            n_ctx=settings.n_ctx,
            prompts_dir=settings.prompts_dir,
            calibrator=calibrator,
            timeout_s=settings.l2_timeout_s,
            **kwargs,
        )

    # ------------------------------------------------------------------ identity
    @property
    def prompt_sha(self) -> str:
        return self.prompts.sha

    @property
    def model_info(self) -> ModelInfo:
        if self._model_info is None:
            path = self.runner.model_path
            self._model_info = ModelInfo(name=path.name, sha256=model_sha256(path))
        return self._model_info

    @property
    def system_tokens(self) -> int:
        return len(prefix_layout(self.runner, self.prompts.context, self.prompts.framing)[0])

    @property
    def calibrator(self) -> Calibrator | None:
        return self._calibrator

    def set_calibrator(self, calibrator: Calibrator | None) -> None:
        """Swap the calibration artifact (None: back to raw logits and default thresholds).

        The runner then reads the intermediate layers this artifact's heads and gate need, and
        those every ticket records for recalibration (`record`)."""
        capture = self._fixed_capture
        if capture is None:
            needed = calibrator.feature_names if calibrator is not None else frozenset()
            capture = capture_for(needed | self._recorded)
        with self._lock:
            self.runner.set_capture(capture)
            self._calibrator = calibrator

    # ------------------------------------------------------------------ classify
    def classify(self, text: str, timeout_s: float | None = None, questions: dict | None = None) -> Classification:
        """Classify one ticket text; never raises, never green on any failure."""
        started = time.perf_counter()
        # The deadline starts now: waiting for the model behind another ticket counts too.
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        calibrator = self._calibrator
        try:
            with self._lock:
                decided = decide(
                    self.runner,
                    text,
                    self.prompts.context,
                    questions or self.questions,
                    framing=self.prompts.framing,
                    mode=self.mode,
                    deadline=deadline,
                    calibrator=calibrator,
                    fallback=Fallback(
                        names=FALLBACK_QUESTIONS,
                        min_coverage=self.thresholds.min_coverage,
                        instruction=self.prompts.fallback_prompt,
                    ),
                )
            out = Classification(
                result=self._verdict(decided, calibrator),
                features=decided.features,
                variants=decided.variants,
                truncated=decided.truncated,
            )
        except Exception as exc:  # belt and braces: decide() already catches model failures
            log.exception("l2_classify_failed")
            out = Classification(
                result=L2Result(
                    level="yellow", method="unavailable", reason=f"classifier error: {type(exc).__name__}: {exc}"
                )
            )
        out.result.timings_ms["total_ms"] = (time.perf_counter() - started) * 1000
        return out

    def _verdict(self, d: Decided, calibrator: Calibrator | None) -> L2Result:
        return verdict(d, calibrator, self.thresholds, self.prompts)

    def close(self) -> None:
        self.runner.close()


def verdict(d: Decided, calibrator: Calibrator | None, thresholds: Thresholds, prompts: Prompts) -> L2Result:
    """The L2 result of decided answers: the artifact's thresholds when they were calibrated,
    its green gate, the fallback never green, the team routed from the category."""
    if d.method == "unavailable":
        return L2Result(level="yellow", method="unavailable", tokens_evaluated=0, timings_ms=d.timings, reason=d.reason)
    if d.calibrated and calibrator is not None and calibrator.thresholds is not None:
        thresholds = calibrator.thresholds
    unlike = None
    if d.gate is not None and not d.gate[0]:
        distance = "not measurable" if d.gate[1] is None else f"{d.gate[1]:.2f}"
        unlike = f"unlike the labelled greens (gate distance {distance})"
    level, red_flags, why = decide_level(d.answers, thresholds, truncated=d.truncated, unlike_greens=unlike)
    # The gate "blocked" a ticket when it is the only thing between it and green.
    ood_blocked = (
        bool(unlike)
        and d.method != "generated"
        and level == "yellow"
        and decide_level(d.answers, thresholds, truncated=d.truncated)[0] == "green"
    )
    if d.method == "generated":
        level = max_level(level, "yellow")  # the fallback path is never green
    reason = why if not d.reason else f"{d.reason}; {why}"
    answers = d.answers
    urgency = answers.get("urgency")
    category = answers["category"].chosen if "category" in answers else None
    return L2Result(
        level=level,
        method=d.method,
        calibrated=d.calibrated,  # type: ignore[arg-type]
        calibration_version=d.calibration_version,
        answers=answers,
        red_flags=red_flags,
        category=category,
        urgency=urgency.mode if urgency is not None else None,
        team=prompts.team_for(category),
        tokens_evaluated=d.tokens_evaluated,
        timings_ms=dict(d.timings),
        reason=reason,
        ood_distance=d.gate[1] if d.gate is not None else None,
        ood_blocked=ood_blocked,
    )
