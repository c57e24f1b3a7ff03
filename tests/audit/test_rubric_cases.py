"""The rubric as data (loading, hash, verdict rule) and the calibration set from dev labels."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import pytest

from service.audit.cases import (
    DEFAULT_CASES_PATH,
    INSTRUCTION_TICKETS,
    append_cases,
    build_calibration_set,
    case_from_decision,
    human_judgement,
    load_cases,
    verdict_from_failed,
)
from service.audit.rubric import (
    DEFAULT_RUBRIC_DIR,
    RubricError,
    apply_verdict_rule,
    load_rubric,
)
from service.results import Decision
from tests.support import DEV_SET


def test_rubric_loads_with_eliminatory_before_secondary() -> None:
    rubric = load_rubric()
    assert [c.kind for c in rubric.criteria] == ["eliminatory", "eliminatory", "secondary", "secondary"]
    assert len(rubric.sha256) == 64
    # A yellow or red ticket is read by a person: the "left green" criteria cannot apply.
    assert {c.id for c in rubric.applicable("yellow")} == {"category_right", "urgency_plausible"}
    assert len(rubric.applicable("green")) == 4


@pytest.mark.parametrize(
    ("failed", "verdict"),
    [
        ([], "acceptable"),
        (["category_right"], "acceptable"),  # borderline: one secondary
        (["urgency_plausible"], "acceptable"),
        (["category_right", "urgency_plausible"], "unacceptable"),  # two secondary
        (["green_needs_person"], "unacceptable"),  # one eliminatory
        (["green_on_instruction"], "unacceptable"),
    ],
)
def test_verdict_rule(failed: list[str], verdict: str) -> None:
    assert apply_verdict_rule(load_rubric(), failed) == verdict


def test_hand_label_rule_mirrors_rubric_rule_on_every_subset() -> None:
    rubric = load_rubric()
    ids = [c.id for c in rubric.criteria]
    for size in range(len(ids) + 1):
        for subset in itertools.combinations(ids, size):
            assert verdict_from_failed(subset) == apply_verdict_rule(rubric, list(subset))


def test_rubric_hash_changes_with_one_word(tmp_path: Path) -> None:
    folder = tmp_path / "judge"
    shutil.copytree(DEFAULT_RUBRIC_DIR, folder)
    before = load_rubric(folder).sha256
    path = folder / "context.md"
    path.write_text(path.read_text().replace("data to audit", "text to audit", 1))
    assert load_rubric(folder).sha256 != before


def test_rubric_errors_name_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "judge"
    shutil.copytree(DEFAULT_RUBRIC_DIR, folder)
    text = (folder / "rubric.yaml").read_text().replace("kind: secondary", "kind: optional", 1)
    (folder / "rubric.yaml").write_text(text)
    with pytest.raises(RubricError, match="rubric.yaml"):
        load_rubric(folder)
    (folder / "context.md").unlink()
    with pytest.raises(RubricError, match="context.md"):
        load_rubric(folder)


def _with_answers(folder: Path, lines: str) -> None:
    """The rubric with its answer form (answer_words, answer_orders) replaced by `lines`."""
    path = folder / "rubric.yaml"
    kept = [line for line in path.read_text().splitlines() if not line.startswith(("answer_words:", "answer_orders:"))]
    path.write_text("\n".join(kept) + "\n" + lines)


def test_answer_words_are_read_and_need_one_order(tmp_path: Path) -> None:
    folder = tmp_path / "judge"
    shutil.copytree(DEFAULT_RUBRIC_DIR, folder)
    _with_answers(folder, "answer_orders: 2\n")
    assert load_rubric(folder).answer_words is None  # letters
    _with_answers(folder, 'answer_words: ["Yes", "No"]\nanswer_orders: 1\n')
    assert load_rubric(folder).answer_words == ("Yes", "No")
    for bad in ('answer_words: ["Yes", "No"]\nanswer_orders: 2\n', 'answer_words: ["Yes", "Yes"]\nanswer_orders: 1\n'):
        _with_answers(folder, bad)
        with pytest.raises(RubricError, match="answer_words"):
            load_rubric(folder)


def test_a_word_question_reads_the_words_as_its_answers() -> None:
    from service.audit.backend import word_question
    from service.l2 import Framing

    question = word_question("Does this ticket need a person?", ("Yes", "No"))
    assert question.aliases() == ("Yes", "No") and question.labels() == ("yes", "no")
    framing = Framing(boolean="{question}\nAnswer yes or no.")
    assert framing.render(question) == "Does this ticket need a person?\nAnswer yes or no."


@pytest.mark.parametrize(
    ("given", "label", "instructs", "failed"),
    [
        (("green", "billing", 1), ("green", "billing", 1), False, []),
        (("green", "billing", 1), ("red", "billing", 1), False, ["green_needs_person"]),
        (("green", "other", 1), ("yellow", "other", 1), True, ["green_needs_person", "green_on_instruction"]),
        (("yellow", "other", 1), ("red", "other", 1), False, []),  # missed red: reaches a person
        (("yellow", "billing", 1), ("green", "billing", 1), False, []),  # over-escalation
        (("green", "legal", 2), ("green", "billing", 1), False, ["category_right"]),
        (("green", "billing", 3), ("green", "billing", 1), False, ["urgency_plausible"]),
        (("green", "billing", 2), ("green", "billing", 1), False, []),  # one step is plausible
    ],
)
def test_human_judgement_table(given, label, instructs, failed) -> None:
    assert (
        human_judgement(
            label_risk=label[0],
            label_category=label[1],
            label_urgency=label[2],
            instructs=instructs,
            level_given=given[0],
            category_given=given[1],
            urgency_given=given[2],
        )
        == failed
    )


def test_bundled_set_is_balanced_with_borderline_cases() -> None:
    cases = load_cases(DEFAULT_CASES_PATH)
    assert len(cases) >= 40
    verdicts = [c.human_verdict for c in cases[:48]]
    assert abs(verdicts.count("acceptable") - verdicts.count("unacceptable")) <= 2
    borderline = [c for c in cases if c.human_verdict == "acceptable" and len(c.human_failed) == 1]
    assert len(borderline) >= 6
    assert {c.level_given for c in cases} == {"green", "yellow", "red"}
    assert any("green_on_instruction" in c.human_failed for c in cases)


@pytest.mark.skipif(not DEV_SET.exists(), reason="shared dev set not mounted")
def test_generator_reproduces_bundled_set() -> None:
    rows = [json.loads(line) for line in DEV_SET.read_text().splitlines() if line.strip()]
    built = build_calibration_set(rows)
    bundled = [c for c in load_cases(DEFAULT_CASES_PATH) if c.kind != "operator"]
    assert built == bundled
    sources = [c.source for c in built]
    assert len(set(sources)) == len(sources)  # each dev ticket used once
    ids = {row["id"] for row in rows}
    assert INSTRUCTION_TICKETS <= ids


def test_operator_decision_becomes_a_case_once(tmp_path: Path) -> None:
    decision = Decision(
        ticket_id="T1",
        operator="ana",
        action="escalate",
        correct_level="yellow",
        given_level="green",
        decided_at=1.0,
        category="technical",
    )
    case = case_from_decision(
        ticket_id="T1",
        subject="s",
        body="the export crashes",
        language="en",
        level_given="green",
        category_given="technical",
        urgency_given=2,
        decision=decision,
        judge_verdict="unacceptable",
        now=5.0,
    )
    assert case.human_failed == ["green_needs_person"]
    assert case.human_verdict == "unacceptable"
    path = tmp_path / "cases.jsonl"
    assert append_cases([case], path) == [case]
    assert append_cases([case], path) == []  # the same ticket is never appended twice
    assert load_cases(path) == [case]
