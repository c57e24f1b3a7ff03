"""Synthetic labelled datasets for the calibration tests: known structure, no model."""

from __future__ import annotations

import numpy as np

from service.calibration.fit import Dataset, QuestionData
from service.results import RED_FLAGS

CATEGORIES = ("billing", "technical", "account", "shipping", "sales", "security", "legal", "other")


def overconfident_logits(
    y: np.ndarray, k: int, rng: np.random.Generator, signal: float = 1.5, temperature: float = 0.25
) -> np.ndarray:
    """Logits of a model that knows something (signal) but is far too sure (divided by T)."""
    base = rng.normal(size=(len(y), k))
    base[np.arange(len(y)), y] += signal
    return base / temperature


def dataset(n: int = 240, d: int = 16, seed: int = 0, with_features: bool = True) -> Dataset:
    rng = np.random.default_rng(seed)
    risk = rng.choice(3, size=n, p=[0.4, 0.35, 0.25])
    flags = {}
    for i, f in enumerate(RED_FLAGS):
        # A flag is present on about a third of red tickets each, never on non-red ones.
        yes = (risk == 2) & (rng.random(n) < 0.45 + 0.1 * i)
        flags[f] = np.where(yes, 0, 1)  # options (yes, no)
    category = rng.choice(len(CATEGORIES), size=n)
    urgency = rng.choice(6, size=n)
    # Features carry the labels linearly plus noise: a head can learn them.
    proj = rng.normal(size=(6, d))
    signal = np.stack([risk == 0, risk == 2, *(flags[f] == 0 for f in RED_FLAGS), category % 2 == 0], axis=1).astype(
        float
    )
    feats = signal @ proj * 1.5 + rng.normal(size=(n, d))

    def q(kind, options, labels, logits):
        return QuestionData(kind, options, logits, labels.astype(np.int64), feats.copy() if with_features else None)

    questions = {
        "risk": q("choice", ("green", "yellow", "red"), risk, overconfident_logits(risk, 3, rng)),
        **{f: q("boolean", ("yes", "no"), flags[f], overconfident_logits(flags[f], 2, rng)) for f in RED_FLAGS},
        "category": q("choice", CATEGORIES, category, overconfident_logits(category, 8, rng, 2.0)),
        "urgency": q("score", tuple(str(i) for i in range(6)), urgency, overconfident_logits(urgency, 6, rng, 1.0)),
        # like the small model: P(yes) about 0.65 on every ticket, no labels
        "instructions": QuestionData(
            "boolean",
            ("yes", "no"),
            np.log(np.stack([p := 0.65 + 0.02 * rng.standard_normal(n), 1 - p], axis=1)),
            np.full(n, -1, dtype=np.int64),
        ),
    }
    if with_features:
        # head_all's input: this ticket's hidden states at two positions side by side
        shared = np.concatenate([feats, rng.normal(size=(n, d))], axis=1)
        for qd in questions.values():
            qd.shared, qd.shared_inputs = shared, ("risk", "commitment")
    return Dataset(
        ids=[f"T{i}" for i in range(n)],
        questions=questions,
        risk_generated=np.full(n, -1),
        blocked=np.zeros(n, dtype=bool),
    )
