"""Docs that cannot drift: every generated block matches the result file it is made from."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def gen_docs():
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_blocks_match_the_result_files(gen_docs):
    assert gen_docs.stale() == [], "run `make docs` after re-measuring"


def test_every_renderer_fills_a_block(gen_docs):
    used = {m.group("name") for doc in gen_docs.DOCS for m in gen_docs.BLOCK.finditer(doc.read_text(encoding="utf-8"))}
    assert set(gen_docs.RENDERERS) <= used


def test_a_hand_edited_figure_is_stale(gen_docs, tmp_path):
    doc = tmp_path / "README.md"
    fresh = f"x\n<!-- generated:models -->\n{gen_docs.models()}<!-- /generated -->\n"
    doc.write_text(fresh, encoding="utf-8")
    assert gen_docs.stale([doc]) == []
    doc.write_text(fresh.replace("65.0 %", "75.0 %", 1), encoding="utf-8")
    assert gen_docs.stale([doc]) == ["README.md"]
