"""The shape of a rule file (YAML), as strict msgspec Structs: unknown keys are errors.

A pack is one or more files, each `{description?, rules: [rule, …]}`. Field meanings are
documented in docs/l1.md; the comments here say only what the loader enforces.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from service.results import RuleFlag

Scope = Literal["normalised", "original"]


class Context(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Words (RE2 patterns, same scope as the rule) looked for near a candidate match."""

    words: list[str]
    within: int = 80  # characters from the match, in the text the rule reads
    # Which side of the match is searched: both, only before it, or only after it.
    direction: Literal["around", "before", "after"] = "around"


class Examples(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The rule's own table test; the loader runs it and refuses a pack that fails it."""

    must_match: list[str]
    must_not_match: list[str]


class RuleSpec(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    id: str
    description: str
    level: Literal["yellow", "red"]
    flag: RuleFlag = "none"
    languages: list[str]
    patterns: list[str]
    validator: str | None = None  # a key of service.l1.validators.VALIDATORS
    context: Context | None = None  # one of these words must be near the match
    unless: Context | None = None  # none of these words may be near the match
    # "normalised" (default): patterns see the matching form (see normalise.py).
    # "original": patterns see the text as sent, for what normalising erases
    # (invisible characters, mixed scripts, capitals).
    scope: Scope = "normalised"
    # "match" (default): the rule fires on a match of its patterns. "no_match": it fires when
    # none of its patterns matches anywhere in the text (the policy's "green needs positive
    # evidence": a ticket with none of the evidence is not green); its hit has an empty span.
    fires: Literal["match", "no_match"] = "match"
    examples: Examples


class PackFile(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    rules: list[dict[str, object]]  # converted one by one, so an error can name its rule
    description: str = ""
