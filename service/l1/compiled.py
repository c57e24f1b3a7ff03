"""The compiled rule pack: immutable data that pack.py builds and engine.py reads.

It sits below both so that neither imports the other's internals: pack.py (load, validate,
compile, run the examples) imports the engine, and the engine imports only these types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.l1.schema import RuleSpec, Scope
from service.l1.validators import Validator

# re2's compiled pattern type is private (re2._Regexp); this alias names it.
Regex = Any


@dataclass(frozen=True, slots=True)
class Window:
    """A compiled context (or unless) block: one alternation of its words and where to look."""

    words: Regex
    within: int
    direction: str  # "around", "before" or "after"


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule, compiled."""

    spec: RuleSpec
    file: str
    patterns: tuple[Regex, ...]
    validator: Validator | None
    context: Window | None  # one of these words must be near the match
    unless: Window | None  # none of these words may be near the match

    @property
    def id(self) -> str:
        return self.spec.id


@dataclass(frozen=True, slots=True)
class PatternSet:
    """Patterns scanned together in one pass over a ticket (one re2.Set)."""

    scope: Scope
    name: str  # "<scope>:<file or han>#<n>", for diagnostics
    matcher: Any  # re2.Set
    owners: tuple[tuple[int, int], ...]  # set index -> (rule index, pattern index)
    script: str | None = None  # every pattern needs a character of this script (scripts.py)


@dataclass(frozen=True, slots=True)
class RulePack:
    path: str
    files: tuple[str, ...]
    sha: str  # rules_sha: sha256 over the canonical bytes of the files (see pack.pack_sha)
    rules: tuple[Rule, ...]
    sets: tuple[PatternSet, ...]  # a ticket is scanned once per set: a small, fixed number
    absence_rules: tuple[int, ...] = ()  # indices of the rules that fire on no match
    # (rule, pattern) whose set reads it exactly as compiled (pack.set_form left it alone): a
    # set's report of it needs no confirming search
    exact_in_sets: frozenset[tuple[int, int]] = frozenset()

    def rule(self, rule_id: str) -> Rule:
        for rule in self.rules:
            if rule.id == rule_id:
                return rule
        raise KeyError(rule_id)
