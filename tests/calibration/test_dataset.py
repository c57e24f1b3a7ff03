"""The examples a fit reads: operator decisions joined in real Redis with the stored answers and
hidden states of the same tickets."""

from __future__ import annotations

import numpy as np

from service.calibration.dataset import collect_decisions
from service.results import RED_FLAGS, ModelInfo
from service.store import Keys
from tests.calibration import stored

MODEL = ModelInfo(name="m.gguf", sha256="e" * 64)


def test_decisions_are_joined_with_results_and_features(redis_client, prefix):
    keys = Keys(prefix)
    labels = stored.fill_decided(redis_client, keys, 6, model=MODEL)
    rng = np.random.default_rng(1)
    proj = rng.normal(size=(6, stored.DIM))
    # another model's ticket, a ticket whose features expired, a decision without a ticket
    stored.store_ticket(
        redis_client,
        keys,
        "other",
        {"risk": "green"},
        model=ModelInfo(name="x", sha256="f" * 64),
        prompt_sha=stored.PROMPTS.sha,
        rng=rng,
        proj=proj,
    )
    stored.decide(redis_client, keys, "other", "green")
    stored.store_ticket(
        redis_client,
        keys,
        "nofeat",
        {"risk": "green"},
        model=MODEL,
        prompt_sha=stored.PROMPTS.sha,
        rng=rng,
        proj=proj,
        features=False,
    )
    stored.decide(redis_client, keys, "nofeat", "green")
    stored.decide(redis_client, keys, "ghost", "red")
    # a second decision on t0 overrides the first; a red verdict without flags leaves them open
    stored.decide(redis_client, keys, "t0", "red")
    examples, skipped = collect_decisions(redis_client, keys, MODEL.sha256, stored.PROMPTS.sha, batch=2)
    by_id = {e.id: e for e in examples}
    assert sorted(by_id) == [f"t{i}" for i in range(6)]
    assert skipped == {"other model or prompt": 1, "features expired or missing": 1, "result expired or missing": 1}
    assert by_id["t0"].labels["risk"] == "red"
    assert all(by_id["t0"].labels[f] is None for f in RED_FLAGS)
    t1 = by_id["t1"]
    assert t1.labels["risk"] == labels["t1"]["risk"]
    assert t1.features["risk"].shape == (stored.DIM,) and t1.features["risk"].dtype == np.float32
    assert t1.answers["risk"].logprobs is not None and t1.text_sha


def test_non_red_decision_without_flags_means_no_flags(redis_client, prefix):
    keys = Keys(prefix)
    rng = np.random.default_rng(2)
    stored.store_ticket(
        redis_client,
        keys,
        "y",
        {"risk": "yellow"},
        model=MODEL,
        prompt_sha=stored.PROMPTS.sha,
        rng=rng,
        proj=rng.normal(size=(6, stored.DIM)),
    )
    stored.decide(redis_client, keys, "y", "yellow")
    (example,), _ = collect_decisions(redis_client, keys, MODEL.sha256, stored.PROMPTS.sha)
    assert all(example.labels[f] is False for f in RED_FLAGS)
    assert example.labels["urgency"] is None
