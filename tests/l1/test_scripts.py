"""What a pattern needs of a script, and what a text holds: the analysis that lets the engine
skip a set must never claim a need a pattern does not have."""

from __future__ import annotations

import pytest

from service.l1.pack import as_compiled
from service.l1.scripts import present, required_script


@pytest.mark.parametrize(
    ("pattern", "script"),
    [
        ("电话", "cjk"),
        ("(?:手机号|电话)[是为:]", "cjk"),
        ("[가-힣]+", "cjk"),
        ("(?:^|[^\\pL])(?:yдaлиte|otkatиte)", "cyrillic"),
        ("x[а-я]+", "cyrillic"),
        # an alternative, an optional part or a wide class avoids the script: no need
        ("(?:phone|电话)", None),
        ("x(?:电话)?", None),
        ("x[а-я]*", None),
        ("[\\w中]", None),
        ("[^a]", None),
        ("\\p{Han}", None),  # read as any letter: scanned always, never skipped wrongly
        ("\\Q中\\E", None),  # syntax Python's parser does not know: no claim
        ("(", None),
    ],
)
def test_required_script(pattern, script):
    assert required_script(pattern) == script


def test_present():
    def holds(text: str) -> frozenset[str]:
        return present(text.encode())

    assert holds("plain ascii") == frozenset()
    assert holds("héllo, ça va ½ €") == frozenset()
    assert holds("订单 order") == {"cjk"}
    assert holds("주문") == {"cjk"}
    assert holds("ご注文") == {"cjk"}
    assert holds("заказ") == {"cyrillic"}


@pytest.mark.parametrize(
    ("pattern", "compiled"),
    [
        ("refund", "refund"),
        ("\\bdelete\\b\\W+\\pL", "\\bdelete\\b\\W+\\pL"),  # escaped letters are not the text's
        ("Refund", "(?i)Refund"),
        ("[A-Z]{3}", "(?i)[A-Z]{3}"),
        ("\\x{C4}", "(?i)\\x{C4}"),  # a code point named by number may be upper-case
        ("\\p{Lu}", "(?i)\\p{Lu}"),
    ],
)
def test_matching_form_patterns_compile_case_sensitive_unless_case_matters(pattern, compiled):
    assert as_compiled(pattern, "normalised") == compiled
    assert as_compiled(pattern, "original") == pattern
