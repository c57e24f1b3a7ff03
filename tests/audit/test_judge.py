"""The judge's logic without a model: criteria before verdict, rule, cache keys, pairwise order."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from service.audit.judge import (
    AuditedDecision,
    Judge,
    MemoryCache,
    compare,
    verdict_cache_key,
)
from service.audit.rubric import DEFAULT_RUBRIC_DIR, load_rubric

from .support import LookupBackend

FALSE_GREEN = AuditedDecision(text="Please refund invoice 4471 in full.", level="green", category="billing", urgency=2)
HOWTO = AuditedDecision(text="How do I export my own drafts?", level="green", category="technical", urgency=1)


def _backend() -> LookupBackend:
    return LookupBackend(
        {
            "refund": {
                "green_needs_person": 0.9,
                "green_on_instruction": 0.1,
                "category_right": 0.8,
                "urgency_plausible": 0.7,
            },
            "export": {
                "green_needs_person": 0.2,
                "green_on_instruction": 0.05,
                "category_right": 0.3,
                "urgency_plausible": 0.8,
            },
        }
    )


def test_every_applicable_criterion_judged_and_rule_gives_verdict() -> None:
    judge = Judge(_backend(), load_rubric())
    verdict = judge.judge(FALSE_GREEN)
    assert [c.id for c in verdict.criteria] == [
        "green_needs_person",
        "green_on_instruction",
        "category_right",
        "urgency_plausible",
    ]
    assert verdict.failed == ["green_needs_person"]
    assert verdict.verdict == "unacceptable"
    # category_right fails on "no": P(no) = 0.7 -> one secondary failed -> still acceptable.
    howto = judge.judge(HOWTO)
    assert howto.failed == ["category_right"]
    assert howto.verdict == "acceptable"
    assert dict((c.id, c.p_fail) for c in howto.criteria)["category_right"] == pytest.approx(0.7)


def test_green_criteria_not_asked_for_yellow() -> None:
    backend = _backend()
    verdict = Judge(backend, load_rubric()).judge(
        AuditedDecision(text=FALSE_GREEN.text, level="yellow", category="billing", urgency=2)
    )
    assert backend.calls[-1][1] == ("category_right", "urgency_plausible")
    assert verdict.verdict == "acceptable"
    assert not [c for c in verdict.criteria if c.id == "green_needs_person"][0].applicable


def test_cache_hit_skips_the_model() -> None:
    backend, cache = _backend(), MemoryCache()
    judge = Judge(backend, load_rubric(), cache=cache)
    first = judge.judge(FALSE_GREEN)
    second = judge.judge(FALSE_GREEN)
    assert len(backend.calls) == 1
    assert second.cached and not first.cached
    assert second.verdict == first.verdict and second.failed == first.failed


def test_one_word_of_the_rubric_invalidates_the_cache(tmp_path: Path) -> None:
    folder = tmp_path / "judge"
    shutil.copytree(DEFAULT_RUBRIC_DIR, folder)
    backend, cache = _backend(), MemoryCache()
    Judge(backend, load_rubric(folder), cache=cache).judge(FALSE_GREEN)
    rubric_path = folder / "rubric.yaml"
    text = rubric_path.read_text()
    assert "reasonable for" in text
    rubric_path.write_text(text.replace("reasonable for", "sensible for", 1))
    Judge(backend, load_rubric(folder), cache=cache).judge(FALSE_GREEN)
    assert len(backend.calls) == 2  # the edited rubric missed the cache
    assert len(cache.data) == 2


def test_cache_key_covers_model_text_and_decision() -> None:
    rubric = load_rubric()
    base = verdict_cache_key("m" * 64, rubric.sha256, "logits", FALSE_GREEN)
    variants = [
        verdict_cache_key("n" * 64, rubric.sha256, "logits", FALSE_GREEN),
        verdict_cache_key("m" * 64, "r" * 64, "logits", FALSE_GREEN),
        verdict_cache_key("m" * 64, rubric.sha256, "generated", FALSE_GREEN),
        verdict_cache_key(
            "m" * 64,
            rubric.sha256,
            "logits",
            AuditedDecision(text=FALSE_GREEN.text + ".", level="green", category="billing", urgency=2),
        ),
        verdict_cache_key(
            "m" * 64,
            rubric.sha256,
            "logits",
            AuditedDecision(text=FALSE_GREEN.text, level="yellow", category="billing", urgency=2),
        ),
        verdict_cache_key(
            "m" * 64,
            rubric.sha256,
            "logits",
            AuditedDecision(text=FALSE_GREEN.text, level="green", category="legal", urgency=2),
        ),
    ]
    assert len({base, *variants}) == len(variants) + 1
    assert base == verdict_cache_key("m" * 64, rubric.sha256, "logits", FALSE_GREEN)


def test_generated_schema_puts_criteria_before_verdict_and_fails_closed() -> None:
    def reply(state: str, schema: dict) -> dict:
        # A malformed eliminatory answer (missing) and a secondary "no".
        return {
            "green_on_instruction": "no",
            "category_right": "no",
            "urgency_plausible": "yes",
            "verdict": "acceptable",
        }

    backend = LookupBackend(generate_reply=reply)
    judge = Judge(backend, load_rubric(), method="generated")
    _, schema = judge.generation_schema("green")
    assert list(schema["properties"]) == [
        "green_needs_person",
        "green_on_instruction",
        "category_right",
        "urgency_plausible",
        "verdict",
    ]
    assert schema["required"] == list(schema["properties"])
    verdict = judge.judge(HOWTO)
    assert verdict.failed == ["green_needs_person", "category_right"]
    assert verdict.verdict == "unacceptable"  # the rule's verdict, not the model's
    assert verdict.model_verdict == "acceptable"


def test_unknown_method_refused() -> None:
    with pytest.raises(ValueError, match="judge method"):
        Judge(_backend(), load_rubric(), method="vibes")  # type: ignore[arg-type]


A = AuditedDecision(text="", level="yellow", category="billing", urgency=2)
B = AuditedDecision(text="", level="green", category="billing", urgency=2)


def test_compare_keeps_a_preference_that_survives_the_swap() -> None:
    def prefers_yellow(question: str) -> dict[str, float]:
        first = question.split("Decision 1:")[1].split("Decision 2:")[0]
        return {"1": 0.8, "2": 0.2} if "yellow" in first else {"1": 0.3, "2": 0.7}

    judge = Judge(LookupBackend(choose_reply=prefers_yellow), load_rubric())
    outcome = compare(judge, "Refund me now", A, B)
    assert outcome.preferred == "a"
    assert compare(judge, "Refund me now", B, A).preferred == "b"


def test_compare_counts_position_bias_as_a_tie() -> None:
    always_first = LookupBackend(choose_reply=lambda question: {"1": 0.9, "2": 0.1})
    judge = Judge(always_first, load_rubric())
    assert compare(judge, "Refund me now", A, B).preferred == "tie"
    assert len(always_first.calls) == 2  # asked in both orders
