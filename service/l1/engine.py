"""Evaluates a compiled rule pack against one ticket text: pure, no I/O, linear time.

Each scope's patterns sit in one re2.Set, so a ticket is scanned once for the matching form
and once for the original text (only if some rule reads it). Only the patterns the set
reports are then run alone to find spans, check context words and validators. RE2 runs
in time linear in the text, whatever the pattern.
"""

from __future__ import annotations

import time

from service.l1.normalise import Normalised, normalise
from service.l1.pack import PatternSet, Rule, RulePack, Window
from service.results import L1Level, L1Result, RuleHit

MAX_HITS_PER_RULE = 5  # enough to explain a decision; the level is the same with one
MAX_CANDIDATES_PER_PATTERN = 200  # bounds validator work on texts full of digit runs


def _scannable(text: str) -> str:
    """RE2 takes UTF-8: lone surrogates (possible in a Python str) become U+FFFD, same length."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text)
    return text


def _fired(patterns: PatternSet, subject: str) -> list[tuple[int, int]]:
    if patterns.matcher is None:
        return []
    indices = patterns.matcher.Match(subject) or []
    return sorted(patterns.owners[i] for i in indices)


def _near(window: Window, subject: str, start: int, end: int) -> bool:
    lo = start - window.within if window.direction != "after" else end
    hi = end + window.within if window.direction != "before" else start
    return window.words.search(subject[max(0, lo) : max(0, hi)]) is not None


def _accept(rule: Rule, subject: str, start: int, end: int, matched: str) -> bool:
    if rule.validator is not None and not rule.validator(matched):
        return False
    if rule.context is not None and not _near(rule.context, subject, start, end):
        return False
    if rule.unless is not None and _near(rule.unless, subject, start, end):
        return False
    return True


def _hits_for(
    rule: Rule, pattern_indices: list[int], subject: str, norm: Normalised | None, original: str
) -> list[RuleHit]:
    spans: list[tuple[int, int]] = []
    for p in pattern_indices:
        for n, match in enumerate(rule.patterns[p].finditer(subject)):
            if n >= MAX_CANDIDATES_PER_PATTERN or len(spans) >= MAX_HITS_PER_RULE:
                break
            start, end = match.span()
            if not _accept(rule, subject, start, end, match.group(0)):
                continue
            span = norm.span(start, end) if norm is not None else (start, end)
            if span not in spans:
                spans.append(span)
    spec = rule.spec
    return [
        RuleHit(id=spec.id, level=spec.level, flag=spec.flag, span=(start, end),
                text=original[start:end])
        for start, end in spans
    ]


def evaluate(pack: RulePack, text: str) -> L1Result:
    """Which rules fire on `text` (service.results.ticket_text), where, and the L1 level."""
    started = time.perf_counter()
    original = _scannable(text)
    norm = normalise(original)
    hits: list[RuleHit] = []
    for patterns, subject, mapping in (
        (pack.normalised, norm.text, norm),
        (pack.original, original, None),
    ):
        by_rule: dict[int, list[int]] = {}
        for r, p in _fired(patterns, subject):
            by_rule.setdefault(r, []).append(p)
        for r, pattern_indices in by_rule.items():
            hits.extend(_hits_for(pack.rules[r], pattern_indices, subject, mapping, original))
    hits.sort(key=lambda hit: (hit.span, hit.id))
    level: L1Level = "none"
    if any(hit.level == "red" for hit in hits):
        level = "red"
    elif hits:
        level = "yellow"
    elapsed_ms = (time.perf_counter() - started) * 1000.0
    return L1Result(level=level, rules=hits, rules_sha=pack.sha, elapsed_ms=round(elapsed_ms, 4))
