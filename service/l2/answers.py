"""Pure maths from a next-token distribution to an `Answer`: aliases, coverage, confidence.

No model here: the runner hands over the log-softmax of the logits at the answer position (over
the whole vocabulary) restricted to the question's alias tokens; everything else is arithmetic.
"""

from __future__ import annotations

import math

import numpy as np

from service.l2.prompts import Question
from service.results import Answer


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Numerically stable log-softmax over the last axis, in float64."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def answer_from_logprobs(question: Question, logprobs: dict[str, float]) -> Answer:
    """An Answer from the full-vocabulary log-probabilities of each option's alias token.

    `logprobs` is keyed by option label. coverage = mass on the aliases; probabilities are
    renormalised over them; confidence = p(chosen) * coverage, so an answer whose aliases the
    model barely considered never looks confident.
    """
    labels = question.labels()
    missing = [lab for lab in labels if lab not in logprobs]
    if missing:
        raise ValueError(f"log-probabilities missing for options {missing}")
    lp = np.array([logprobs[lab] for lab in labels], dtype=np.float64)
    top = lp.max()
    mass = np.exp(lp - top)
    coverage = float(math.exp(top) * mass.sum())
    probs = mass / mass.sum()
    return _build(
        question,
        {lab: float(p) for lab, p in zip(labels, probs, strict=True)},
        {lab: float(v) for lab, v in zip(labels, lp, strict=True)},
        coverage,
    )


def _build(question: Question, probabilities: dict[str, float], logprobs: dict[str, float], coverage: float) -> Answer:
    labels = question.labels()
    chosen = max(labels, key=lambda lab: probabilities[lab])  # ties: the first option
    coverage = min(max(coverage, 0.0), 1.0)
    answer = Answer(
        kind=question.kind,
        options=list(labels),
        chosen=chosen,
        probabilities=probabilities,
        logprobs=logprobs,
        coverage=coverage,
        confidence=probabilities[chosen] * coverage,
        method="logits",
    )
    if question.kind == "boolean":
        answer.probability = probabilities["yes"]
    elif question.kind == "score":
        answer.value = sum(int(lab) * p for lab, p in probabilities.items())
        answer.mode = int(chosen)
    return answer


def merge_permutations(question: Question, variants: list[Answer]) -> Answer:
    """Average several option orders of one choice question, per option label.

    Probabilities and coverage are arithmetic means; logprobs are means of the per-order
    log-probabilities (a geometric mean of the alias probabilities), kept for recalibration.
    """
    if not variants:
        raise ValueError("no variants to merge")
    if len(variants) == 1:
        return variants[0]
    labels = question.labels()
    probs = {
        lab: float(np.mean([v.probabilities[lab] for v in variants]))  # type: ignore[index]
        for lab in labels
    }
    total = sum(probs.values())
    probs = {lab: p / total for lab, p in probs.items()}
    logprobs = {
        lab: float(np.mean([v.logprobs[lab] for v in variants]))  # type: ignore[index]
        for lab in labels
    }
    coverage = float(np.mean([v.coverage for v in variants]))
    return _build(question, probs, logprobs, coverage)


def generated_answer(question: Question, label: str) -> Answer:
    """An answer read from constrained generation: no probabilities, no confidence."""
    if label not in question.labels():
        raise ValueError(f"generated {label!r} is not one of {list(question.labels())}")
    answer = Answer(kind=question.kind, options=list(question.labels()), chosen=label, method="generated")
    if question.kind == "score":
        answer.mode = int(label)
        answer.value = float(label)
    return answer
