"""scripts/rules_on_served.py: served grades re-read with rules added since, on the real dev set
and corpus, with a two-file pack built here (one rule served with, one absence rule added)."""

from __future__ import annotations

import json
import re

import pytest

from service.l1.normalise import normalise
from service.results import ticket_text
from tests.support import CORPUS, DEV_SET, load_script

on_served = load_script("rules_on_served")

SERVED_RULE = """description: served with
rules:
  - id: demo.refund
    description: asks for a refund
    level: red
    flag: commitment
    languages: [en]
    patterns: ['\\brefund (?:me|my|the|our)\\b']
    examples:
      must_match: ["Please refund my order"]
      must_not_match: ["How do refunds work?"]
"""
ADDED_RULE = """description: added since
rules:
  - id: demo.no_question
    description: no question mark
    level: yellow
    fires: no_match
    languages: [en]
    patterns: ['\\?']
    examples:
      must_match: ["The export is broken."]
      must_not_match: ["Is the export broken?"]
"""


def _rows(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _matching(row) -> str:
    return normalise(ticket_text(row.get("subject"), row["body"])).text  # fullwidth ？ is ? here


def _asks(row) -> bool:
    return "?" in _matching(row)


def _refund(row) -> bool:
    return re.search(r"\brefund (?:me|my|the|our)\b", _matching(row)) is not None


@pytest.fixture
def served(tmp_path):
    """A pack dir, and a served file claiming two dev false greens (one asks, one does not)."""
    from service.l1.pack import load_pack

    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "served.yaml").write_text(SERVED_RULE, encoding="utf-8")
    sha = load_pack(rules).sha
    (rules / "added.yaml").write_text(ADDED_RULE, encoding="utf-8")
    dev = [r for r in _rows(DEV_SET) if r["risk"] != "green"]
    asking, silent = next(r for r in dev if _asks(r)), next(r for r in dev if not _asks(r))
    corpus = _rows(CORPUS)
    report = {
        "false_greens": 2,
        "false_green_ids": [asking["id"], silent["id"]],
        "greens_cleared": 0.5,
        "rules_sha": sha,
    }
    run = {"graded": "dev", "fitted_on": "x", "green_after_l1": False, "artifact": "a", "report": report}
    unlabelled = {"artifact": "a", "n": len(corpus), "green_ids": [r["id"] for r in corpus[:5]]}
    path = tmp_path / "served.json"
    path.write_text(json.dumps({"runs": [run], "unlabelled": unlabelled}), encoding="utf-8")
    return rules, path, silent["id"], corpus[:5]


def _run(rules, served, added, out) -> int:
    return on_served.main(["--rules", str(rules), "--served", str(served), "--added", str(added), "--json", str(out)])


def test_false_greens_exactly_and_greens_cleared_as_a_bound(served, tmp_path):
    rules, path, silent_id, corpus = served
    out = tmp_path / "now.json"
    assert _run(rules, path, rules / "added.yaml", out) == 0
    result = json.loads(out.read_text())
    (run,) = result["runs"]
    assert run["kept_from_green_now"] == [silent_id] and run["false_greens_now"] == 1
    greens = [r for r in _rows(DEV_SET) if r["risk"] == "green"]
    silent_greens = sorted(r["id"] for r in greens if not _asks(r) and not _refund(r))
    assert run["greens_newly_fired"] == silent_greens and run["n_green"] == len(greens)
    cleared = round(0.5 * len(greens))
    assert run["greens_cleared_now_at_least"] == max(0, cleared - len(silent_greens)) / len(greens)
    assert result["unlabelled"]["held_back_now"] == sorted(r["id"] for r in corpus if not _asks(r))


def test_refuses_a_pack_that_is_not_the_served_one_plus_the_added_files(served, tmp_path):
    rules, path, _, _ = served
    out = tmp_path / "now.json"
    assert _run(rules, path, rules / "served.yaml", out) == 1
    assert not out.exists()
