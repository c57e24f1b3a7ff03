"""service.pipeline: final level = max(L1, L2), and nothing is green but from the logits path."""

from __future__ import annotations

import pytest

from service.pipeline import combine, unavailable
from service.results import L1Result, L2Result, ModelInfo, Timings

MODEL = ModelInfo(name="m.gguf", sha256="0" * 64)


def _final(l1: str, l2: str, method: str = "logits") -> tuple[str, str]:
    result = combine(
        "t_1",
        L1Result(level=l1, rules=[]),  # type: ignore[arg-type]
        L2Result(level=l2, method=method),  # type: ignore[arg-type]
        MODEL,
        "p",
        Timings(),
        1.0,
    )
    return result.final_level, result.l2.level


@pytest.mark.parametrize(
    ("l1", "l2", "method", "final"),
    [
        ("none", "green", "logits", "green"),
        ("none", "yellow", "logits", "yellow"),
        ("yellow", "green", "logits", "yellow"),  # a rule is never lowered
        ("red", "green", "logits", "red"),
        ("none", "red", "logits", "red"),
        ("none", "green", "generated", "yellow"),  # green only from the logits path
        ("none", "green", "unavailable", "yellow"),
        ("red", "yellow", "generated", "red"),
    ],
)
def test_final_level(l1, l2, method, final):
    assert _final(l1, l2, method)[0] == final


def test_fail_closed_says_why_and_unavailable_is_yellow():
    result = combine(
        "t_1", L1Result(level="none", rules=[]), L2Result(level="green", method="generated"), MODEL, "p", Timings(), 1.0
    )
    assert result.l2.reason == "generated is never green"
    assert unavailable("timeout") == L2Result(level="yellow", method="unavailable", reason="timeout")
