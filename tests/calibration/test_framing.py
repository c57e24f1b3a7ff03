"""The framing study's pure parts: the variant prompts it writes and the shipping rule (no model)."""

from __future__ import annotations

import pytest

from service.calibration import framing
from service.errors import PromptError
from service.l2.prompts import load_prompts
from service.settings import PROJECT_ROOT

PROMPTS = PROJECT_ROOT / "prompts"


def test_the_once_variant_changes_only_the_framing(tmp_path):
    served = load_prompts(PROMPTS)
    assert served.framing.turn_end == "per_question"
    assert framing.variant_prompts(PROMPTS, tmp_path, "per_question") == PROMPTS
    variant = load_prompts(framing.variant_prompts(PROMPTS, tmp_path, "once"))
    assert variant.framing.turn_end == "once"
    assert variant.sha != served.sha  # its own replay cache, its own artifacts
    assert variant.context == served.context and variant.questions == served.questions
    assert variant.framing.ticket_outro == served.framing.ticket_outro


def test_a_prompts_dir_that_sets_the_framing_already_is_refused(tmp_path):
    once = framing.variant_prompts(PROMPTS, tmp_path / "a", "once")
    with pytest.raises(PromptError, match="turn_end already"):
        framing.variant_prompts(once, tmp_path / "b", "once")


def test_cues_follow_the_answer_kind():
    prompts = load_prompts(PROMPTS)
    urgency, risk = prompts.questions["urgency"], prompts.questions["risk"]
    assert prompts.framing.cue(risk) == prompts.framing.cue(urgency) == ""  # per question: the template's turn
    once = type(prompts.framing)(turn_end="once")
    assert once.cue(risk) == once.cue(None) == once.letter_cue
    assert once.cue(urgency) == once.digit_cue


def _variant(per_ticket: int, false_greens: int, red_recall: float, green_rate: float) -> dict:
    nested = {"false_greens": false_greens, "red_recall": red_recall, "green_rate": green_rate}
    return {"tokens": {"per_ticket": per_ticket}, "nested": nested}


@pytest.mark.parametrize(
    ("once", "ship"),
    [
        (_variant(190, 0, 0.9, 0.2), True),  # fewer tokens, levels held
        (_variant(190, 1, 0.9, 0.2), False),  # one more false green
        (_variant(190, 0, 0.85, 0.2), False),  # reds lost
        (_variant(190, 0, 0.9, 0.15), False),  # fewer tickets answered automatically
        (_variant(200, 0, 0.9, 0.2), False),  # nothing saved
    ],
)
def test_once_ships_only_when_it_saves_tokens_and_quality_holds(once, ship):
    decided = framing.decision(_variant(200, 0, 0.9, 0.2), once)
    assert decided["ship"] is ship
    assert decided["tokens_saved_per_ticket"] == 200 - once["tokens"]["per_ticket"]
