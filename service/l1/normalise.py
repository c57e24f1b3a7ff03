"""Normalises ticket text for L1 matching and maps every match back to the original text.

The matching form is: Unicode NFKC, case-folded, invisible characters (zero-width, bidi
controls, variation selectors, other format characters) removed, common Latin look-alikes
(Cyrillic а е о р с х…, Greek ο ρ…, typographic quotes and dashes) folded to ASCII, and every
run of whitespace collapsed to one character ("\\n" if the run held a line break, else " ").
Rule patterns are written against that form; spans are reported in the original text.

Speed matters (L1 budget: well under 1 ms for 4 KiB), so the work is done on runs, not on
characters: a character whose normal form is exactly one character ("simple") is translated
with one `str.translate` per run, keeping offsets one-to-one; only clusters that change
length (a base with combining marks, ligatures, removed invisibles) go through the slow path,
cached. From 2,048 characters on, simple characters are looked up in one table for the whole
text instead (numpy), and only the clusters take a Python step. The character classes and
tables are derived from `unicodedata` once per process.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from itertools import accumulate

import numpy as np

# Look-alikes folded to the Latin letter they imitate (after NFKC, before case folding, so
# capitals like Greek Β or Cyrillic Н, which case-fold to unrelated lower-case letters,
# are caught too). Only letters that render (nearly) identically to a Latin one are listed.
_LOOKALIKES: dict[str, str] = {
    # Cyrillic lower case
    "а": "a",
    "в": "b",
    "е": "e",
    "ё": "e",
    "һ": "h",
    "і": "i",
    "ї": "i",
    "ј": "j",
    "к": "k",
    "м": "m",
    "н": "h",
    "о": "o",
    "р": "p",
    "с": "c",
    "т": "t",
    "у": "y",
    "х": "x",
    "ѕ": "s",
    "ԁ": "d",
    "ԛ": "q",
    "ԝ": "w",
    "ӏ": "l",
    "ɡ": "g",
    # Cyrillic capitals
    "А": "a",
    "В": "b",
    "Е": "e",
    "Ё": "e",
    "Һ": "h",
    "І": "i",
    "Ї": "i",
    "Ј": "j",
    "К": "k",
    "М": "m",
    "Н": "h",
    "О": "o",
    "Р": "p",
    "С": "c",
    "Т": "t",
    "У": "y",
    "Х": "x",
    "Ѕ": "s",
    "Ԁ": "d",
    "Ԛ": "q",
    "Ԝ": "w",
    "Ӏ": "l",
    # Greek
    "α": "a",
    "ο": "o",
    "ρ": "p",
    "ν": "v",
    "ι": "i",
    "κ": "k",
    "τ": "t",
    "υ": "u",
    "χ": "x",
    "ϲ": "c",
    "ϳ": "j",
    "Α": "a",
    "Β": "b",
    "Ε": "e",
    "Ζ": "z",
    "Η": "h",
    "Ι": "i",
    "Κ": "k",
    "Μ": "m",
    "Ν": "n",
    "Ο": "o",
    "Ρ": "p",
    "Τ": "t",
    "Υ": "y",
    "Χ": "x",
    "Ϲ": "c",
    # Latin variants NFKC leaves alone
    "ı": "i",
    "ȷ": "j",
    "ʀ": "r",
    "ʟ": "l",
    "ɪ": "i",
    "ɴ": "n",
    "ᴏ": "o",
    "ꜱ": "s",
    # typographic punctuation, so that "don’t" and "l’accès" match "don't" and "l'accès"
    "\u2018": "'",
    "\u2019": "'",
    "\u201a": "'",
    "\u201b": "'",
    "\u2032": "'",
    "\u02bc": "'",
    "\u00b4": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u201e": '"',
    "\u201f": '"',
    "\u2033": '"',
    "\u2010": "-",
    "\u2011": "-",
    "\u2012": "-",
    "\u2013": "-",
    "\u2014": "-",
    "\u2015": "-",
    "\u2212": "-",
}
_LOOKALIKE_TABLE = str.maketrans(_LOOKALIKES)

_LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")

# Default-ignorable characters that are not of category Cf (which is removed wholesale):
# combining grapheme joiner, Hangul fillers, Mongolian and other variation selectors.
_IGNORABLE_RANGES = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xE0000, 0xE0FFF),
)

# Code points examined when deriving the character classes; beyond these only CJK
# extension ideographs and private use remain, which take the (correct, slower) cluster path.
_SCAN_RANGES = ((0x0000, 0x1FFFF), (0xE0000, 0xE0FFF))


_IGNORABLE = frozenset(cp for lo, hi in _IGNORABLE_RANGES for cp in range(lo, hi + 1))


def _invisible(ch: str) -> bool:
    category = unicodedata.category(ch)
    if category in ("Cf", "Cs") or (category == "Cc" and not ch.isspace()):
        return True
    return ord(ch) in _IGNORABLE


def _fold_once(text: str) -> str:
    text = "".join(ch for ch in text if not _invisible(ch))
    text = unicodedata.normalize("NFKC", text).translate(_LOOKALIKE_TABLE)
    text = unicodedata.normalize("NFKC", text.casefold())
    return "".join(("\n" if ch in _LINE_BREAKS else " ") if ch.isspace() else ch for ch in text)


@functools.lru_cache(maxsize=65536)
def fold(cluster: str) -> str:
    """The matching form of one cluster (a base character and what attaches to it).

    Repeated to a fixed point because folding a look-alike can enable a composition
    (Cyrillic "а" + U+0301 → "a" + U+0301 → "á") and case folding can un-normalise.
    """
    current = cluster
    for _ in range(6):
        folded = _fold_once(current)
        if folded == current:
            break
        current = folded
    return current


def _attaches(ch: str) -> bool:
    """True for characters that join the preceding character's cluster: combining marks,
    Hangul medial/final jamo, invisibles, and anything whose decomposition starts so."""
    if _invisible(ch):
        return True
    decomposed = unicodedata.normalize("NFKD", ch)
    if not decomposed:
        return True
    first = decomposed[0]
    cp = ord(first)
    return (
        unicodedata.category(first).startswith("M")
        or unicodedata.combining(first) != 0
        or 0x1160 <= cp <= 0x11FF
        or 0xD7B0 <= cp <= 0xD7FF
    )


def _ranges_to_class(codepoints: list[int]) -> str:
    """A regex character-class body for a sorted list of code points, as ranges."""
    parts: list[str] = []
    i = 0
    while i < len(codepoints):
        j = i
        while j + 1 < len(codepoints) and codepoints[j + 1] == codepoints[j] + 1:
            j += 1
        lo, hi = codepoints[i], codepoints[j]
        parts.append(f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}")
        i = j + 1
    return "".join(parts)


# Longest stretch of text translated character by character in one go (see _tables).
_MIXED_RUN = 64


# Values of _Tables.forms that are not a code point (all lie above U+10FFFF).
_CLUSTER = 0x110000  # a character that is not simple: it starts a cluster of its own
_JOINS = 0x110001  # a character that joins the preceding cluster (see _attaches)
_INVISIBLE = 0x110002  # a character the matching form drops (it joins, too)


@dataclass(frozen=True)
class _Tables:
    # One token per match: group 1 a run of plain characters (matching form = str.lower()),
    # group 2 a short run starting with a special character (lower(), then translate),
    # otherwise one cluster for the slow path.
    tokens: re.Pattern[str]
    translate: dict[int, str]  # lower-cased special character -> its matching form
    is_invisible: np.ndarray  # code point -> True if the matching form drops it
    is_space: np.ndarray  # code point -> True if whitespace (str.isspace, the regex's \\s)
    # code point -> its matching form's code point if it is simple (what `tokens` translates
    # in groups 1 and 2), else _CLUSTER, _JOINS or _INVISIBLE: the array path (_fold_array).
    forms: np.ndarray


@functools.cache
def _tables() -> _Tables:
    """Derive the character classes from unicodedata (a fraction of a second, once)."""
    simple: dict[int, str] = {}  # code point -> matching form (exactly one character)
    joiners: list[int] = []
    invisibles: list[int] = []
    for lo, hi in _SCAN_RANGES:
        for cp in range(lo, hi + 1):
            if 0xD800 <= cp <= 0xDFFF:
                continue
            ch = chr(cp)
            if _invisible(ch):
                invisibles.append(cp)
            if _attaches(ch):
                joiners.append(cp)
            elif unicodedata.is_normalized("NFKC", ch) and ch.casefold() == ch and ch not in _LOOKALIKES:
                simple[cp] = ch  # already in matching form: the common case, kept cheap
            else:
                folded = fold(ch)
                if len(folded) == 1 and not _attaches(folded) and fold(folded) == folded:
                    simple[cp] = folded
    # Whitespace is left as it is here (the collapsing pass maps it), so its form is itself.
    for cp in simple:
        if chr(cp).isspace():
            simple[cp] = chr(cp)
    # Plain characters: str.lower() gives the matching form. Special ones need a translate
    # table keyed on the lower-cased character; any character for which that shortcut would
    # be wrong (lower() changes its length, or two characters disagree) takes the slow path.
    translate: dict[int, str] = {}
    for cp, folded in simple.items():
        lowered = chr(cp).lower()
        if len(lowered) == 1 and lowered != folded:
            translate.setdefault(ord(lowered), folded)
    plain: list[int] = []
    special: list[int] = []
    for cp, folded in list(simple.items()):
        lowered = chr(cp).lower()
        if len(lowered) != 1 or translate.get(ord(lowered), lowered) != folded:
            del simple[cp]
        elif lowered == folded and ord(lowered) not in translate:
            plain.append(cp)
        else:
            special.append(cp)
    joiner = _ranges_to_class(joiners)
    tokens = re.compile(
        f"([{_ranges_to_class(plain)}]+)(?![{joiner}])"
        f"|([{_ranges_to_class(special)}][{_ranges_to_class(sorted(simple))}]{{0,{_MIXED_RUN}}})"
        f"(?![{joiner}])"
        f"|.[{joiner}]*",
        re.DOTALL,
    )
    is_invisible = np.zeros(0x110000, dtype=bool)
    is_invisible[invisibles] = True
    is_invisible[0xD800:0xE000] = True  # lone surrogates (category Cs)
    is_space = np.zeros(0x110000, dtype=bool)
    is_space[[cp for cp in range(0x3001) if chr(cp).isspace()]] = True  # none lies beyond U+3000
    forms = np.full(0x110000, _CLUSTER, dtype=np.uint32)  # beyond _SCAN_RANGES: the slow path
    forms[list(simple)] = [ord(folded) for folded in simple.values()]
    forms[joiners] = _JOINS
    forms[is_invisible] = _INVISIBLE
    return _Tables(tokens, translate, is_invisible, is_space, forms)


def _code_points(text: str) -> np.ndarray:
    """The text's code points as an array (lone surrogates included), for table look-ups."""
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


# The characters of ASCII that the matching form drops (controls that are not whitespace):
# deleting them with bytes.translate tells in one C pass whether an ASCII text holds one; a
# regex search for them tries every character and cost more than lower-casing the text.
_ASCII_INVISIBLE = bytes(cp for cp in range(128) if _invisible(chr(cp)))

# A whitespace run to rewrite: two or more characters, or one that is not " " or "\n".
# Written to start with a bare \s so that the regex engine can skip ahead quickly.
_WHITESPACE_SPLIT = re.compile(r"(\s(?:\s+|(?<=[^ \n])))")
_RUN_FORM = {True: " ", False: "\n"}  # keyed on "the run holds no line break"


@dataclass(frozen=True, slots=True)
class _OffsetMap:
    """Piecewise map from offsets in a derived string back to its source string.

    Segment i covers derived [starts[i], ends[i]) and source [src_starts[i], src_ends[i]);
    a segment of equal lengths maps one-to-one, any other maps as a whole.
    """

    starts: list[int]
    ends: list[int]
    src_starts: list[int]
    src_ends: list[int]

    def start(self, pos: int) -> int:
        if not self.starts:
            return 0
        if pos >= self.ends[-1]:
            return self.src_ends[-1]
        i = bisect_right(self.starts, pos) - 1
        if self.ends[i] - self.starts[i] == self.src_ends[i] - self.src_starts[i]:
            return self.src_starts[i] + pos - self.starts[i]
        return self.src_starts[i]

    def end(self, pos: int) -> int:
        if not self.starts:
            return 0
        if pos <= 0:
            return self.src_starts[0]
        pos = min(pos, self.ends[-1])
        i = bisect_left(self.starts, pos) - 1  # the segment holding pos - 1
        if self.ends[i] - self.starts[i] == self.src_ends[i] - self.src_starts[i]:
            return self.src_starts[i] + pos - self.starts[i]
        return self.src_ends[i]


@dataclass(frozen=True, slots=True)
class _StrippedMap:
    """Maps offsets in text folded from a stripped text (invisibles removed) to the original.

    `kept[i]` is the original offset of the stripped text's character i: a span starts at its
    first character and ends after its last, so removed characters at either edge stay out.
    """

    folded: _OffsetMap  # folded text -> stripped text
    kept: np.ndarray
    length: int  # of the original

    def start(self, pos: int) -> int:
        i = self.folded.start(pos)
        return int(self.kept[i]) if i < len(self.kept) else self.length

    def end(self, pos: int) -> int:
        i = self.folded.end(pos)
        return int(self.kept[i - 1]) + 1 if i > 0 else self.start(0)


class _MapBuilder:
    __slots__ = ("starts", "ends", "src_starts", "src_ends", "out")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.src_starts: list[int] = []
        self.src_ends: list[int] = []
        self.out = 0

    def add(self, src_start: int, src_end: int, length: int) -> None:
        if length == 0:
            return  # removed characters: the next segment simply starts further on
        linear = length == src_end - src_start
        if (
            linear
            and self.ends
            and self.ends[-1] == self.out
            and self.src_ends[-1] == src_start
            and self.ends[-1] - self.starts[-1] == self.src_ends[-1] - self.src_starts[-1]
        ):
            self.ends[-1] += length  # extend the previous one-to-one segment
            self.src_ends[-1] = src_end
        else:
            self.starts.append(self.out)
            self.ends.append(self.out + length)
            self.src_starts.append(src_start)
            self.src_ends.append(src_end)
        self.out += length

    def build(self) -> _OffsetMap:
        return _OffsetMap(self.starts, self.ends, self.src_starts, self.src_ends)


@dataclass(frozen=True, slots=True)
class Normalised:
    """A ticket text in matching form, with the way back to the original."""

    original: str
    text: str
    _folded: _OffsetMap | _StrippedMap  # text after per-cluster folding -> original
    _collapsed: _OffsetMap | None  # text -> text after folding (None: identity)

    def span(self, start: int, end: int) -> tuple[int, int]:
        """Map a [start, end) span of `text` to character offsets in `original`."""
        if self._collapsed is not None:
            start, end = self._collapsed.start(start), self._collapsed.end(end)
        if end <= start:
            s = self._folded.start(start)
            return s, s
        s, e = self._folded.start(start), self._folded.end(end)
        return s, max(s, e)


# From this many characters on, folding works on arrays of code points, and from the second
# many on, so does finding whitespace runs: the regexes take a step per token or per space
# (thousands on a long ticket, most of the cost of normalising it), while below it numpy's
# fixed cost per call is more than the regexes take. The split's regex is cheaper per space
# than the folding's per token, so it stays ahead for longer: timed both ways on the bench's
# long threads cut to 3,000-8,000 characters, they cost the same near 6,000.
_ARRAYS_FROM = 2048
_RUNS_ARRAYS_FROM = 6144


def normalise(original: str) -> Normalised:
    """Bring `original` into matching form (see the module docstring)."""
    folded, folded_map = fold_text(original)
    text, collapsed_map = _collapse(folded)
    return Normalised(original, text, folded_map, collapsed_map)


def fold_text(original: str) -> tuple[str, _OffsetMap | _StrippedMap]:
    """Every step but the whitespace collapse, with the map back to `original`.

    Invisible characters go first, all at once: folding would drop each one anyway, but as
    part of a cluster of its own per letter, which costs a Python step per character on a
    text that hides one between every two letters.
    """
    tables = _tables()
    if original.isascii():
        data = original.encode("ascii")
        if len(data.translate(None, _ASCII_INVISIBLE)) == len(data):
            # Every other ASCII character's matching form is its lower case (a test checks).
            length = len(original)
            return original.lower(), _OffsetMap([0], [length], [0], [length])
    points = _code_points(original)
    if len(original) >= _ARRAYS_FROM:
        forms = tables.forms.take(points)
        invisible = forms == _INVISIBLE
        if not invisible.any():
            return _fold_array(original, forms)
        kept = np.flatnonzero(~invisible)
        visible = points[kept].tobytes().decode("utf-32-le")
        folded, folded_map = _fold_array(visible, forms[kept])
        return folded, _StrippedMap(folded_map, kept, len(original))
    invisible = tables.is_invisible.take(points)
    if not invisible.any():
        return _fold_tokens(original, tables)
    kept = np.flatnonzero(~invisible)
    visible = points[kept].tobytes().decode("utf-32-le")
    folded, folded_map = _fold_tokens(visible, tables)
    return folded, _StrippedMap(folded_map, kept, len(original))


def _fold_array(visible: str, forms: np.ndarray) -> tuple[str, _OffsetMap]:
    """What _fold_tokens answers, from the characters' forms (_Tables.forms) in array steps.

    A long text is mostly simple characters, whose forms are looked up all at once; only its
    clusters (a character that is not simple, or one followed by a joiner, with its joiners)
    are folded one by one, and they are found from the few characters that are not simple.
    The regex stops at every special character and cluster, a Python step each (a homoglyph
    flood is one per letter). `forms` is overwritten where the clusters are.
    """
    builder = _MapBuilder()
    special = np.flatnonzero(forms >= _CLUSTER)
    if not len(special):
        builder.add(0, len(visible), len(visible))
        return forms.tobytes().decode("utf-32-le"), builder.build()
    joiners = special[(forms[special] >= _JOINS) & (special > 0)]
    members = np.union1d(special, joiners - 1)  # a joiner joins the character before it
    # A cluster starts at each member that does not join (or at a joiner opening the text)
    # and runs over the members after it, which are its joiners.
    opens = np.flatnonzero((forms[members] < _JOINS) | (members == 0))
    starts = members[opens]
    ends = members[np.append(opens[1:], len(members)) - 1] + 1
    forms[members] = 0x20  # the simple text is sliced around clusters: any code point will do
    simple = forms.tobytes().decode("utf-32-le")
    pieces: list[str] = []
    last = 0
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        pieces.append(simple[last:start])
        builder.add(last, start, start - last)
        piece = fold(visible[start:end])
        pieces.append(piece)
        builder.add(start, end, len(piece))
        last = end
    pieces.append(simple[last:])
    builder.add(last, len(visible), len(visible) - last)
    return "".join(pieces), builder.build()


def _fold_tokens(original: str, tables: _Tables) -> tuple[str, _OffsetMap]:
    """Fold token by token (`_Tables.tokens`): runs of simple characters, and clusters."""
    pieces: list[str] = []
    builder = _MapBuilder()
    translate = tables.translate
    for match in tables.tokens.finditer(original):
        start, end = match.span()
        plain, mixed = match.group(1, 2)
        if plain is not None:
            piece = plain.lower()
        elif mixed is not None:
            piece = mixed.lower().translate(translate)
        else:
            piece = fold(match.group(0))
        pieces.append(piece)
        builder.add(start, end, len(piece))
    return "".join(pieces), builder.build()


def _collapse(folded: str) -> tuple[str, _OffsetMap | None]:
    """Collapse whitespace runs, with the map back to `folded`.

    No Python step per character or per piece of text: the runs are found in one call (see
    _runs), and forms, lengths and offsets are each computed by one call over all the pieces.
    """
    parts = _runs(folded)  # text, run, text, run, ..., text
    if len(parts) == 1:
        return folded, None
    lengths = list(map(len, parts))
    parts[1::2] = map(_RUN_FORM.__getitem__, map(_LINE_BREAKS.isdisjoint, parts[1::2]))
    out_lengths = lengths.copy()
    out_lengths[1::2] = [1] * (len(parts) // 2)
    src = list(accumulate(lengths, initial=0))
    out = list(accumulate(out_lengths, initial=0))
    # A text piece maps one-to-one, a run as a whole; an empty first or last piece is a
    # segment of length zero, which the map's lookups step over.
    return "".join(parts), _OffsetMap(out[:-1], out[1:], src[:-1], src[1:])


def _runs(folded: str) -> list[str]:
    """`folded` split at the whitespace runs to rewrite: text, run, text, …, text."""
    if len(folded) < _RUNS_ARRAYS_FROM:
        return _WHITESPACE_SPLIT.split(folded)
    return _split_at_array_runs(folded)


def _split_at_array_runs(folded: str) -> list[str]:
    """What `_WHITESPACE_SPLIT.split` answers, from whitespace edges found by numpy."""
    points = _code_points(folded)
    edges = np.flatnonzero(np.diff(_tables().is_space.take(points), prepend=False, append=False))
    starts, ends = edges[0::2], edges[1::2]  # every stretch of whitespace, single spaces too
    first = points.take(starts)
    rewrite = (ends - starts > 1) | ((first != 0x20) & (first != 0x0A))
    parts: list[str] = []
    last = 0
    for start, end in zip(starts[rewrite].tolist(), ends[rewrite].tolist(), strict=True):
        parts += (folded[last:start], folded[start:end])
        last = end
    parts.append(folded[last:])
    return parts
