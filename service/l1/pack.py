"""Loads a rule pack from YAML, validates every part of it, and compiles it for matching.

`load_pack` refuses a pack with any problem and names the file and rule at fault: unknown or
missing keys, RE2 compile errors (with the pattern), duplicate ids, a flag on a non-red
rule, an unknown validator, and any example that does not behave. The compiled `RulePack`
(compiled.py) is immutable; the engine (engine.py) reads it, the holder (holder.py) swaps it.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import msgspec
import re2
import yaml

from service.errors import PackError
from service.l1.compiled import PatternSet, Regex, Rule, RulePack, Window
from service.l1.engine import evaluate
from service.l1.lint import lint_pattern
from service.l1.schema import Context, PackFile, RuleSpec, Scope
from service.l1.scripts import required_script
from service.l1.validators import VALIDATORS

RULE_FILE_SUFFIXES = (".yaml", ".yml")
_ID = re.compile(r"[a-z0-9][a-z0-9_.-]*\Z")
_LANGUAGE = re.compile(r"[a-z]{2}\Z")
# RE2 memory budgets (each mostly the lazily built DFA cache, grown as text needs states, so
# the sets can hold up to 64 MiB each on adversarial traffic; the L1 bench records the resident
# size its traffic leaves, `rss_mb`). Below 64 MiB the largest sets rebuilt their DFA on most
# short tickets (0.4-0.7 ms each, up to 9 ms; docs/l1.md, "Matching and speed").
SET_MAX_MEM = 64 << 20
# Patterns per re2.Set (see _pattern_sets and set_size). Fewer, larger sets rescan a text the
# process has read before faster (fewer passes), but a ticket it has not read makes each set
# build the DFA states that text needs, and a state of a large set of non-ASCII patterns (many
# byte classes, many instructions) is slow to build: with all 224 such patterns in one set, it
# cost an unread short ticket more than the rest of L1, and long threads quoting tickets of
# several languages outgrew its cache within one scan (about 60 ms per 32 KiB thread in a row,
# against under 10 with sets of at most 64). Since the sets read `set_form`, whose letters are
# a few byte ranges instead of hundreds, sets of 128 read as fast on unread text as sets of 64
# did and pass over a ticket fewer times; 256 was again slow on unread threads. ASCII-only
# patterns, whose states are small, stay in one set (docs/l1.md, "Matching and speed":
# bench-l1-unread.json, bench-l1-setform-*.json).
SET_SIZE = 256
NON_ASCII_SET_SIZE = 128
PATTERN_MAX_MEM = 4 << 20
# Han characters and Unicode classes: see _group_key.
_HAN = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_UNICODE_ESCAPE = re.compile(r"\\[pPxuU]")


def options(scope: Scope, *, max_mem: int = PATTERN_MAX_MEM) -> re2.Options:
    """RE2 options per scope, as a rule declares them: matching-form patterns ignore case,
    original ones do not. The engine compiles with `matching_options` and `as_compiled`."""
    opts = re2.Options()
    opts.log_errors = False
    opts.max_mem = max_mem
    opts.case_sensitive = scope == "original"
    return opts


def matching_options(*, max_mem: int = PATTERN_MAX_MEM) -> re2.Options:
    """What the engine compiles with, in both scopes: case-sensitive (see `as_compiled`)."""
    opts = re2.Options()
    opts.log_errors = False
    opts.max_mem = max_mem
    opts.case_sensitive = True
    return opts


# A pattern whose case matters: an upper-case letter, or an escape that names a code point or
# a cased class. Escaped letters such as \b, \B, \W or \pL are not letters of the text.
_ESCAPE = re.compile(r"\\(?:[pP](?:\{[^}]*\}|.)|.)", re.DOTALL)
_CASED_ESCAPE = re.compile(r"\\(?:[xuUN0-7]|[pP]\{(?:L[ult]|Upper|Lower|Title)\})")


def as_compiled(pattern: str, scope: Scope) -> str:
    """The pattern as the engine compiles it (case-sensitive, `matching_options`).

    The matching form is case-folded: it holds no upper-case letter, so a pattern written in
    lower case finds there exactly what it would find ignoring case, and case-sensitive
    automata are smaller (fewer byte classes), which made the set scans about a third faster
    (docs/l1.md, "Matching and speed"). A matching-form pattern whose case matters keeps
    ignoring case with an inline (?i); original-scope patterns are case-sensitive as declared.
    """
    if scope == "original":
        return pattern
    bare = _ESCAPE.sub("", pattern)
    if _CASED_ESCAPE.search(pattern) or any(ch.lower() != ch for ch in bare):
        return "(?i)" + pattern
    return pattern


# What set_form puts for \pL: every ASCII letter and every non-ASCII code point.
_ANY_LETTER = r"A-Za-z\x{80}-\x{10FFFF}"


def set_form(compiled: str) -> str:
    r"""The pattern as its re2.Set reads it: a superset of `compiled` (as_compiled's form) that
    the set's DFA reads faster.

    A set only tells which patterns may match; the engine then runs each reported pattern as
    compiled to find its span (engine._hit_for), and a pattern the set reported that finds
    nothing makes no hit. So the set may report more, never less. `\pL` (any letter) costs a
    DFA hundreds of UTF-8 byte ranges, which split its bytes into many classes and its states
    into many more; here it becomes "an ASCII letter or any non-ASCII character", and in a
    negated class ("not a letter") "not an ASCII letter". Both accept everything the exact class
    accepts; they differ only where a non-ASCII character that is not a letter (a dash, a
    no-break space, an ideographic full stop) stands next to a word, where the set reports a
    candidate the exact pattern then rejects (docs/l1.md, "Matching and speed").
    """
    out: list[str] = []
    i, in_class, negated = 0, False, False
    while i < len(compiled):
        ch = compiled[i]
        if ch == "\\" and i + 1 < len(compiled):
            if compiled.startswith("\\pL", i):
                if in_class:
                    out.append("A-Za-z" if negated else _ANY_LETTER)
                else:
                    out.append("[" + _ANY_LETTER + "]")
                i += 3
            elif compiled.startswith("\\x{", i):  # a code point, copied whole
                end = compiled.index("}", i) + 1
                out.append(compiled[i:end])
                i = end
            else:
                out.append(compiled[i : i + 2])
                i += 2
            continue
        if in_class:
            # "]" right after "[" or "[^" is a literal bracket, not the end of the class
            opened_here = compiled[i - 1] == "[" or (compiled[i - 1] == "^" and compiled[i - 2] == "[")
            in_class = not (ch == "]" and not opened_here)
        elif ch == "[":
            in_class, negated = True, compiled.startswith("[^", i)
        out.append(ch)
        i += 1
    return "".join(out)


def pack_files(path: Path) -> list[Path]:
    """The files of a pack: the file itself, or every *.yaml/*.yml under the directory."""
    if path.is_file():
        return [path]
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in RULE_FILE_SUFFIXES)
    raise PackError([f"{path}: no such file or directory"])


def canonical_bytes(raw: bytes) -> bytes:
    """A file's bytes for hashing: UTF-8 BOM dropped, CRLF and CR line ends turned into LF."""
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    return raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def pack_sha(files: dict[str, bytes]) -> str:
    """sha256 over, for each file sorted by name: name, NUL, canonical bytes, NUL."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + canonical_bytes(files[name]) + b"\0")
    return digest.hexdigest()


class _StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """Safe YAML that refuses a key given twice in one mapping (YAML would keep the last)."""


def _mapping_without_duplicates(loader: Any, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # "<<: *anchor" merges; explicit keys may then override
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)


def _re2_message(error: Exception) -> str:
    text = str(error)
    if text.startswith(("b'", 'b"')):
        text = text[2:-1]
    return text


def compile_pattern(pattern: str, scope: Scope) -> Regex:
    """Compile one pattern as the engine runs it (`as_compiled`); raises re2.error."""
    return re2.compile(as_compiled(pattern, scope), matching_options())


def _compile_rule(spec: RuleSpec, file: str) -> tuple[Rule | None, list[str]]:
    where = f"{file}: rule {spec.id}"
    problems: list[str] = []
    if not _ID.match(spec.id):
        problems.append(f"{where}: id must be lower-case letters, digits, '.', '_' or '-'")
    if not spec.description.strip():
        problems.append(f"{where}: description is empty")
    if spec.flag != "none" and spec.level != "red":
        problems.append(f"{where}: flag {spec.flag!r} requires level 'red', got {spec.level!r}")
    if not spec.languages:
        problems.append(f"{where}: languages is empty")
    for language in spec.languages:
        if not _LANGUAGE.match(language):
            problems.append(f"{where}: language {language!r} is not an ISO 639-1 code")
    if not spec.patterns:
        problems.append(f"{where}: patterns is empty")
    if spec.validator is not None and spec.validator not in VALIDATORS:
        known = ", ".join(sorted(VALIDATORS))
        problems.append(f"{where}: unknown validator {spec.validator!r} (known: {known})")
    if spec.fires == "no_match":
        if spec.validator is not None or spec.context is not None or spec.unless is not None:
            problems.append(f"{where}: a rule that fires on no match takes no validator, context or unless")
        if spec.level != "yellow":
            problems.append(f"{where}: a rule that fires on no match must be yellow (an absence is no red flag)")
    if not spec.examples.must_match:
        problems.append(f"{where}: examples.must_match is empty")
    if not spec.examples.must_not_match:
        problems.append(f"{where}: examples.must_not_match is empty")
    compiled: list[Regex] = []
    for pattern in spec.patterns:
        try:
            compiled.append(compile_pattern(pattern, spec.scope))
        except re2.error as error:
            problems.append(f"{where}: pattern {pattern!r} does not compile: {_re2_message(error)}")
            continue
        lint = lint_pattern(pattern, spec.scope)
        if lint:
            problems.append(f"{where}: pattern {pattern!r} {lint}")
    context = _compile_window(spec.context, "context", spec.scope, where, problems)
    unless = _compile_window(spec.unless, "unless", spec.scope, where, problems)
    if problems:
        return None, problems
    validator = VALIDATORS[spec.validator] if spec.validator else None
    return Rule(spec, file, tuple(compiled), validator, context, unless), []


def _compile_window(block: Context | None, name: str, scope: Scope, where: str, problems: list[str]) -> Window | None:
    if block is None:
        return None
    before = len(problems)
    if block.within <= 0:
        problems.append(f"{where}: {name}.within must be positive, got {block.within}")
    if not block.words:
        problems.append(f"{where}: {name}.words is empty")
    for word in block.words:
        try:
            compile_pattern(word, scope)
        except re2.error as error:
            problems.append(f"{where}: {name} word {word!r} does not compile: {_re2_message(error)}")
            continue
        lint = lint_pattern(word, scope)
        if lint:
            problems.append(f"{where}: {name} word {word!r} {lint}")
    if len(problems) > before:
        return None
    words = compile_pattern("|".join(f"(?:{word})" for word in block.words), scope)
    return Window(words, block.within, block.direction)


def _group_key(rule: Rule, pattern: str) -> tuple[Scope, str | None, str]:
    """Which family of sets a pattern joins: (scope, the script it needs, family).

    Patterns that need a script (scripts.required_script) share sets, skipped on tickets
    without that script. The others share sets by the bytes they read: ASCII-only patterns
    together, patterns with Han characters together, the rest together. A set's DFA state
    holds one transition per class of bytes its patterns tell apart, so sets of ASCII-only
    patterns keep small states that stay in the CPU cache (docs/l1.md, "Matching and speed").
    """
    if rule.spec.scope == "original":
        return "original", None, "*"
    script = required_script(pattern)
    if script is not None:
        return "normalised", script, script
    if pattern.isascii() and not _UNICODE_ESCAPE.search(pattern):
        return "normalised", None, "ascii"
    return "normalised", None, "han" if _HAN.search(pattern) else "unicode"


def set_size(family: str) -> int:
    """The most patterns of a family (_group_key) one re2.Set holds."""
    return SET_SIZE if family == "ascii" else NON_ASCII_SET_SIZE


def _pattern_sets(rules: tuple[Rule, ...]) -> tuple[PatternSet, ...]:
    """Split the patterns into re2.Sets, each scanned once per ticket that can match it.

    Each scan reads the whole ticket, so on long tickets the number of scans dominates; but
    RE2 builds a set's DFA lazily, and a set of too many patterns outgrows its memory budget
    (SET_MAX_MEM) and rebuilds its states on every ticket, and the larger a set, the slower
    each state it builds for text the process has not read. Families of patterns that read
    alike (_group_key), cut evenly into sets of at most set_size(family), balance these; a
    ticket scans only the sets of the scripts it holds (docs/l1.md, "Matching and speed").
    """
    groups: dict[tuple[Scope, str | None, str], list[tuple[int, int]]] = {}
    for r, rule in enumerate(rules):
        for p, pattern in enumerate(rule.spec.patterns):
            groups.setdefault(_group_key(rule, pattern), []).append((r, p))
    sets: list[PatternSet] = []
    for (scope, script, family), members in sorted(groups.items(), key=lambda item: (item[0][0], item[0][2])):
        chunks = -(-len(members) // set_size(family))
        size = -(-len(members) // chunks)  # even chunks: no set of one stray pattern
        for number, chunk_start in enumerate(range(0, len(members), size), start=1):
            owners = members[chunk_start : chunk_start + size]
            name = f"{scope}:{family}#{number}"
            matcher = re2.Set.SearchSet(matching_options(max_mem=SET_MAX_MEM))
            for index, (r, p) in enumerate(owners):
                if matcher.Add(set_form(as_compiled(rules[r].spec.patterns[p], scope))) != index:
                    raise PackError([f"{rules[r].file}: rule {rules[r].id}: re2.Set numbering"])
            try:
                matcher.Compile()
            except re2.error as error:
                raise PackError([f"{name}: the patterns do not compile as a set: {error}"]) from None
            sets.append(PatternSet(scope, name, matcher, tuple(owners), script))
    return tuple(sets)


def _read(root: Path) -> dict[str, bytes]:
    files = pack_files(root)
    if not files:
        raise PackError([f"{root}: no rule files (*.yaml, *.yml)"])
    base = root if root.is_dir() else root.parent
    out: dict[str, bytes] = {}
    for file in files:
        try:
            out[file.relative_to(base).as_posix()] = file.read_bytes()
        except OSError as error:
            raise PackError([f"{file}: cannot read: {error.strerror or error}"]) from None
    return out


def _parse(name: str, raw: bytes) -> tuple[list[tuple[RuleSpec, str]], list[str]]:
    try:
        document = yaml.load(canonical_bytes(raw).decode("utf-8"), Loader=_StrictLoader)
    except UnicodeDecodeError as error:
        return [], [f"{name}: not UTF-8: {error}"]
    except yaml.YAMLError as error:
        return [], [f"{name}: YAML error: {error}".replace("\n", " ")]
    try:
        pack_file = msgspec.convert(document, PackFile)
    except msgspec.ValidationError as error:
        return [], [f"{name}: {error}"]
    specs: list[tuple[RuleSpec, str]] = []
    problems: list[str] = []
    for index, raw_rule in enumerate(pack_file.rules):
        label = raw_rule.get("id") if isinstance(raw_rule.get("id"), str) else f"#{index + 1}"
        try:
            specs.append((msgspec.convert(raw_rule, RuleSpec), name))
        except msgspec.ValidationError as error:
            problems.append(f"{name}: rule {label}: {error}")
    return specs, problems


def build_pack(files: dict[str, bytes], path: str = "<memory>") -> RulePack:
    """Validate and compile a pack from file contents (name -> bytes); raises PackError."""
    problems: list[str] = []
    specs: list[tuple[RuleSpec, str]] = []
    for name in sorted(files):
        found, errors = _parse(name, files[name])
        specs.extend(found)
        problems.extend(errors)
    first_seen: dict[str, str] = {}
    for spec, name in specs:
        if spec.id in first_seen:
            problems.append(f"{name}: rule {spec.id}: duplicate id (also in {first_seen[spec.id]})")
        else:
            first_seen[spec.id] = name
    compiled: list[Rule] = []
    for spec, name in specs:
        rule, errors = _compile_rule(spec, name)
        problems.extend(errors)
        if rule is not None:
            compiled.append(rule)
    if not specs and not problems:
        problems.append(f"{path}: the pack has no rules")
    if problems:
        raise PackError(problems)
    rules = tuple(compiled)
    pack = RulePack(
        path=path,
        files=tuple(sorted(files)),
        sha=pack_sha(files),
        rules=rules,
        sets=_pattern_sets(rules),
        absence_rules=tuple(r for r, rule in enumerate(rules) if rule.spec.fires == "no_match"),
        exact_in_sets=frozenset(
            (r, p)
            for r, rule in enumerate(rules)
            for p, pattern in enumerate(rule.spec.patterns)
            if set_form(as_compiled(pattern, rule.spec.scope)) == as_compiled(pattern, rule.spec.scope)
        ),
    )
    failures = check_examples(pack)
    if failures:
        raise PackError(failures)
    return pack


def check_examples(pack: RulePack) -> list[str]:
    """Run every rule's must_match / must_not_match through the real engine."""
    problems: list[str] = []
    for rule in pack.rules:
        where = f"{rule.file}: rule {rule.id}"
        for text in rule.spec.examples.must_match:
            if rule.id not in {hit.id for hit in evaluate(pack, text).rules}:
                problems.append(f"{where}: must_match example does not match: {text!r}")
        for text in rule.spec.examples.must_not_match:
            if rule.id in {hit.id for hit in evaluate(pack, text).rules}:
                problems.append(f"{where}: must_not_match example matches: {text!r}")
    return problems


def load_pack(path: str | Path) -> RulePack:
    """Read, validate and compile the pack at `path` (file or directory); raises PackError."""
    root = Path(path)
    return build_pack(_read(root), str(root))
