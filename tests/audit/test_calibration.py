"""Calibration against the bundled set with scripted judges; staleness and gating as a table."""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec
import pytest

from service.audit.calibration import (
    calibrate,
    gating_state,
    load_record,
    write_record,
)
from service.audit.cases import load_cases
from service.audit.judge import Judge
from service.audit.rubric import DEFAULT_RUBRIC_DIR, load_rubric

from .support import LookupBackend, yes_for


def _oracle(cases, rubric, wrong: set[str] = frozenset()) -> LookupBackend:
    """A backend that sees exactly the human's failed criteria, except on the `wrong` cases,
    where it sees none (so it misses the eliminatory failure or the two secondary ones)."""
    fails_if = {c.id: c.fails_if for c in rubric.criteria}
    table = {case.body: yes_for([] if case.id in wrong else case.human_failed, fails_if) for case in cases}
    return LookupBackend(table)


def test_perfect_judge_kappa_one_and_gating_on() -> None:
    rubric, cases = load_rubric(), load_cases()
    record, results = calibrate(Judge(_oracle(cases, rubric), rubric), cases, now=0.0)
    assert record.n == len(cases)
    assert record.kappa == pytest.approx(1.0)
    assert record.disagreements == []
    assert record.criteria["green_needs_person"].agree == record.criteria["green_needs_person"].n
    assert record.green_kappa == pytest.approx(1.0)
    # "Every green is unacceptable" on the bundled set: greens 12 acceptable / 21 not, others
    # 12 / 3. observed 33/48, expected (24*15 + 24*33)/48^2 = 0.5, kappa 0.375.
    assert record.baseline_kappa == pytest.approx(0.375)
    state = gating_state(
        record, judge_model_sha256="a" * 64, rubric_sha256=rubric.sha256, method="logits", kappa_min=0.6
    )
    assert state.gating and not state.stale and state.reasons == []


def test_disagreements_listed_with_the_criteria_the_judge_failed() -> None:
    rubric, cases = load_rubric(), load_cases()
    unacceptable = [c.id for c in cases if c.human_verdict == "unacceptable"]
    wrong = set(unacceptable[:12])  # the judge misses half the unacceptable cases
    record, _ = calibrate(Judge(_oracle(cases, rubric, wrong), rubric), cases)
    assert {d.case_id for d in record.disagreements} == wrong
    assert all(d.judge_failed == [] and d.human_failed for d in record.disagreements)
    # 48 cases: human 24/24, judge 36 acceptable / 12 unacceptable, 36 agreements.
    assert record.observed == pytest.approx(36 / 48)
    assert record.expected == pytest.approx((24 * 36 + 24 * 12) / 48**2)
    assert record.kappa == pytest.approx(0.5)
    assert record.confusion["unacceptable"]["acceptable"] == 12
    assert record.per_class["unacceptable"].recall == pytest.approx(0.5)
    state = gating_state(
        record, judge_model_sha256="a" * 64, rubric_sha256=rubric.sha256, method="logits", kappa_min=0.6
    )
    assert not state.gating and not state.stale
    assert state.reasons == ["kappa 0.500 < kappa_min 0.60"]


def _record(tmp_path: Path, kappa_wrong: int = 0):
    rubric, cases = load_rubric(), load_cases()
    wrong = {c.id for c in cases if c.human_verdict == "unacceptable"}
    wrong = set(sorted(wrong)[:kappa_wrong])
    record, _ = calibrate(Judge(_oracle(cases, rubric, wrong), rubric), cases)
    path = tmp_path / "calibration.json"
    write_record(record, path)
    return load_record(path), rubric


def test_record_round_trips_and_names_model_rubric_date(tmp_path: Path) -> None:
    record, rubric = _record(tmp_path)
    assert record.judge_model_sha256 == "a" * 64
    assert record.rubric_sha256 == rubric.sha256
    assert record.date.endswith("+00:00")
    assert len(record.cases) == record.n
    assert all(set(c.p_fail) for c in record.cases)
    assert load_record(tmp_path / "missing.json") is None


def test_stale_when_rubric_changes(tmp_path: Path) -> None:
    record, _ = _record(tmp_path)
    folder = tmp_path / "judge"
    shutil.copytree(DEFAULT_RUBRIC_DIR, folder)
    (folder / "context.md").write_text((folder / "context.md").read_text() + "\nBe strict.\n")
    edited = load_rubric(folder)
    state = gating_state(
        record, judge_model_sha256="a" * 64, rubric_sha256=edited.sha256, method="logits", kappa_min=0.6
    )
    assert state.stale and not state.gating
    assert any("rubric changed" in reason for reason in state.reasons)


def test_stale_when_judge_model_or_method_changes(tmp_path: Path) -> None:
    record, rubric = _record(tmp_path)
    other_model = gating_state(
        record, judge_model_sha256="b" * 64, rubric_sha256=rubric.sha256, method="logits", kappa_min=0.6
    )
    assert other_model.stale and not other_model.gating
    assert "judge model changed" in other_model.reasons[0]
    other_method = gating_state(
        record, judge_model_sha256="a" * 64, rubric_sha256=rubric.sha256, method="generated", kappa_min=0.6
    )
    assert other_method.stale and not other_method.gating


@pytest.mark.parametrize(("misses", "gating"), [(0, True), (6, True), (9, False), (12, False)])
def test_gating_only_at_or_above_kappa_min(tmp_path: Path, misses: int, gating: bool) -> None:
    # misses=6: kappa 0.75; 9: kappa 0.625 -> off at kappa_min 0.7 (and 0.5 for 12).
    record, rubric = _record(tmp_path, misses)
    state = gating_state(
        record, judge_model_sha256="a" * 64, rubric_sha256=rubric.sha256, method="logits", kappa_min=0.7
    )
    assert state.gating is gating
    assert (record.kappa >= 0.7) is gating


def test_gating_off_below_0_6_and_without_calibration(tmp_path: Path) -> None:
    record, rubric = _record(tmp_path, 13)  # kappa (35/48 - 0.5) / 0.5 = 0.458
    assert record.kappa < 0.6
    assert not gating_state(
        record, judge_model_sha256="a" * 64, rubric_sha256=rubric.sha256, method="logits", kappa_min=0.6
    ).gating
    never = gating_state(None, judge_model_sha256="a" * 64, rubric_sha256=rubric.sha256, method="logits", kappa_min=0.6)
    assert never.stale and not never.gating and "never calibrated" in never.reasons[0]


def test_a_judge_no_better_than_the_level_alone_does_not_gate(tmp_path: Path) -> None:
    record, rubric = _record(tmp_path)
    assert record.kappa == pytest.approx(1.0)
    for baseline, gating in ((0.7, True), (1.0, False)):
        state = gating_state(
            msgspec.structs.replace(record, baseline_kappa=baseline),
            judge_model_sha256="a" * 64,
            rubric_sha256=rubric.sha256,
            method="logits",
            kappa_min=0.6,
        )
        assert state.gating is gating
    assert "level-only baseline 1.000" in state.reasons[0]


def test_too_few_cases_do_not_earn_gating(tmp_path: Path) -> None:
    rubric, cases = load_rubric(), load_cases()[::2][:20]  # both verdicts present
    record, _ = calibrate(Judge(_oracle(cases, rubric), rubric), cases)
    assert record.kappa == pytest.approx(1.0)
    state = gating_state(
        record, judge_model_sha256="a" * 64, rubric_sha256=rubric.sha256, method="logits", kappa_min=0.6
    )
    assert not state.gating and "only 20 calibration cases" in state.reasons[0]


class _FailsOn(LookupBackend):
    """A backend whose model times out on one ticket."""

    def __init__(self, table, needle: str) -> None:
        super().__init__(table)
        self.needle = needle

    def yes_probabilities(self, context, state, questions):
        from service.errors import JudgeUnavailable

        if self.needle in state:
            raise JudgeUnavailable("timeout: deadline passed")
        return super().yes_probabilities(context, state, questions)


def test_a_model_failure_skips_the_case_and_names_it() -> None:
    rubric, cases = load_rubric(), load_cases()
    oracle = _oracle(cases, rubric)
    record, results = calibrate(Judge(_FailsOn(oracle.table, cases[5].body), rubric), cases)
    assert record.unjudged == {cases[5].id: "timeout: deadline passed"}
    assert record.n == len(cases) - 1 == len(results)
    assert record.kappa == pytest.approx(1.0)
