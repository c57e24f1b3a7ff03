"""The labelled examples a fit reads: operator decisions joined with the stored answers and
hidden states of the same tickets, merged with a replayed corpus, and turned into the arrays of
a `Dataset` (service.calibration.fit)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec
import numpy as np

from service.calibration.fit import CALIBRATED, Dataset, QuestionData, label_index
from service.calibration.replay import Example, labels_from_decision, text_sha
from service.labelled import LEVELS
from service.results import Decision, ticket_text
from service.store import Keys, decisions_since, load_features, load_ticket


def collect_decisions(
    client: Any, keys: Keys, model_sha: str, prompt_sha: str, batch: int = 1000
) -> tuple[list[Example], Counter]:
    """Latest decision per ticket joined with its stored result and hidden states.

    Tickets classified by another model or prompt are left out (their log-probs and hidden
    states are not what the running classifier produces), as are tickets whose result or
    features expired, and tickets whose L2 never answered.
    """
    latest: dict[str, Decision] = {}
    skipped: Counter = Counter()
    for entry in decisions_since(client, keys, batch=batch):
        if entry.decision is None:
            skipped["malformed decision"] += 1
            continue
        latest[entry.decision.ticket_id] = entry.decision  # a later decision overrides
    examples: list[Example] = []
    for ticket_id, dec in latest.items():
        try:
            stored = load_ticket(client, keys, ticket_id)
        except (msgspec.DecodeError, msgspec.ValidationError):
            skipped["malformed result"] += 1
            continue
        result = stored.result if stored is not None else None
        if result is None:
            skipped["result expired or missing"] += 1
            continue
        if result.model.sha256 != model_sha or result.prompt_sha != prompt_sha:
            skipped["other model or prompt"] += 1
            continue
        if result.l2.method == "unavailable" or not result.l2.answers:
            skipped["l2 unavailable"] += 1
            continue
        feats = load_features(client, keys, ticket_id)
        if not feats:
            skipped["features expired or missing"] += 1
            continue
        request = stored.request if stored is not None else None
        sha = text_sha(ticket_text(request.subject, request.body)) if request else ""
        examples.append(
            Example(
                id=ticket_id,
                source="decisions",
                text_sha=sha,
                labels=labels_from_decision(dec),
                answers=result.l2.answers,
                features=feats,
                truncated="truncated" in (result.l2.reason or ""),
            )
        )
    return examples, skipped


def merge(primary: list[Example], secondary: list[Example]) -> list[Example]:
    """primary plus those of secondary whose text is not already there (an operator's label on
    the same text wins over the corpus; duplicates across folds would flatter every figure)."""
    seen = {e.text_sha for e in primary if e.text_sha}
    out = list(primary)
    for e in secondary:
        if e.text_sha and e.text_sha in seen:
            continue
        seen.add(e.text_sha)
        out.append(e)
    return out


def _stack(examples: list[Example], names: tuple[str, ...]) -> np.ndarray | None:
    """(n, sum of dims) of the named vectors side by side; NaN rows where one is missing."""
    if not names:
        return None
    dims = {}
    for q in names:
        sizes = [len(e.features[q]) for e in examples if q in e.features]
        if not sizes:
            return None
        dims[q] = max(sizes)
    out = np.full((len(examples), sum(dims.values())), np.nan)
    for i, e in enumerate(examples):
        if all(q in e.features and len(e.features[q]) == dims[q] for q in names):
            out[i] = np.concatenate([e.features[q] for q in names])
    return out


def build_dataset(
    examples: list[Example],
    questions: dict[str, Any],
    head_inputs: tuple[str, ...] | None = None,
    gate_inputs: tuple[str, ...] = (),
) -> Dataset:
    """Arrays per question from the examples; `questions` maps name -> service.l2 Question.
    `head_inputs`: the vectors a head_all reads side by side (default: every question's final
    hidden state, in prompt order); `gate_inputs`: the green gate's (none: no gate)."""
    n = len(examples)
    data: dict[str, QuestionData] = {}
    for name in CALIBRATED + ("instructions",):
        if name not in questions:
            continue
        options = tuple(questions[name].labels())
        logits = np.full((n, len(options)), np.nan)
        labels = np.full(n, -1, dtype=np.int64)
        dims = {len(e.features[name]) for e in examples if name in e.features}
        dim = max(dims) if dims else 0
        feats = np.full((n, dim), np.nan) if dim else None
        for i, e in enumerate(examples):
            answer = e.answers.get(name)
            if (
                answer is not None
                and answer.method in ("logits", "head")
                and answer.logprobs
                and tuple(answer.options) == options
                and all(o in answer.logprobs for o in options)
            ):
                logits[i] = [answer.logprobs[o] for o in options]
            if feats is not None and name in e.features and len(e.features[name]) == dim:
                feats[i] = e.features[name]
            labels[i] = label_index(options, e.labels.get(name))
        data[name] = QuestionData(questions[name].kind, options, logits, labels, feats)
    if head_inputs is None:
        head_inputs = tuple(q for q in questions if any(q in e.features for e in examples))
    inputs = head_inputs
    shared = _stack(examples, inputs)
    for d in data.values():
        d.shared, d.shared_inputs = shared, inputs
    risk_generated = np.full(n, -1, dtype=np.int64)
    for i, e in enumerate(examples):
        risk = e.answers.get("risk")
        if risk is None:
            risk_generated[i] = 1  # no risk answer at all: the decision falls to yellow
        elif risk.method == "generated" or not risk.logprobs:
            risk_generated[i] = LEVELS.index(risk.chosen) if risk.chosen in LEVELS else 1
    blocked = np.array([e.truncated for e in examples], dtype=bool)
    l1_raised = np.array([e.l1_level in ("yellow", "red") for e in examples], dtype=bool)
    return Dataset(
        ids=[e.id for e in examples],
        questions=data,
        risk_generated=risk_generated,
        blocked=blocked,
        gate_x=_stack(examples, gate_inputs),
        gate_inputs=tuple(gate_inputs),
        l1_raised=l1_raised,
    )
