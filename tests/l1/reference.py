"""A deliberately plain L1 engine: what `evaluate` must answer, computed the slow way.

No pattern sets, no localisation, no vectorising, no script skipping: every pattern of every
rule, compiled here with the options its scope declares (matching-form patterns ignoring case),
is run over the whole text, whitespace is collapsed character by character, and byte offsets
become character offsets by decoding. The parts the fast engine shares unchanged (the per-cluster folding, the
context windows, the validators) are reused. tests/l1/test_equivalence.py holds the two
together; `python -m tests.l1.reference DATA.jsonl…` compares them on whole files.
"""

from __future__ import annotations

import functools
import json
import sys

import msgspec
import re2

from service.l1.compiled import Rule, RulePack, Window
from service.l1.engine import MAX_CANDIDATES_PER_PATTERN, _Occurrences, _scannable
from service.l1.normalise import _LINE_BREAKS, fold_text
from service.l1.pack import options
from service.l1.schema import RuleSpec
from service.results import L1Result, RuleHit, ticket_text


class _Text:
    """What _Occurrences reads: the text, its UTF-8 bytes, byte -> character offsets."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.data = text.encode("utf-8")

    def char(self, offset: int) -> int:
        return len(self.data[:offset].decode("utf-8"))

    def chars(self, offsets: list[int]) -> list[int]:
        return [self.char(offset) for offset in offsets]


def collapse(folded: str) -> tuple[str, list[int], list[int]]:
    """Whitespace runs to one character; for each output character, its source [start, end)."""
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    i = 0
    while i < len(folded):
        j = i + 1
        if folded[i].isspace():
            while j < len(folded) and folded[j].isspace():
                j += 1
            run = folded[i:j]
            if run not in (" ", "\n"):
                run = "\n" if any(ch in _LINE_BREAKS for ch in run) else " "
            out.append(run)
        else:
            out.append(folded[i])
        starts.append(i)
        ends.append(j)
        i = j
    return "".join(out), starts, ends


class _Normalised:
    def __init__(self, original: str) -> None:
        folded, self.folded_map = fold_text(original)
        self.text, self.starts, self.ends = collapse(folded)
        self.folded_length = len(folded)

    def span(self, start: int, end: int) -> tuple[int, int]:
        if self.text:
            start = self.starts[start] if start < len(self.text) else self.folded_length
            end = self.ends[min(end, len(self.text)) - 1] if end > 0 else self.starts[0]
        if end <= start:
            s = self.folded_map.start(start)
            return s, s
        s, e = self.folded_map.start(start), self.folded_map.end(end)
        return s, max(s, e)


def _declared(rule: Rule) -> tuple[tuple, Window | None, Window | None]:
    """The rule's patterns and windows compiled with the options its scope declares."""
    return _compile_declared(msgspec.json.encode(rule.spec))


@functools.cache
def _compile_declared(encoded_spec: bytes) -> tuple[tuple, Window | None, Window | None]:
    spec = msgspec.json.decode(encoded_spec, type=RuleSpec)
    opts = options(spec.scope)

    def window(block) -> Window | None:
        if block is None:
            return None
        words = re2.compile("|".join(f"(?:{word})" for word in block.words), opts)
        return Window(words, block.within, block.direction)

    patterns = tuple(re2.compile(p, opts) for p in spec.patterns)
    return patterns, window(spec.context), window(spec.unless)


def _rule_span(rule: Rule, subject: _Text, norm: _Normalised | None) -> tuple[int, int] | None:
    """The first accepted match of the first pattern, in the rule's order, that has one."""
    context = unless = None
    patterns, context_window, unless_window = _declared(rule)
    for pattern in patterns:
        for n, match in enumerate(pattern.finditer(subject.data)):
            if n >= MAX_CANDIDATES_PER_PATTERN:
                break
            if rule.validator is not None and not rule.validator(match.group(0).decode()):
                continue
            start, end = subject.char(match.start()), subject.char(match.end())
            if context_window is not None:
                context = context or _Occurrences(context_window, subject)  # type: ignore[arg-type]
                if not context.near(start, end):
                    continue
            if unless_window is not None:
                unless = unless or _Occurrences(unless_window, subject)  # type: ignore[arg-type]
                if unless.near(start, end):
                    continue
            return norm.span(start, end) if norm is not None else (start, end)
    return None


def evaluate(pack: RulePack, text: str) -> L1Result:
    original, _ = _scannable(text)
    norm = _Normalised(original)
    subjects = {"normalised": _Text(norm.text), "original": _Text(original)}
    hits: list[RuleHit] = []
    for rule in pack.rules:
        scope = rule.spec.scope
        mapping = norm if scope == "normalised" else None
        span = _rule_span(rule, subjects[scope], mapping)
        if rule.spec.fires == "no_match":
            span = (0, 0) if span is None else None
        if span is not None:
            spec, (start, end) = rule.spec, span
            hits.append(
                RuleHit(id=spec.id, level=spec.level, flag=spec.flag, span=(start, end), text=original[start:end])
            )
    hits.sort(key=lambda hit: (hit.span, hit.id))
    level = "red" if any(h.level == "red" for h in hits) else "yellow" if hits else "none"
    return L1Result(level=level, rules=hits, rules_sha=pack.sha, elapsed_ms=0.0)


def answer(result: L1Result) -> tuple[str, list[tuple[str, tuple[int, int], str]]]:
    """What must be identical: the level and each hit's rule, span and original text."""
    return result.level, [(hit.id, tuple(hit.span), hit.text) for hit in result.rules]


def main(paths: list[str]) -> int:
    from service.l1 import evaluate as fast
    from service.l1 import load_pack
    from service.settings import load_settings

    pack = load_pack(load_settings().rules_dir)
    total = differ = 0
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    continue
                row = json.loads(line)
                text = ticket_text(row.get("subject"), row.get("body", ""))
                total += 1
                if answer(fast(pack, text)) != answer(evaluate(pack, text)):
                    differ += 1
                    print(f"DIFFERENT: {row.get('id')}", file=sys.stderr)
    print(f"{total} tickets, {differ} different, rules_sha {pack.sha}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
