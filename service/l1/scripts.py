"""Which writing system a pattern cannot match without, and which ones a text holds.

A pattern set whose every pattern needs, say, a CJK character cannot fire on a ticket without
one, so the engine skips that scan (most tickets are in one script). The analysis reads the
pattern's syntax tree and answers only when it is sure: a pattern it cannot read, or one with
any path through it that avoids the script, needs nothing, and its set is always scanned.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# The parser of Python's own `re` (private, stable since 3.11): RE2's syntax is close enough
# for the constructs the analysis trusts, and everything it does not know is read as "needs
# nothing" (see _readable).
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]

import re2

# Ranges per script, as the matching form holds them (look-alike Cyrillic letters are folded to
# Latin there, so only the letters without a Latin twin remain: they are what Russian patterns
# are written with).
SCRIPTS: dict[str, tuple[tuple[int, int], ...]] = {
    # Hangul jamo, kana, compatibility jamo, CJK ideographs, Hangul syllables
    "cjk": (
        (0x1100, 0x11FF),
        (0x3040, 0x30FF),
        (0x3130, 0x318F),
        (0x3400, 0x4DBF),
        (0x4E00, 0x9FFF),
        (0xAC00, 0xD7AF),
        (0xF900, 0xFAFF),
    ),
    "cyrillic": ((0x0400, 0x04FF),),
}
# RE2 on the UTF-8 bytes the engine scans anyway: Python's re walks a long non-ASCII ticket
# a character at a time (0.4 ms at 32 KiB, measured), RE2's DFA about ten times faster.
_IN_TEXT = {
    name: re2.compile("[" + "".join(f"\\x{{{lo:x}}}-\\x{{{hi:x}}}" for lo, hi in ranges) + "]")
    for name, ranges in SCRIPTS.items()
}

# The first UTF-8 bytes a character of each script can start with: a text holding none of them
# (a European one, say) is answered by a few memchr calls instead of a pass of RE2.
_LEAD_BYTES = {
    name: tuple(sorted({chr(cp).encode("utf-8")[:1] for lo, hi in ranges for cp in range(lo, hi + 1)}))
    for name, ranges in SCRIPTS.items()
}

# RE2 escapes Python's parser lacks, replaced for the analysis only by something that needs no
# script (\p{Han} does need one, but reading it as "any letter" only ever scans more).
_UNICODE_CLASS = re.compile(r"\\[pP](?:\{[^}]*\}|[A-Za-z])")
_UNKNOWN = re.compile(r"\\[zCQE]|\(\?[A-Za-z]*U|\[\[:")


def _readable(pattern: str) -> str | None:
    """The pattern in a form Python's parser reads the same way, or None to give up."""
    if _UNKNOWN.search(pattern):
        return None
    return _UNICODE_CLASS.sub(r"\\w", pattern)


def required_script(pattern: str) -> str | None:
    """The script every match of `pattern` contains a character of, or None."""
    readable = _readable(pattern)
    if readable is None:
        return None
    try:
        tree = sre_parse.parse(readable)
    except (re.error, OverflowError, RecursionError):
        return None
    for name, ranges in SCRIPTS.items():
        if _sequence_needs(list(tree), lambda lo, hi, ranges=ranges: any(a <= lo and hi <= b for a, b in ranges)):
            return name
    return None


# is_script(low, high): every code point from low to high is of the script.
InScript = Callable[[int, int], bool]


def _sequence_needs(items: list, is_script: InScript) -> bool:
    return any(_node_needs(op, av, is_script) for op, av in items)


def _node_needs(op, av, is_script: InScript) -> bool:
    if op is sre.LITERAL:
        return is_script(av, av)
    if op is sre.IN:
        return _class_needs(av, is_script)
    if op is sre.BRANCH:
        return all(_sequence_needs(list(branch), is_script) for branch in av[1])
    if op is sre.SUBPATTERN:
        return _sequence_needs(list(av[-1]), is_script)
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", None)):
        low, _, item = av
        return low >= 1 and _sequence_needs(list(item), is_script)
    return False  # any, categories, anchors, assertions: no script needed


def _class_needs(members: list, is_script: InScript) -> bool:
    for op, av in members:
        if op is sre.LITERAL:
            if not is_script(av, av):
                return False
        elif op is sre.RANGE:
            if not is_script(*av):
                return False
        else:  # a negation, a category (\d, \w) or anything else: not one script only
            return False
    return bool(members)


def present(data: bytes) -> frozenset[str]:
    """The scripts of SCRIPTS that a UTF-8 text holds a character of."""
    if data.isascii():
        return frozenset()
    return frozenset(
        name
        for name, pattern in _IN_TEXT.items()
        if any(lead in data for lead in _LEAD_BYTES[name]) and pattern.search(data) is not None
    )
