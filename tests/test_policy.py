"""The policy vocabulary comes from the prompts and the result types, and every reader uses it."""

from __future__ import annotations

from service.audit.cases import WRONG_CATEGORY
from service.l2.bench import JSON_GRAMMAR, JSON_INSTRUCTION
from service.l2.prompts import load_prompts
from service.policy import vocabulary
from service.results import RED_FLAGS
from service.settings import PROJECT_ROOT


def test_vocabulary_is_what_the_model_is_asked():
    prompts = load_prompts(PROJECT_ROOT / "prompts")
    vocab = vocabulary()
    assert vocab.levels == ("green", "yellow", "red")
    assert vocab.flags == RED_FLAGS
    assert vocab.categories == tuple(prompts.questions["category"].labels())
    assert vocab.teams == tuple(team.name for team in prompts.teams)


def test_vocabulary_follows_another_prompts_dir(tmp_path):
    (tmp_path / "questions.yaml").write_text("questions:\n  category:\n    options: [billing, other]\n")
    (tmp_path / "teams.yaml").write_text("teams:\n  - name: desk\n")
    vocab = vocabulary(str(tmp_path))
    assert (vocab.categories, vocab.teams) == (("billing", "other"), ("desk",))


def test_audit_wrong_category_covers_every_category_with_another_one():
    categories = set(vocabulary().categories)
    assert set(WRONG_CATEGORY) == categories
    assert all(wrong in categories and wrong != right for right, wrong in WRONG_CATEGORY.items())


def test_bench_json_path_offers_exactly_the_vocabulary():
    for category in vocabulary().categories:
        assert f'"{category}"' in JSON_GRAMMAR and category in JSON_INSTRUCTION
    assert 'risk ::= "green" | "yellow" | "red"' in JSON_GRAMMAR
