"""Tickets stored in Redis the way the worker and the API store them, with synthetic answers.

Each ticket gets raw answers for every prompt question (log-probs drawn around its label, too
sharp, like the small model) and hidden states that carry the label linearly, so a head can
learn from them. Used by the job tests that need decisions without running the model.
"""

from __future__ import annotations

import time

import msgspec
import numpy as np

from service.l2.answers import answer_from_logprobs
from service.l2.prompts import load_prompts
from service.results import (
    RED_FLAGS,
    Decision,
    L1Result,
    L2Result,
    ModelInfo,
    TicketIn,
    Timings,
    TriageResult,
)
from service.settings import PROJECT_ROOT
from service.store import Keys, encode_features

PROMPTS = load_prompts(PROJECT_ROOT / "prompts")
DIM = 24


def synthetic(label: dict, rng: np.random.Generator, proj: np.ndarray):
    """(answers, features) for a ticket whose labels are `label`."""
    answers = {}
    features = {}
    signal = np.zeros(proj.shape[0])
    signal[["green", "yellow", "red"].index(label["risk"])] = 1
    for i, flag in enumerate(RED_FLAGS):
        signal[3 + i] = 1.0 if label.get(flag) else 0.0
    for name, q in PROMPTS.questions.items():
        labels = q.labels()
        truth = {"risk": label["risk"], "category": label.get("category"), "urgency": str(label.get("urgency"))}.get(
            name
        )
        if name in RED_FLAGS:
            truth = "yes" if label.get(name) else "no"
        z = rng.normal(size=len(labels))
        if truth in labels:
            z[labels.index(truth)] += 1.0
        lp = z * 4.0 - 8.0  # too sharp, and some mass off the aliases
        answers[name] = answer_from_logprobs(q, dict(zip(labels, lp.tolist(), strict=True)))
        features[name] = (signal @ proj * 2.0 + rng.normal(size=proj.shape[1])).astype(np.float32)
    return answers, features


def store_ticket(
    client,
    keys: Keys,
    ticket_id: str,
    label: dict,
    *,
    model: ModelInfo,
    prompt_sha: str,
    rng: np.random.Generator,
    proj: np.ndarray,
    features: bool = True,
    body: str | None = None,
) -> None:
    answers, feats = synthetic(label, rng, proj)
    l2 = L2Result(level="yellow", method="logits", answers=answers)
    result = TriageResult(
        id=ticket_id,
        status="done",
        final_level="yellow",
        l1=L1Result(level="none", rules=[]),
        l2=l2,
        category=None,
        urgency=None,
        model=model,
        prompt_sha=prompt_sha,
        rules_sha="",
        timings_ms=Timings(),
        completed_at=time.time(),
    )
    request = TicketIn(body=body or f"ticket {ticket_id}", subject="s")
    client.hset(
        keys.ticket(ticket_id),
        mapping={"status": "done", "result": msgspec.json.encode(result), "request": msgspec.json.encode(request)},
    )
    if features:
        client.set(keys.features(ticket_id), encode_features(feats))


def decide(
    client, keys: Keys, ticket_id: str, level: str, flags: dict | None = None, category: str | None = None
) -> None:
    dec = Decision(
        ticket_id=ticket_id,
        operator="op",
        action="edit",
        correct_level=level,
        given_level="yellow",
        decided_at=time.time(),
        flags=flags,
        category=category,
    )
    client.xadd(keys.decisions, {"id": ticket_id, "data": msgspec.json.encode(dec)})


def random_label(rng: np.random.Generator) -> dict:
    risk = str(rng.choice(["green", "yellow", "red"], p=[0.4, 0.35, 0.25]))
    flags = {f: False for f in RED_FLAGS}
    if risk == "red":
        flags[str(rng.choice(RED_FLAGS))] = True
    return {"risk": risk, **flags, "category": str(rng.choice(PROMPTS.questions["category"].options))}


def fill_decided(client, keys: Keys, n: int, *, model: ModelInfo, seed: int = 0) -> dict[str, dict]:
    """`n` stored tickets t0.. with random labels, each decided with its label; {id: label}."""
    rng = np.random.default_rng(seed)
    proj = rng.normal(size=(6, DIM))
    labels = {}
    for i in range(n):
        label = random_label(rng)
        tid = f"t{i}"
        store_ticket(client, keys, tid, label, model=model, prompt_sha=PROMPTS.sha, rng=rng, proj=proj)
        decide(client, keys, tid, label["risk"], flags={f: label[f] for f in RED_FLAGS}, category=label["category"])
        labels[tid] = label
    return labels
