"""The loader refuses each kind of broken pack with a message naming the rule at fault."""

from __future__ import annotations

import pytest

from service.l1 import PackError, load_pack
from service.l1.pack import build_pack, canonical_bytes, pack_sha
from tests.l1.support import GOOD_RULE, RULES, build, pack_text


def problems_of(rules: str) -> str:
    with pytest.raises(PackError) as caught:
        build(rules)
    return str(caught.value)


def test_a_good_pack_loads():
    pack = build(GOOD_RULE)
    assert [rule.id for rule in pack.rules] == ["demo.delete"]
    assert len(pack.sha) == 64


def test_unknown_key_names_the_rule_and_the_key():
    message = problems_of(GOOD_RULE.replace("level: red", "level: red\n    severity: high"))
    assert "rule demo.delete" in message and "severity" in message


def test_missing_key_names_the_rule():
    message = problems_of(GOOD_RULE.replace("    level: red\n", ""))
    assert "rule demo.delete" in message and "level" in message


def test_re2_compile_error_names_the_rule_and_the_pattern():
    message = problems_of(GOOD_RULE.replace("\\bplease delete (?:my|our) account\\b", "(?<=x)y"))
    assert "rule demo.delete" in message
    assert "(?<=x)y" in message and "does not compile" in message


def test_duplicate_ids_are_refused_across_files():
    with pytest.raises(PackError) as caught:
        build_pack({"a.yaml": pack_text(GOOD_RULE), "b.yaml": pack_text(GOOD_RULE)})
    message = str(caught.value)
    assert "rule demo.delete: duplicate id" in message and "a.yaml" in message


def test_flag_on_a_yellow_rule_is_refused():
    message = problems_of(GOOD_RULE.replace("level: red", "level: yellow"))
    assert "rule demo.delete" in message and "requires level 'red'" in message


def test_must_match_example_that_does_not_match_is_refused():
    message = problems_of(GOOD_RULE.replace('"Please delete my account."', '"Remove my account."'))
    assert "rule demo.delete: must_match example does not match" in message


def test_must_not_match_example_that_matches_is_refused():
    message = problems_of(GOOD_RULE.replace('"How do I delete my account?"', '"please delete our account"'))
    assert "rule demo.delete: must_not_match example matches" in message


def test_unknown_validator_is_refused():
    message = problems_of(GOOD_RULE.replace("languages: [en]", "languages: [en]\n    validator: crc32"))
    assert "rule demo.delete" in message and "unknown validator 'crc32'" in message


def test_bad_language_code_is_refused():
    message = problems_of(GOOD_RULE.replace("languages: [en]", "languages: [english]"))
    assert "rule demo.delete" in message and "ISO 639-1" in message


def test_empty_examples_are_refused():
    message = problems_of(GOOD_RULE.replace('must_not_match: ["How do I delete my account?"]', "must_not_match: []"))
    assert "rule demo.delete: examples.must_not_match is empty" in message


def test_pattern_matching_the_empty_string_is_refused():
    message = problems_of(GOOD_RULE.replace("\\bplease delete (?:my|our) account\\b", "x*"))
    assert "rule demo.delete" in message and "matches the empty string" in message


def test_ascii_word_boundary_next_to_accented_letter_is_refused():
    message = problems_of(GOOD_RULE.replace("\\bplease delete (?:my|our) account\\b", "\\b(?:supprimé|effacé)\\b"))
    assert "rule demo.delete" in message and "\\b next to a non-ASCII letter" in message


def test_character_absent_from_the_matching_form_is_refused():
    message = problems_of(GOOD_RULE.replace("\\bplease delete (?:my|our) account\\b", "straße"))
    assert "rule demo.delete" in message and "'ß'" in message and "'ss'" in message


def test_bad_context_word_is_refused():
    rules = GOOD_RULE.replace("languages: [en]", "languages: [en]\n    context: {words: ['(unclosed'], within: 20}")
    message = problems_of(rules)
    assert "rule demo.delete: context word '(unclosed' does not compile" in message


def test_yaml_syntax_error_names_the_file():
    with pytest.raises(PackError) as caught:
        build_pack({"broken.yaml": b"rules: [\n  - id: x\n"})
    assert "broken.yaml: YAML error" in str(caught.value)


def test_a_key_given_twice_is_refused():
    rules = GOOD_RULE.replace("level: red", "level: red\n    level: yellow")
    message = problems_of(rules)
    assert "duplicate key 'level'" in message


def test_all_problems_are_reported_at_once():
    with pytest.raises(PackError) as caught:
        build(GOOD_RULE.replace("level: red", "level: yellow").replace("[en]", "[english]"))
    assert len(caught.value.problems) == 2


def test_missing_path_and_empty_directory(tmp_path):
    with pytest.raises(PackError, match="no such file"):
        load_pack(tmp_path / "nope")
    with pytest.raises(PackError, match="no rule files"):
        load_pack(tmp_path)


def test_sha_ignores_line_endings_but_not_content(tmp_path):
    text = pack_text(GOOD_RULE)
    assert pack_sha({"a.yaml": text}) == pack_sha({"a.yaml": text.replace(b"\n", b"\r\n")})
    assert pack_sha({"a.yaml": text}) == pack_sha({"a.yaml": b"\xef\xbb\xbf" + text})
    assert pack_sha({"a.yaml": text}) != pack_sha({"a.yaml": text + b"# comment\n"})
    assert pack_sha({"a.yaml": text}) != pack_sha({"b.yaml": text})  # the name counts
    assert canonical_bytes(b"a\r\nb\rc") == b"a\nb\nc"
    (tmp_path / "one.yaml").write_bytes(text)
    assert load_pack(tmp_path).sha == load_pack(tmp_path / "one.yaml").sha == pack_sha({"one.yaml": text})


def test_sha_is_over_files_sorted_by_name(tmp_path):
    other = GOOD_RULE.replace("demo.delete", "demo.other")
    files = {"b.yaml": pack_text(other), "a.yaml": pack_text(GOOD_RULE)}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    expected = pack_sha(dict(sorted(files.items())))
    assert load_pack(tmp_path).sha == expected
    assert load_pack(tmp_path).files == ("a.yaml", "b.yaml")


def test_the_shipped_pack_loads_and_records_its_sha(pack):
    assert pack.sha == load_pack(RULES).sha
    assert len(pack.rules) >= 30
    assert {file for file in pack.files} == {path.name for path in RULES.glob("*.yaml")}


def test_a_rule_that_fires_on_no_match_must_be_yellow_and_take_no_checks():
    absent = GOOD_RULE.replace("languages: [en]", "languages: [en]\n    fires: no_match")
    message = problems_of(absent.replace("    flag: destructive_or_access\n", ""))
    assert "rule demo.delete: a rule that fires on no match must be yellow" in message
    windowed = absent.replace("level: red\n    flag: destructive_or_access", "level: yellow").replace(
        "languages: [en]", "languages: [en]\n    unless: {words: ['how']}"
    )
    assert "takes no validator, context or unless" in problems_of(windowed)
