"""The audit report's per-criterion agreement: a table and a PNG beside the Markdown."""

from __future__ import annotations

import sys

from service.audit.calibration import CriterionAgreement, GatingState
from service.audit.plots import criterion_agreement_png
from service.audit.report import AuditReport, FalseGreenEstimate, write_report

CRITERIA = {
    "no_commitment": CriterionAgreement(n=40, agree=38, human_failed=10, judge_failed=12),
    "no_third_party_data": CriterionAgreement(n=30, agree=21, human_failed=8, judge_failed=3),
    "not_applicable": CriterionAgreement(n=0, agree=0, human_failed=0, judge_failed=0),
}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _report() -> AuditReport:
    return AuditReport(
        run_at="2026-12-01T00:00:00+00:00",
        finished_at=1_795_000_000.0,
        judge_model="judge.gguf",
        judge_model_sha256="a" * 64,
        rubric_sha256="b" * 64,
        method="logits",
        gating=GatingState(gating=True, stale=False, kappa=0.8, kappa_min=0.6, reasons=[]),
        population={"green": 10},
        sampled={"green": 2},
        false_green=FalseGreenEstimate(
            greens_judged=2,
            false_greens=0,
            rate=0.0,
            low=0.0,
            high=0.66,
            window_greens=10,
            window_total=10,
            share_of_all=0.0,
            share_low=0.0,
            share_high=0.66,
        ),
        unacceptable=[],
        queued=[],
        indicative=[],
        unjudged={},
        operator_cases_added=[],
        tickets=[],
        elapsed_s=1.0,
    )


def test_the_png_is_drawn_for_the_criteria_that_applied(tmp_path):
    path = criterion_agreement_png(CRITERIA, tmp_path / "c.png")
    assert path.read_bytes()[:8] == PNG_MAGIC and path.stat().st_size > 5000


def test_the_report_has_the_table_and_the_picture_beside_it(tmp_path):
    _, md = write_report(_report(), tmp_path, criteria=CRITERIA)
    text = md.read_text()
    assert "| no_third_party_data | 30 | 21 (70.0%) | 8 | 3 |" in text
    png = md.with_name(md.stem + "-criteria.png")
    assert f"![agreement per criterion]({png.name})" in text
    assert png.read_bytes()[:8] == PNG_MAGIC


def test_without_matplotlib_the_report_says_so(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    _, md = write_report(_report(), tmp_path, criteria=CRITERIA)
    assert "matplotlib (the `offline` extra) is not installed" in md.read_text()
    assert not list(tmp_path.glob("*.png"))


def test_without_a_calibration_record_there_is_no_section(tmp_path):
    _, md = write_report(_report(), tmp_path)
    assert "per criterion" not in md.read_text()
