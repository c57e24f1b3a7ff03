"""Evaluates a compiled rule pack against one ticket text: pure, no I/O, linear time.

The text is normalised once, encoded to UTF-8 once, and scanned once per pattern set (a
small, fixed number: see pack._group_key), except sets whose every pattern needs a script the
text does not hold (scripts.py). Only the patterns a set reports are then run on their own,
to find each firing rule's one span and apply validators and context windows. RE2 runs in
time linear in the text whatever the pattern, so no input can make L1 slow catastrophically.
"""

from __future__ import annotations

import time
from bisect import bisect_left

import numpy as np

from service.l1.compiled import Rule, RulePack, Window
from service.l1.normalise import Normalised, normalise
from service.l1.scripts import present
from service.results import L1Level, L1Result, RuleHit

MAX_CANDIDATES_PER_PATTERN = 100  # bounds validator/context work on texts full of numbers
MAX_WORD_OCCURRENCES = 1000  # context words recorded per rule and ticket
SLICE_SEARCHES = 8  # candidates checked by searching their own window before one full scan


def _scannable(text: str) -> tuple[str, bytes]:
    """The text and its UTF-8, which RE2 reads: lone surrogates (possible in a Python str)
    become U+FFFD, same length. The text is encoded once, here, for both."""
    try:
        return text, text.encode("utf-8")
    except UnicodeEncodeError:
        text = "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text)
        return text, text.encode("utf-8")


class _Subject:
    """A text the patterns read, as str and as UTF-8 bytes, with byte→character offsets.

    RE2 works on bytes; handing it a str makes the wrapper re-encode the text and re-count
    characters on every call, which dominated the cost on long tickets.
    """

    __slots__ = ("text", "data", "_continuations")

    def __init__(self, text: str, data: bytes | None = None) -> None:
        self.text = text
        self.data = text.encode("utf-8") if data is None else data
        self._continuations: np.ndarray | None = None

    def char(self, offset: int) -> int:
        """The character offset of a byte offset that falls on a character boundary."""
        if len(self.data) == len(self.text):
            return offset
        return offset - int(self._continuation_bytes().searchsorted(offset))

    def chars(self, offsets: list[int]) -> list[int]:
        """`char` of many offsets at once (one array call instead of one per offset)."""
        if len(self.data) == len(self.text) or not offsets:
            return offsets
        found = np.asarray(offsets)
        return (found - self._continuation_bytes().searchsorted(found)).tolist()

    def _continuation_bytes(self) -> np.ndarray:
        """Where the UTF-8 continuation bytes are (few in most texts): a character offset is
        the byte offset less the continuation bytes before it."""
        if self._continuations is None:
            raw = np.frombuffer(self.data, dtype=np.uint8)
            self._continuations = np.flatnonzero((raw & 0xC0) == 0x80)
        return self._continuations


class _Occurrences:
    """Answers "does one of a window's words occur near this candidate?" for one ticket.

    The first few candidates search their own slice of the text; past SLICE_SEARCHES the
    words' occurrences are found in one scan of the whole text and looked up by bisection,
    so a long ticket full of phone-like numbers costs one scan, not hundreds. An occurrence
    counts when it lies wholly inside the candidate's window.
    """

    __slots__ = ("window", "subject", "starts", "ends", "complete", "searches")

    def __init__(self, window: Window, subject: _Subject) -> None:
        self.window = window
        self.subject = subject
        self.starts: list[int] | None = None  # None until the one scan has run
        self.ends: list[int] = []
        self.complete = True
        self.searches = 0

    def _scan(self) -> list[int]:
        starts: list[int] = []
        ends: list[int] = []
        for n, match in enumerate(self.window.words.finditer(self.subject.data)):
            if n >= MAX_WORD_OCCURRENCES:
                self.complete = False  # past the last recorded one, fall back to a search
                break
            starts.append(match.start())
            ends.append(match.end())
        self.ends = self.subject.chars(ends)
        return self.subject.chars(starts)

    def near(self, start: int, end: int) -> bool:
        window = self.window
        lo = max(0, start - window.within if window.direction != "after" else end)
        hi = end + window.within if window.direction != "before" else start
        if self.starts is None and self.searches < SLICE_SEARCHES:
            self.searches += 1
            return window.words.search(self.subject.text[lo:hi]) is not None
        if self.starts is None:
            self.starts = self._scan()
        starts = self.starts
        i = bisect_left(starts, lo)
        while i < len(starts) and starts[i] < hi:
            if self.ends[i] <= hi:
                return True
            i += 1
        if not self.complete and (not starts or hi > starts[-1]):
            return window.words.search(self.subject.text[lo:hi]) is not None
        return False


def _hit_for(
    rule: Rule,
    pattern_indices: list[int],
    subject: _Subject,
    norm: Normalised | None,
    original: str,
    validated: dict[tuple[str, bytes], bool],
) -> RuleHit | None:
    """The rule's hit: the first accepted match of the first of its firing patterns, or None.

    One hit per rule is what the level and the explanation need; each further span would cost
    one more search of the text (on a long ticket where dozens of rules fire, most of the time
    spent on spans). Patterns are tried in the order the rule lists them. `validated` keeps this
    ticket's validator answers: a thread quotes the same number again and again, often to two
    rules (a red and a yellow national-ID rule); it lives as long as the evaluation, so no
    candidate number outlives its ticket in the process.
    """
    context: _Occurrences | None = None
    unless: _Occurrences | None = None
    for p in pattern_indices:
        for n, match in enumerate(rule.patterns[p].finditer(subject.data)):
            if n >= MAX_CANDIDATES_PER_PATTERN:
                break
            start, end = subject.char(match.start()), subject.char(match.end())
            # The windows first: a checksum costs several times a window's search.
            if rule.context is not None:
                context = context or _Occurrences(rule.context, subject)
                if not context.near(start, end):
                    continue
            if rule.unless is not None:
                unless = unless or _Occurrences(rule.unless, subject)
                if unless.near(start, end):
                    continue
            if rule.validator is not None:
                key = (rule.spec.validator or "", match.group(0))
                if key not in validated:
                    validated[key] = rule.validator(match.group(0).decode())
                if not validated[key]:
                    continue
            start, end = norm.span(start, end) if norm is not None else (start, end)
            spec = rule.spec
            return RuleHit(id=spec.id, level=spec.level, flag=spec.flag, span=(start, end), text=original[start:end])
    return None


def evaluate(pack: RulePack, text: str) -> L1Result:
    """Which rules fire on `text` (service.results.ticket_text), where, and the L1 level.

    A rule that fires on no match (RuleSpec.fires) fires when none of its patterns is found;
    its hit has the empty span (0, 0), as there is nothing in the text to point at."""
    started = time.perf_counter()
    original, data = _scannable(text)
    norm = normalise(original)
    subjects = {"normalised": _Subject(norm.text), "original": _Subject(original, data)}
    fired: dict[tuple[str, int], list[int]] = {}
    scripts = present(subjects["normalised"].data)
    for patterns in pack.sets:
        if patterns.script is not None and patterns.script not in scripts:
            continue  # no pattern of the set can match a text without its script
        for index in patterns.matcher.Match(subjects[patterns.scope].data) or ():
            r, p = patterns.owners[index]
            fired.setdefault((patterns.scope, r), []).append(p)
    hits: list[RuleHit] = []
    validated: dict[tuple[str, bytes], bool] = {}
    for (scope, r), pattern_indices in sorted(fired.items()):
        if r in pack.absence_rules:
            continue
        mapping = norm if scope == "normalised" else None
        hit = _hit_for(pack.rules[r], sorted(pattern_indices), subjects[scope], mapping, original, validated)
        if hit is not None:
            hits.append(hit)
    for r in pack.absence_rules:
        rule = pack.rules[r]
        reported = sorted(fired.get((rule.spec.scope, r), []))
        # A set may report a pattern its exact form does not match (pack.set_form): confirm
        # those, unless a pattern the set reads exactly was reported (a search of a long text).
        subject = subjects[rule.spec.scope]
        if not any((r, p) in pack.exact_in_sets for p in reported) and not any(
            rule.patterns[p].search(subject.data) for p in reported
        ):
            spec = rule.spec
            hits.append(RuleHit(id=spec.id, level=spec.level, flag=spec.flag, span=(0, 0), text=""))
    hits.sort(key=lambda hit: (hit.span, hit.id))
    level: L1Level = "none"
    if any(hit.level == "red" for hit in hits):
        level = "red"
    elif hits:
        level = "yellow"
    elapsed_ms = (time.perf_counter() - started) * 1000.0
    return L1Result(level=level, rules=hits, rules_sha=pack.sha, elapsed_ms=round(elapsed_ms, 4))
