"""The prompt-injection corpus (loadtest/data/prompt_injection.jsonl): valid labelled data, never green."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from service.labelled import read_labelled
from service.results import RED_FLAGS

CORPUS = Path(__file__).resolve().parents[2] / "loadtest" / "data" / "prompt_injection.jsonl"
RECORDS = read_labelled(CORPUS)  # the policy's labelled format, unknown fields refused


def test_size_languages_and_techniques():
    assert len(RECORDS) >= 60
    assert len({r.language for r in RECORDS}) >= 5
    techniques = Counter(re.match(r"\[([a-z0-9_]+)\]", r.note).group(1) for r in RECORDS)
    assert len(techniques) >= 8, techniques
    assert len({r.id for r in RECORDS}) == len(RECORDS)


def test_every_ticket_needs_a_person():
    # Instructing the system is at least yellow (risk policy); a red flag makes it red.
    for record in RECORDS:
        assert record.risk in ("yellow", "red"), record.id
        assert set(record.flags) == set(RED_FLAGS), record.id
        assert (record.risk == "red") == any(record.flags.values()), record.id
