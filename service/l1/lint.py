"""Catches pattern mistakes RE2 accepts but that make a rule silently useless.

`\\b` next to an accented letter (RE2's word boundary is ASCII-only), a character that the
matching form never contains (ß, ’, fullwidth…), and a pattern that matches the empty string.
"""

from __future__ import annotations

import re2

from service.l1.normalise import fold
from service.l1.schema import Scope


def _top_level_alternatives(body: str) -> list[str]:
    """Split a group body on its own "|" (not inside nested groups, classes or escapes)."""
    parts: list[str] = []
    depth, start, i, in_class = 0, 0, 0, False
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            parts.append(body[start:i])
            start = i + 1
        i += 1
    parts.append(body[start:])
    return parts


def _matching_paren(pattern: str, index: int, step: int) -> int | None:
    depth, i = 0, index
    while 0 <= i < len(pattern):
        escaped = i > 0 and pattern[i - 1] == "\\"
        if not escaped and pattern[i] in "()":
            depth += 1 if pattern[i] == ("(" if step > 0 else ")") else -1
            if depth == 0:
                return i
        i += step
    return None


def _edge_letters(pattern: str, i: int) -> str:
    """The characters a \\b at pattern[i:i+2] sits between, looking into adjacent groups."""
    edges = ""
    before = pattern[i - 1 : i]
    if before == ")":
        start = _matching_paren(pattern, i - 1, -1)
        if start is not None:
            body = pattern[start + 1 : i - 1].removeprefix("?:")
            edges += "".join(alt.rstrip("?*+")[-1:] for alt in _top_level_alternatives(body))
    else:
        edges += before
    after = pattern[i + 2 : i + 3]
    if after == "(":
        end = _matching_paren(pattern, i + 2, 1)
        if end is not None:
            body = pattern[i + 3 : end].removeprefix("?:")
            edges += "".join(alt[:1] for alt in _top_level_alternatives(body))
    else:
        edges += after
    return edges


def lint_pattern(pattern: str, scope: Scope) -> str | None:
    """Mistakes RE2 accepts but that make a pattern silently useless."""
    for i in range(len(pattern) - 1):
        if pattern[i] == "\\" and pattern[i + 1] == "b" and (i == 0 or pattern[i - 1] != "\\"):
            if any(not ch.isascii() and ch.isalpha() for ch in _edge_letters(pattern, i)):
                return (
                    "puts \\b next to a non-ASCII letter, where it never matches as meant "
                    "(RE2's \\b is ASCII-only); drop the \\b or use a character class"
                )
    if scope == "normalised":
        for ch in pattern:
            if not ch.isascii() and fold(ch) != ch.lower():
                return f"contains {ch!r}, which never occurs in the matching form (write {fold(ch)!r}); see docs/l1.md"
    try:
        opts = re2.Options()
        opts.log_errors = False
        opts.case_sensitive = scope == "original"
        if re2.compile(pattern, opts).search("") is not None:
            return "matches the empty string"
    except re2.error:
        pass  # reported by the compile step
    return None
