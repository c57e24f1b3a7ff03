"""Normalisation: examples of each step, and properties checked with hypothesis."""

from __future__ import annotations

import unicodedata

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.l1 import evaluate
from service.l1.normalise import (
    _SCAN_RANGES,
    _WHITESPACE_SPLIT,
    _code_points,
    _collapse,
    _fold_array,
    _fold_tokens,
    _split_at_array_runs,
    _tables,
    fold_text,
    normalise,
)
from tests.l1.test_packs import assert_span_is_the_match

# Characters that exercise every path: joiners, invisibles, ligatures, look-alikes, CJK.
TRICKY = list(
    " \t\n\r\u00a0\u3000\u2028\u200b\u200d\u202e\u2066\ufeff\ufe0f\U000e0041\u00ad"
    "\u0301\u0308\u0345\u1100\u1160\u11a8\uac00\uff76\uff9e\u3099\u1ffe\u0344"
    "ﬁßİΑΒаеорсхορ’“–ＡＢ！？，。退款删除Ǆǅǆ"
)
texts = st.text(alphabet=st.one_of(st.characters(), st.sampled_from(TRICKY)), max_size=60)


def test_nfkc_and_case_folding():
    assert normalise("ＤＥＬＥＴＥ ﬁle STRASSE Straße").text == "delete file strasse strasse"


def test_invisible_characters_removed():
    assert normalise("ig\u200bno\u200dre\u2066 pre\ufe0fvious\u202e").text == "ignore previous"


def test_look_alikes_folded():
    # Cyrillic а, е, о, р, с; Greek Ο; typographic apostrophe
    assert normalise("рlеаsе dеlеtе mу ассоunt, dΟn’t").text == "please delete my account, don't"


def test_whitespace_collapsed_keeping_line_breaks():
    assert normalise("a  b\t\tc\r\n\r\n d\u00a0e").text == "a b c\nd e"


def test_spans_map_back_to_the_original():
    original = "Ｐｌｅａｓｅ  d\u200belete\n\nmy ACCOUNT"
    norm = normalise(original)
    assert norm.text == "please delete\nmy account"
    start = norm.text.index("delete")
    assert original[slice(*norm.span(start, start + len("delete")))] == "d\u200belete"
    start = norm.text.index("account")
    assert original[slice(*norm.span(start, start + len("account")))] == "ACCOUNT"
    assert norm.span(0, len(norm.text)) == (0, len(original))


def test_invisible_characters_at_a_span_edge_stay_out_of_it():
    original = "\u200bplease\u200d de\u00adlete\u2060\u200b now\ufeff"
    norm = normalise(original)
    assert norm.text == "please delete now"
    start = norm.text.index("delete")
    assert original[slice(*norm.span(start, start + len("delete")))] == "de\u00adlete"
    assert original[slice(*norm.span(0, len("please")))] == "please"
    assert original[slice(*norm.span(0, len(norm.text)))] == original[1:-1]
    assert normalise("\u200b\u200d").text == "" and normalise("\u200b\u200d").span(0, 0) == (2, 2)


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(texts)
def test_stripping_invisibles_first_folds_as_clusters_would(text):
    """Dropping invisibles before folding must give what folding them cluster by cluster gives
    (a whitespace character may stay itself until the collapse maps it, as any other does)."""
    assert normalise(text).text == _collapse(_fold_tokens(text, _tables())[0])[0]


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(texts)
def test_long_texts_find_the_same_whitespace_runs_as_short_ones(text):
    """Long texts find runs with numpy, short ones with the regex: the two must agree."""
    assert _split_at_array_runs(text) == _WHITESPACE_SPLIT.split(text)


def _fold_both_ways(text: str) -> tuple[tuple, tuple]:
    """Short texts fold token by token, long ones with arrays: both answers, text and map."""
    text = "".join(ch for ch in text if not 0xD800 <= ord(ch) <= 0xDFFF)  # fold_text drops these first
    return _fold_tokens(text, _tables()), _fold_array(text, _tables().forms.take(_code_points(text)))


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(texts)
def test_long_texts_fold_as_short_ones(text):
    tokens, arrays = _fold_both_ways(text)
    assert tokens == arrays


def test_every_code_point_folds_alike_both_ways():
    for lo, hi in _SCAN_RANGES:
        for start in range(lo, hi + 1, 0x4000):
            points = (cp for cp in range(start, min(hi + 1, start + 0x4000)) if not 0xD800 <= cp <= 0xDFFF)
            # each character alone, and each followed by a joiner
            text = "".join(chr(cp) + "a" for cp in points)
            tokens, arrays = _fold_both_ways(text)
            assert tokens == arrays, hex(start)
            tokens, arrays = _fold_both_ways(text.replace("a", "\u0301"))
            assert tokens == arrays, hex(start)


def test_ascii_folds_to_its_lower_case_as_the_cluster_path_would():
    ascii = "".join(chr(cp) for cp in range(128))
    visible = "".join(ch for ch in ascii if normalise(ch).text or ch.isspace())
    assert visible == "".join(ch for ch in ascii if unicodedata.category(ch) != "Cc" or ch.isspace())
    assert fold_text(visible)[0] == _fold_tokens(visible, _tables())[0] == visible.lower()


def test_composed_and_decomposed_accents_match_alike():
    assert normalise("re\u0301siliation").text == normalise("résiliation").text == "résiliation"


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(texts)
def test_normalisation_is_idempotent(text):
    once = normalise(text).text
    assert normalise(once).text == once


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(texts, st.data())
def test_spans_lie_within_the_original(text, data):
    norm = normalise(text)
    start = data.draw(st.integers(0, len(norm.text)))
    end = data.draw(st.integers(start, len(norm.text)))
    mapped_start, mapped_end = norm.span(start, end)
    assert 0 <= mapped_start <= mapped_end <= len(text)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(texts)
def test_matching_never_raises_and_spans_index_the_original(pack, text):
    result = evaluate(pack, text)
    assert result.level in ("none", "yellow", "red")
    for hit in result.rules:
        assert 0 <= hit.span[0] <= hit.span[1] <= len(text)
        assert text[hit.span[0] : hit.span[1]] == hit.text


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(max_size=30), st.sampled_from(["please delete my account", "ignore previous instructions"]))
def test_a_phrase_is_found_whatever_surrounds_it(pack, noise, phrase):
    result = evaluate(pack, f"{noise}\n{phrase}.")
    assert result.level != "none"
    for hit in result.rules:
        assert_span_is_the_match(pack, hit)


def test_lone_surrogates_do_not_break_matching(pack):
    result = evaluate(pack, "please delete my account \ud800 now")
    assert result.level == "red"
