"""Table tests: every rule's must_match / must_not_match, one table per shipped pack file.

The tables are read straight from the YAML (not through the loader), so these tests do not
depend on the loader's own example check, and a failure names the file, rule and example.
"""

from __future__ import annotations

import pytest
import yaml

from service.l1 import RulePack, evaluate
from service.l1.normalise import normalise
from tests.l1.support import RULES

PACK_FILES = sorted(RULES.glob("*.yaml"))


def _cases(path):
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    for rule in document["rules"]:
        for i, text in enumerate(rule["examples"]["must_match"]):
            yield pytest.param(rule["id"], text, True, id=f"{rule['id']}:match:{i}")
        for i, text in enumerate(rule["examples"]["must_not_match"]):
            yield pytest.param(rule["id"], text, False, id=f"{rule['id']}:no-match:{i}")


def test_every_pack_file_has_a_table():
    assert {p.name for p in PACK_FILES} >= {
        "commitment.yaml",
        "destructive_access.yaml",
        "third_party.yaml",
        "sensitive_data.yaml",
        "injection.yaml",
        "complaints.yaml",
    }


def _check(pack: RulePack, rule_id: str, text: str, should_match: bool) -> None:
    result = evaluate(pack, text)
    fired = {hit.id for hit in result.rules}
    assert (rule_id in fired) is should_match, (rule_id, text, result.rules)
    for hit in result.rules:
        assert text[hit.span[0] : hit.span[1]] == hit.text  # spans index the original text
        assert_span_is_the_match(pack, hit)


def assert_span_is_the_match(pack: RulePack, hit) -> None:
    """The original slice, brought back into the form the rule reads, still matches it; a rule
    that fires on no match points at nothing."""
    rule = pack.rule(hit.id)
    if rule.spec.fires == "no_match":
        assert (tuple(hit.span), hit.text) == ((0, 0), ""), hit
        return
    subject = hit.text if rule.spec.scope == "original" else normalise(hit.text).text
    assert any(pattern.search(subject) for pattern in rule.patterns), (hit.id, hit.text)


@pytest.mark.parametrize(("rule_id", "text", "should_match"), list(_cases(RULES / "commitment.yaml")))
def test_commitment(pack, rule_id, text, should_match):
    _check(pack, rule_id, text, should_match)


@pytest.mark.parametrize(("rule_id", "text", "should_match"), list(_cases(RULES / "destructive_access.yaml")))
def test_destructive_access(pack, rule_id, text, should_match):
    _check(pack, rule_id, text, should_match)


@pytest.mark.parametrize(("rule_id", "text", "should_match"), list(_cases(RULES / "third_party.yaml")))
def test_third_party(pack, rule_id, text, should_match):
    _check(pack, rule_id, text, should_match)


@pytest.mark.parametrize(("rule_id", "text", "should_match"), list(_cases(RULES / "sensitive_data.yaml")))
def test_sensitive_data(pack, rule_id, text, should_match):
    _check(pack, rule_id, text, should_match)


@pytest.mark.parametrize(("rule_id", "text", "should_match"), list(_cases(RULES / "injection.yaml")))
def test_injection(pack, rule_id, text, should_match):
    _check(pack, rule_id, text, should_match)


@pytest.mark.parametrize(("rule_id", "text", "should_match"), list(_cases(RULES / "complaints.yaml")))
def test_complaints(pack, rule_id, text, should_match):
    _check(pack, rule_id, text, should_match)


# Every other file (the breadth files with the red-flag vocabulary in the twelve claimed
# languages, production requests, the it/pt/nl/pl/ru destructive rules, any file added later).
OWN_TABLES = {
    "commitment.yaml",
    "destructive_access.yaml",
    "third_party.yaml",
    "sensitive_data.yaml",
    "injection.yaml",
    "complaints.yaml",
}


@pytest.mark.parametrize(
    ("rule_id", "text", "should_match"),
    [case for path in PACK_FILES if path.name not in OWN_TABLES for case in _cases(path)],
)
def test_other_files(pack, rule_id, text, should_match):
    _check(pack, rule_id, text, should_match)


CLAIMED_LANGUAGES = {"en", "fr", "de", "es", "it", "pt", "nl", "pl", "ru", "zh", "ja", "ko"}


def test_red_flags_are_covered_in_every_claimed_language(pack):
    """Each red flag has rules whose languages cover every language the service claims."""
    for flag in ("commitment", "destructive_or_access", "third_party_personal_data"):
        languages = {language for rule in pack.rules if rule.spec.flag == flag for language in rule.spec.languages}
        assert languages >= CLAIMED_LANGUAGES, (flag, CLAIMED_LANGUAGES - languages)


def test_how_to_questions_on_red_topics_stay_unflagged(pack):
    for text in [
        "how do I delete my draft",
        "How do I delete my own draft?",
        "Comment supprimer mon compte ?",
        "Wie kann ich mein Passwort ändern?",
        "¿Cómo cancelo mi suscripción?",
        "请问怎么注销账号？",
        "怎么给同事开通权限？",
        "Come posso cambiare piano?",
        "Como faço para mudar de plano?",
        "Hoe kan ik van abonnement wisselen?",
        "Jak mogę zmienić plan?",
        "Как сменить тариф?",
        "プランの変更方法を教えてください。",
        "요금제 변경은 어떻게 하나요?",
    ]:
        assert evaluate(pack, text).level == "none", text
