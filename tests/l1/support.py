"""Helpers for L1 tests: the shipped pack's location and small in-memory packs."""

from __future__ import annotations

import textwrap
from pathlib import Path

from service.l1.pack import RulePack, build_pack

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "rules"

GOOD_RULE = """
  - id: demo.delete
    description: Asks us to delete an account.
    level: red
    flag: destructive_or_access
    languages: [en]
    patterns: ['\\bplease delete (?:my|our) account\\b']
    examples:
      must_match: ["Please delete my account."]
      must_not_match: ["How do I delete my account?"]
"""


def pack_text(rules: str, description: str = "test pack") -> bytes:
    return f"description: {description}\nrules:\n{textwrap.dedent(rules)}".encode()


def build(rules: str, name: str = "demo.yaml") -> RulePack:
    """A pack from one YAML rules list (indented or not)."""
    return build_pack({name: pack_text(textwrap.indent(textwrap.dedent(rules), "  "))})
