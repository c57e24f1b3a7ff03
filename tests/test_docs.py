"""Docs that cannot drift: every generated block matches the result file it is made from."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support import load_script

ROOT = Path(__file__).resolve().parent.parent


gen_docs = load_script("gen_docs")


def test_generated_blocks_match_the_result_files():
    assert gen_docs.stale() == [], "run `make docs` after re-measuring"


def test_every_generated_marker_has_a_renderer():
    """A block nothing renders is a hand-copied figure in disguise: nothing would notice it drift."""
    known = {*gen_docs.RENDERERS, *gen_docs.COMMAND_BLOCKS}
    assert [(doc, name) for doc, name in gen_docs.markers() if name not in known] == []


def test_every_renderer_fills_a_block():
    used = {name for _, name in gen_docs.markers()}
    assert {*gen_docs.RENDERERS, *gen_docs.COMMAND_BLOCKS} <= used


@pytest.mark.parametrize(
    "marker",
    [
        "<!-- generated:hand-typed -->\n| 97.5 % |\n<!-- /generated -->\n",
        "<!-- BEGIN GENERATED: triage hand typed -->\n| 97.5 % |\n<!-- END GENERATED: triage hand typed -->\n",
    ],
)
def test_a_marker_without_a_renderer_is_refused(tmp_path, marker):
    doc = tmp_path / "README.md"
    doc.write_text(f"x\n{marker}", encoding="utf-8")
    assert len(gen_docs.markers([doc])) == 1
    with pytest.raises(gen_docs.UnknownBlock, match="hand"):
        gen_docs.stale([doc])


def test_the_rule_report_is_refused_in_the_prose_docs(tmp_path):
    """`triage rules report --out docs/l1.md` would append its long tables there: it has its own file."""
    doc = tmp_path / "l1.md"
    report = (ROOT / "docs" / "results" / "l1-rules-report.md").read_text(encoding="utf-8")
    doc.write_text("# L1\n" + report[report.index("<!-- BEGIN GENERATED") :], encoding="utf-8")
    with pytest.raises(gen_docs.UnknownBlock, match="l1-rules-report.md"):
        gen_docs.stale([doc])


def _edit_a_figure(body: str) -> str:
    """The block with its first percentage or decimal figure changed by one in the last digit."""
    match = re.search(r"\d+\.\d+(?= ?[%×]| ms)|\d+\.\d+", body)
    assert match, "a block without a figure"
    figure = match.group(0)
    edited = figure[:-1] + str((int(figure[-1]) + 1) % 10)
    return body[: match.start()] + edited + body[match.end() :]


@pytest.mark.parametrize("name", sorted(gen_docs.RENDERERS))
def test_a_hand_edited_figure_is_stale(tmp_path, name):
    doc = tmp_path / "README.md"
    body = gen_docs.RENDERERS[name]()
    fresh = f"x\n<!-- generated:{name} -->\n{body}<!-- /generated -->\n"
    doc.write_text(fresh, encoding="utf-8")
    assert gen_docs.stale([doc]) == []
    doc.write_text(f"x\n<!-- generated:{name} -->\n{_edit_a_figure(body)}<!-- /generated -->\n", encoding="utf-8")
    assert gen_docs.stale([doc]) == ["README.md"]


def test_the_l1_latency_block_is_rendered_from_bench_results(tmp_path):
    doc = tmp_path / "l1.md"
    block = gen_docs.l1_latency()
    doc.write_text(f"# L1\n{block}after\n", encoding="utf-8")
    assert gen_docs.stale([doc]) == []
    doc.write_text(f"# L1\n{_edit_a_figure(block)}after\n", encoding="utf-8")
    assert gen_docs.stale([doc]) == ["l1.md"]
