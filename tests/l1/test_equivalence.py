"""The fast engine answers exactly what the plain reference engine answers (tests/l1/reference.py).

Level, rule ids, spans into the original text and the hit texts, on a sample of the labelled
sets and the public corpus, on 32 KiB threads and log pastes, and on pathological input. The
whole of the labelled sets: `python -m tests.l1.reference ../shared/data/tickets/*.jsonl` (from the project root).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from service.l1 import bench, evaluate
from service.l1.normalise import fold_text, normalise
from service.results import ticket_text
from tests.l1 import reference
from tests.support import CORPUS, DEV_SET

TRAIN = DEV_SET.with_name("train.jsonl")


def _tickets(path: Path) -> list[str]:
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return [ticket_text(row.get("subject"), row.get("body", "")) for row in rows]


def _assert_same(pack, texts):
    different = [
        text[:80]
        for text in texts
        if reference.answer(evaluate(pack, text)) != reference.answer(reference.evaluate(pack, text))
    ]
    assert not different, different


def test_labelled_and_corpus_sample(pack):
    dev, train, corpus = _tickets(DEV_SET), _tickets(TRAIN), _tickets(CORPUS)
    if not dev:
        pytest.skip("no ticket data on this machine")
    rng = random.Random(17)
    _assert_same(pack, rng.sample(dev, 40) + rng.sample(train, 60) + rng.sample(corpus, 30))


def test_long_threads_log_pastes_and_dense_worst_case(pack):
    dev, corpus = _tickets(DEV_SET), _tickets(CORPUS)
    if not dev:
        pytest.skip("no ticket data on this machine")
    large = bench.synthetic_large(dev + corpus, corpus, count=6, seed=3)
    _assert_same(pack, large + bench.dense_large(dev, count=3, seed=4))


def test_pathological_input(pack):
    _assert_same(pack, list(bench.hostile_large(pack).values()))


def test_collapse_matches_the_character_by_character_version():
    rng = random.Random(5)
    alphabet = " \t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u1680\u2000\u2028\u2029\u3000\u200bab\u00e9\u9000"
    for _ in range(2000):
        original = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16)))
        norm, plain = normalise(original), reference._Normalised(original)
        assert norm.text == plain.text, repr(original)
        for start in range(len(norm.text) + 1):
            for end in range(start, len(norm.text) + 1):
                assert norm.span(start, end) == plain.span(start, end), (original, start, end)
    assert fold_text("a\u3000b")[0] == "a\u3000b"  # collapsing is the last step, not folding's
