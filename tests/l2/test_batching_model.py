"""Cross-ticket batching (Runner.open_and_ask_many) answers as one ticket at a time does.

Real model, real tickets: three tickets in the same decode calls against each alone. llama.cpp
sums in another order when the batch has another shape, so the answers may move a little, never
more than a bound far under any threshold step; the ticket means stay each ticket's own (a mix
of two tickets would move them far)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from service.l2.decide import prepare, read_answers
from service.l2.runner import Capture, Runner
from service.results import ticket_text
from service.settings import load_settings
from tests.l2.support import MODEL, shared_classifier

pytestmark = pytest.mark.model

BOUND = 0.03  # probability: the batch-shape noise the bench measures between modes (docs/l2.md)


def texts() -> list[str]:
    """Three dev tickets of different languages and risks (the first of each risk in the file)."""
    lines = Path(load_settings().dev_set).read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    picked = {r["risk"]: r for r in reversed(rows)}
    return [ticket_text(r.get("subject"), r["body"]) for r in picked.values()]


@pytest.fixture(scope="module")
def batching_runner():
    classifier = shared_classifier()  # skips without the model
    runner = Runner(MODEL, n_threads=2, n_ctx=4096, n_seq_max=64, capture=Capture(pooled=(12,)))
    yield runner, classifier
    runner.close()


def test_three_tickets_in_one_batch_answer_as_each_alone(batching_runner):
    runner, classifier = batching_runner
    prompts, questions = classifier.prompts, classifier.questions
    prepared = [prepare(runner, t, prompts.context, questions, prompts.framing) for t in texts()]
    alone = [runner.open_and_ask_many(p.prefix, [(p.tokens, p.suffixes)])[0] for p in prepared]
    together = runner.open_and_ask_many(prepared[0].prefix, [(p.tokens, p.suffixes) for p in prepared])

    for p, (pooled_1, readouts_1), (pooled_k, readouts_k) in zip(prepared, alone, together, strict=True):
        answers_1, _ = read_answers(p, questions, readouts_1)
        answers_k, _ = read_answers(p, questions, readouts_k)
        assert answers_1.keys() == answers_k.keys() == questions.keys()
        for name, answer in answers_1.items():
            for label, probability in answer.probabilities.items():
                assert abs(probability - answers_k[name].probabilities[label]) <= BOUND, (name, label)
        a, b = pooled_1[12], pooled_k[12]
        assert float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))) > 0.999
    # each ticket's mean is its own: the first and second tickets' means differ
    a, b = together[0][0][12], together[1][0][12]
    assert float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))) < 0.999
