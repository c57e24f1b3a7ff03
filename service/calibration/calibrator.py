"""The serving side of calibration: per-question maps from raw answers to calibrated ones.

A `Calibrator` is what the classifier holds (service.l2.decide.Calibrator protocol): `apply`
turns raw logits answers into calibrated ones, `thresholds` replaces the decision defaults,
`version` names the artifact. numpy only: nothing here imports scikit-learn.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import msgspec
import numpy as np

from service.calibration.heads import LinearHead
from service.calibration.maths import Scaling, softmax
from service.calibration.ood import GreenGate
from service.errors import CalibrationMismatch
from service.l2.decision import Thresholds
from service.results import Answer

# head: on the hidden state at this question's answer position; head_all: on the hidden states
# of every question's answer position, concatenated in `inputs` order (the ticket seen from all
# the questions; measured better for risk and the flags, worse for category).
Method = Literal["raw", "temperature", "vector", "head", "head_all"]
METHODS: tuple[Method, ...] = ("raw", "temperature", "vector", "head", "head_all")
HEADS = ("head", "head_all")


class QuestionModel:
    """One question's chosen map: raw softmax, temperature/vector scaling, or a learned head."""

    def __init__(
        self,
        method: Method,
        options: tuple[str, ...],
        kind: str,
        scaling: Scaling | None = None,
        head: LinearHead | None = None,
        inputs: tuple[str, ...] = (),
    ) -> None:
        if method in ("temperature", "vector") and scaling is None:
            raise ValueError(f"method {method} needs a scaling")
        if method in HEADS and head is None:
            raise ValueError(f"method {method} needs a head")
        if method == "head_all" and not inputs:
            raise ValueError("method head_all needs the names of its inputs")
        if head is not None and head.n_classes != len(options):
            raise ValueError(f"head has {head.n_classes} outputs for {len(options)} options")
        if scaling is not None and len(scaling.bias) != len(options):
            raise ValueError(f"bias has {len(scaling.bias)} entries for {len(options)} options")
        self.method = method
        self.options = tuple(options)
        self.kind = kind
        self.scaling = scaling
        self.head = head
        self.inputs = tuple(inputs)

    @property
    def needs_features(self) -> bool:
        return self.method in HEADS

    def predict(self, logits: np.ndarray, features: np.ndarray | None = None) -> np.ndarray:
        """(n, K) calibrated probabilities from (n, K) raw option log-probs and (n, d) features
        (for head_all: the inputs' hidden states concatenated)."""
        if self.method in HEADS:
            if features is None:
                raise ValueError("a head needs the hidden state")
            return self.head.predict_proba(features)  # type: ignore[union-attr]
        logits = np.atleast_2d(np.asarray(logits, dtype=np.float64))
        if self.method == "raw":
            return softmax(logits)
        return self.scaling.apply(logits)  # type: ignore[union-attr]


def option_logits(answer: Answer, options: tuple[str, ...]) -> np.ndarray | None:
    """The raw log-probabilities of the options, in `options` order; None if not all present."""
    if answer.logprobs is None or any(o not in answer.logprobs for o in options):
        return None
    values = np.array([answer.logprobs[o] for o in options], dtype=np.float64)
    return values if np.all(np.isfinite(values)) else None


def calibrated_answer(answer: Answer, probs: np.ndarray, method: Method) -> Answer:
    """`answer` with calibrated probabilities; the raw ones move to raw_probabilities."""
    options = answer.options
    p = {o: float(v) for o, v in zip(options, probs, strict=True)}
    chosen = options[int(np.argmax(probs))]  # ties: the first option, as in service.l2.answers
    raw = answer.raw_probabilities if answer.calibrated else answer.probabilities
    updates: dict[str, object] = {
        # "raw" is the unfitted softmax an artifact keeps when nothing beat it: not calibrated
        "probabilities": p,
        "raw_probabilities": raw,
        "chosen": chosen,
        "calibrated": method != "raw",
        "method": "head" if method in HEADS else "logits",
        # Same definition as the raw answer (p(chosen) * coverage): a ticket whose aliases the
        # model barely considered never looks confident, whatever the map.
        "confidence": p[chosen] * (answer.coverage if answer.coverage is not None else 1.0),
    }
    if answer.kind == "boolean":
        updates["probability"] = p["yes"]
    elif answer.kind == "score":
        updates["value"] = float(sum(int(o) * v for o, v in p.items()))
        updates["mode"] = int(chosen)
    return msgspec.structs.replace(answer, **updates)


class Calibrator:
    """A loaded artifact: question maps, thresholds, identity of the model and prompts."""

    def __init__(
        self,
        version: str,
        models: Mapping[str, QuestionModel],
        thresholds: Thresholds,
        *,
        model_sha: str = "",
        prompt_sha: str = "",
        created_at: float = 0.0,
        ece: Mapping[str, float] | None = None,
        path: str = "",
        gate: GreenGate | None = None,
    ) -> None:
        self.version = version
        self.models = dict(models)
        self.thresholds = thresholds
        self.model_sha = model_sha
        self.prompt_sha = prompt_sha
        self.created_at = created_at
        self.ece = dict(ece or {})
        self.path = path
        self.gate = gate

    def __repr__(self) -> str:
        return f"Calibrator({self.version!r}, questions={sorted(self.models)})"

    @property
    def feature_names(self) -> frozenset[str]:
        """Every hidden-state vector a head of this artifact reads (service.l2.decide names)."""
        names: set[str] = set()
        for name, model in self.models.items():
            if model.method == "head_all":
                names.update(model.inputs)
            elif model.method == "head":
                names.add(name)
        if self.gate is not None:
            names.update(self.gate.info.inputs)
        return frozenset(names)

    def green_gate(self, features: Mapping[str, np.ndarray]) -> tuple[bool, float | None] | None:
        """(green allowed, distance to the labelled greens), or None without a gate."""
        return self.gate.check(features) if self.gate is not None else None

    def apply(self, answers: dict[str, Answer], features: Mapping[str, np.ndarray]) -> dict[str, Answer]:
        """Calibrated copies of the answers this artifact covers; others are returned as given.

        Only logits answers are touched (a generated answer has no distribution to calibrate).
        All or nothing: the thresholds were chosen on calibrated probabilities, so an answer this
        artifact should map but cannot (other options, missing log-probs, a hidden state missing
        or of another size) raises CalibrationMismatch; the classifier then keeps every answer
        raw with the default thresholds and says why (service.l2.decide).
        """
        out: dict[str, Answer] = {}
        for name, answer in answers.items():
            model = self.models.get(name)
            if model is None or answer.method not in ("logits", "head"):
                out[name] = answer
                continue
            if tuple(answer.options) != model.options:
                raise CalibrationMismatch(
                    f"{name}: artifact {self.version} has options {list(model.options)}, "
                    f"the answer {list(answer.options)}"
                )
            logits = option_logits(answer, model.options)
            feats = None
            if model.needs_features:
                feats = head_input(name, model, features, self.version)
            elif logits is None:
                raise CalibrationMismatch(f"{name}: answer has no log-probabilities for {list(model.options)}")
            probs = model.predict(np.zeros(len(model.options)) if logits is None else logits, feats)[0]
            out[name] = calibrated_answer(answer, probs, model.method)
        return out


def head_input(name: str, model: QuestionModel, features: Mapping[str, np.ndarray], version: str = "") -> np.ndarray:
    """The (1, d) input of a head: its question's hidden state, or every input's concatenated."""
    names = model.inputs if model.method == "head_all" else (name,)
    parts = []
    for part in names:
        vector = features.get(part)
        if vector is None:
            raise CalibrationMismatch(f"{name}: head of {version} needs the hidden state of {part!r}, which is missing")
        parts.append(np.asarray(vector, dtype=np.float64).ravel())
    x = np.concatenate(parts)
    dim = model.head.dim  # type: ignore[union-attr]
    if x.shape != (dim,):
        raise CalibrationMismatch(f"{name}: head of {version} needs a hidden state of shape ({dim},), got {x.shape}")
    return x[None, :]
