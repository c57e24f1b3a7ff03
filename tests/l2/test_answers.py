"""Answer maths (coverage, renormalisation, confidence, score value, permutation merge) and the
prompt data: pure, no model."""

from __future__ import annotations

import math

import msgspec
import numpy as np
import pytest

from service.l2.answers import answer_from_logprobs, generated_answer, log_softmax, merge_permutations
from service.l2.decide import fallback_grammar, variant_names
from service.l2.prompts import Framing, PromptError, Question, load_prompts
from service.settings import PROJECT_ROOT

RISK = Question(kind="choice", text="Risk?", options=("green", "yellow", "red"))


def test_log_softmax_normalises():
    lp = log_softmax(np.array([1.0, 2.0, 3.0, -50.0], dtype=np.float32))
    assert math.isclose(float(np.exp(lp).sum()), 1.0, rel_tol=1e-9)


def test_coverage_renormalisation_and_confidence():
    lp = {"green": math.log(0.3), "yellow": math.log(0.1), "red": math.log(0.1)}
    a = answer_from_logprobs(RISK, lp)
    assert a.coverage == pytest.approx(0.5)
    assert a.probabilities == pytest.approx({"green": 0.6, "yellow": 0.2, "red": 0.2})
    assert a.chosen == "green"
    assert a.confidence == pytest.approx(0.6 * 0.5)
    assert a.logprobs == lp  # the raw log-probabilities are kept for recalibration


def test_boolean_probability_is_p_yes():
    q = Question(kind="boolean", text="Flag?")
    a = answer_from_logprobs(q, {"yes": math.log(0.2), "no": math.log(0.6)})
    assert a.options == ["yes", "no"] and a.chosen == "no"
    assert a.probability == pytest.approx(0.25)


def test_score_value_and_mode():
    q = Question(kind="score", text="Urgency?", min=0, max=3)
    p = {"0": 0.1, "1": 0.2, "2": 0.3, "3": 0.4}
    a = answer_from_logprobs(q, {k: math.log(v) for k, v in p.items()})
    assert a.mode == 3 and a.chosen == "3"
    assert a.value == pytest.approx(0.2 + 0.6 + 1.2)


def test_permutation_merge_averages_per_option():
    first = answer_from_logprobs(RISK, {"green": math.log(0.6), "yellow": math.log(0.3), "red": math.log(0.1)})
    second = answer_from_logprobs(RISK, {"green": math.log(0.2), "yellow": math.log(0.3), "red": math.log(0.5)})
    merged = merge_permutations(RISK, [first, second])
    assert merged.probabilities == pytest.approx({"green": 0.4, "yellow": 0.3, "red": 0.3})
    assert merged.logprobs["green"] == pytest.approx((math.log(0.6) + math.log(0.2)) / 2)


def test_variant_names_rotate_the_options():
    q = Question(kind="choice", text="Risk?", options=("green", "yellow", "red"), permutations=3)
    variants = variant_names("risk", q)
    assert [v for v, _ in variants] == ["risk", "risk@1", "risk@2"]
    assert [v.options for _, v in variants] == [
        ("green", "yellow", "red"),
        ("yellow", "red", "green"),
        ("red", "green", "yellow"),
    ]


def test_generated_answer_has_no_probabilities():
    a = generated_answer(RISK, "yellow")
    assert a.method == "generated" and a.probabilities is None and a.coverage is None
    with pytest.raises(ValueError):
        generated_answer(RISK, "purple")


def test_framing_renders_each_kind():
    f = Framing(
        choice="{question}\n{options}", boolean="{question}\nA. yes\nB. no", score="{question} ({min} to {max})"
    )
    assert f.render(RISK) == "Risk?\nA. green\nB. yellow\nC. red"
    assert f.render(Question(kind="boolean", text="Flag?")) == "Flag?\nA. yes\nB. no"
    assert f.render(Question(kind="score", text="Urgency?", min=0, max=5)) == "Urgency? (0 to 5)"


def test_options_in_context_leave_only_the_question_after_the_ticket():
    f = Framing(
        option="{alias}. {label}",
        option_separator=", ",
        choice="{question} {options}",
        boolean="{question} A. yes, B. no",
    )
    inline = Question(kind="choice", text="Category?", options=("billing", "other"))
    listed = msgspec.structs.replace(inline, options_in_context=True)
    assert f.render(inline) == "Category? A. billing, B. other"
    assert f.render(listed) == "Category?"
    assert f.letters(listed) == "A. billing, B. other"  # what the context must list
    flag = Question(kind="boolean", text="Red flag 1?", options_in_context=True)
    assert f.render(flag) == "Red flag 1?" and f.letters(flag) == "A. yes, B. no"


@pytest.mark.parametrize(
    ("question", "message"),
    [
        (Question(kind="score", text="x", options_in_context=True), "options_in_context"),
        (
            Question(kind="choice", text="x", options=("a", "b"), permutations=2, options_in_context=True),
            "options_in_context",
        ),
        (Question(kind="choice", text="x", options=("a",)), "2..26 options"),
        (Question(kind="choice", text="x", options=("a", "a")), "duplicate"),
        (Question(kind="score", text="x", min=0, max=10), "one digit"),
        (Question(kind="boolean", text="x", options=("y", "n")), "only for choice"),
        (Question(kind="choice", text="x", options=("a", "b"), permutations=3), "permutations"),
    ],
)
def test_question_validation(question, message):
    with pytest.raises(PromptError, match=message):
        question.validate("q")


def test_bundled_prompts_load_and_hash():
    prompts = load_prompts(PROJECT_ROOT / "prompts")
    assert set(prompts.questions) >= {
        "risk",
        "commitment",
        "destructive_or_access",
        "third_party_personal_data",
        "category",
        "urgency",
    }
    assert "team" not in prompts.questions  # the team follows from the category
    assert prompts.questions["category"].options == (
        "billing",
        "technical",
        "account",
        "shipping",
        "sales",
        "security",
        "legal",
        "other",
    )
    assert len(prompts.sha) == 64
    # definitions only: the context never asks for an output format
    assert "json" not in prompts.context.lower()


@pytest.mark.parametrize(
    ("category", "team"),
    [
        ("billing", "billing"),
        ("technical", "engineering"),
        ("account", "support"),
        ("shipping", "logistics"),
        ("sales", "sales"),
        ("security", "security"),
        ("legal", "legal"),
        ("other", "support"),
        (None, None),
    ],
)
def test_every_category_routes_to_one_team(category, team):
    assert load_prompts(PROJECT_ROOT / "prompts").team_for(category) == team


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace("categories: [legal]", "categories: []"), r"no team handles the categories \['legal'\]"),
        (lambda t: t.replace("categories: [legal]", "categories: [legal, billing]"), "'billing' is routed to both"),
        (lambda t: t.replace("categories: [legal]", "categories: [law]"), "unknown category 'law'"),
    ],
)
def test_routing_is_checked_at_load(tmp_path, edit, message):
    import shutil

    shutil.copytree(PROJECT_ROOT / "prompts", tmp_path / "p")
    teams = tmp_path / "p" / "teams.yaml"
    teams.write_text(edit(teams.read_text()))
    with pytest.raises(PromptError, match=message):
        load_prompts(tmp_path / "p")


def test_prompt_sha_changes_with_what_the_model_reads_only(tmp_path):
    import shutil

    shutil.copytree(PROJECT_ROOT / "prompts", tmp_path / "p")
    before = load_prompts(tmp_path / "p").sha
    (tmp_path / "p" / "teams.yaml").write_text((tmp_path / "p" / "teams.yaml").read_text() + "\n# a comment\n")
    assert load_prompts(tmp_path / "p").sha == before  # routing is not read by the model
    (tmp_path / "p" / "context.md").write_text((tmp_path / "p" / "context.md").read_text() + "\n")
    assert load_prompts(tmp_path / "p").sha != before


def test_bundled_context_lists_the_letters_of_every_question_that_does_not(tmp_path):
    import shutil

    prompts = load_prompts(PROJECT_ROOT / "prompts")
    listed = [n for n, q in prompts.questions.items() if q.options_in_context]
    assert {"category", "commitment"} <= set(listed)
    for name in listed:
        assert prompts.framing.letters(prompts.questions[name]) in prompts.context
    # A context that stops listing them (here: the category letters) is refused at load.
    shutil.copytree(PROJECT_ROOT / "prompts", tmp_path / "p")
    context = tmp_path / "p" / "context.md"
    context.write_text(context.read_text().replace("{{ letters.category }}", "ask someone"))
    with pytest.raises(PromptError, match="'category' has options_in_context"):
        load_prompts(tmp_path / "p")
    # Nor may a question list them nowhere: here a flag taken out of the context.
    questions = tmp_path / "p" / "questions.yaml"
    context.write_text((PROJECT_ROOT / "prompts" / "context.md").read_text())
    questions.write_text(
        questions.read_text().replace('commitment (A/B)?"\n    options_in_context: true', 'commitment (A/B)?"', 1)
    )
    with pytest.raises(PromptError, match="'commitment': the framing does not list"):
        load_prompts(tmp_path / "p")


def test_fallback_grammar_enumerates_labels():
    prompts = load_prompts(PROJECT_ROOT / "prompts")
    grammar = fallback_grammar(prompts.questions, ["risk", "category"])
    assert 'v0 ::= "\\"green\\"" | "\\"yellow\\"" | "\\"red\\""' in grammar
    assert grammar.startswith('root ::= "{" "\\"risk\\""')
