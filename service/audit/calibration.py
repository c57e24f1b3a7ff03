"""Calibrating the judge against people, and the gating rule that follows from it.

`calibrate` judges every case of the calibration set, measures agreement with the human verdicts
(Cohen's kappa, confusion, per-class precision and recall, per-criterion agreement) and returns a
record naming the judge model and rubric it was measured with. `gating_state` decides, from that
record and the judge in use now, whether the audit may act on its own authority: only while the
calibration is fresh (same judge model, rubric and method) and kappa >= kappa_min.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from ..errors import JudgeUnavailable
from .cases import CalibrationCase
from .judge import AuditedDecision, Judge, JudgeVerdict
from .stats import ClassScores, cohen_kappa

# Below this many cases kappa's standard error is too wide to earn gating (about +-0.15 at 40).
MIN_CASES = 40


class CaseResult(msgspec.Struct, frozen=True):
    case_id: str
    source: str
    kind: str
    level_given: str
    human_verdict: str
    judge_verdict: str
    human_failed: list[str]
    judge_failed: list[str]
    p_fail: dict[str, float | None]  # per applicable criterion (logits); None when generated
    model_verdict: str | None = None


class CriterionAgreement(msgspec.Struct, frozen=True):
    n: int  # cases where the criterion applied
    agree: int
    human_failed: int
    judge_failed: int


class CalibrationRecord(msgspec.Struct, frozen=True, kw_only=True):
    """calibration.json: what was measured, with which judge and rubric, and when."""

    judge_model_sha256: str
    judge_model: str
    rubric_sha256: str
    method: str
    kappa: float | None
    kappa_se: float | None
    observed: float
    expected: float
    n: int
    confusion: dict[str, dict[str, int]]
    per_class: dict[str, ClassScores]
    criteria: dict[str, CriterionAgreement]
    cases_sha256: str
    cases_path: str
    date: str  # ISO 8601, UTC
    created_at: float  # unix time
    elapsed_s: float
    disagreements: list[CaseResult]
    unjudged: dict[str, str] = {}  # case id -> why the model gave no answer (not in n)
    # Diagnostics, not gating: kappa on green decisions only (what the audit mostly judges), and
    # the kappa of a judge that reads nothing but the level ("every green is unacceptable"). A
    # judge that does not beat that baseline has learnt the set's composition, not the tickets.
    green_kappa: float | None = None
    baseline_kappa: float | None = None
    cases: list[CaseResult] = []  # every judged case with its probabilities (threshold studies)


class GatingState(msgspec.Struct, frozen=True):
    gating: bool  # the audit may queue tickets and raise alerts on its own authority
    stale: bool  # no calibration, or measured with another judge model / rubric / method
    kappa: float | None
    kappa_min: float
    reasons: list[str]  # why gating is off (empty when on)
    calibrated_at: str | None = None


def cases_sha256(cases: Sequence[CalibrationCase]) -> str:
    digest = hashlib.sha256()
    for case in cases:
        digest.update(msgspec.json.encode(case) + b"\n")
    return digest.hexdigest()


def _decision(case: CalibrationCase) -> AuditedDecision:
    return AuditedDecision(
        text=case.text, level=case.level_given, category=case.category_given, urgency=case.urgency_given
    )


def case_result(case: CalibrationCase, verdict: JudgeVerdict) -> CaseResult:
    return CaseResult(
        case_id=case.id,
        source=case.source,
        kind=case.kind,
        level_given=case.level_given,
        human_verdict=case.human_verdict,
        judge_verdict=verdict.verdict,
        human_failed=list(case.human_failed),
        judge_failed=list(verdict.failed),
        p_fail={c.id: c.p_fail for c in verdict.criteria if c.applicable},
        model_verdict=verdict.model_verdict,
    )


def criterion_agreement(results: Sequence[CaseResult], criteria: Sequence[str]) -> dict[str, CriterionAgreement]:
    """Per criterion, over the cases where it applied: how often judge and human agree."""
    table = {}
    for criterion in criteria:
        rows = [r for r in results if criterion in r.p_fail]
        human = [criterion in r.human_failed for r in rows]
        judge = [criterion in r.judge_failed for r in rows]
        table[criterion] = CriterionAgreement(
            n=len(rows),
            agree=sum(h == j for h, j in zip(human, judge, strict=True)),
            human_failed=sum(human),
            judge_failed=sum(judge),
        )
    return table


def calibrate(
    judge: Judge,
    cases: Sequence[CalibrationCase],
    *,
    judge_model: str = "",
    cases_path: str = "",
    on_case: Callable[[int, CaseResult], None] | None = None,
    now: float | None = None,
) -> tuple[CalibrationRecord, list[CaseResult]]:
    """Judge every case and measure agreement with the human verdicts."""
    if not cases:
        raise ValueError("the calibration set is empty")
    started = time.perf_counter()
    results = []
    unjudged: dict[str, str] = {}
    for index, case in enumerate(cases):
        try:
            verdict = judge.judge(_decision(case))
        except JudgeUnavailable as exc:
            # A timeout on one case must not cost the whole run; the case is named, not guessed.
            unjudged[case.id] = str(exc)
            continue
        result = case_result(case, verdict)
        results.append(result)
        if on_case is not None:
            on_case(index, result)
    if not results:
        raise JudgeUnavailable(f"the judge answered no case: {unjudged}")
    agreement = cohen_kappa([r.human_verdict for r in results], [r.judge_verdict for r in results])
    greens = [r for r in results if r.level_given == "green"]
    green_kappa = (
        cohen_kappa([r.human_verdict for r in greens], [r.judge_verdict for r in greens]).kappa if greens else None
    )
    baseline_kappa = cohen_kappa(
        [r.human_verdict for r in results],
        ["unacceptable" if r.level_given == "green" else "acceptable" for r in results],
    ).kappa
    created = time.time() if now is None else now
    record = CalibrationRecord(
        judge_model_sha256=judge.model_sha256,
        judge_model=judge_model or judge.backend.model_name,
        rubric_sha256=judge.rubric.sha256,
        method=judge.method,
        kappa=agreement.kappa,
        kappa_se=agreement.kappa_se,
        observed=agreement.observed,
        expected=agreement.expected,
        n=agreement.n,
        confusion=agreement.confusion,
        per_class=agreement.per_class,
        criteria=criterion_agreement(results, [c.id for c in judge.rubric.criteria]),
        cases_sha256=cases_sha256(cases),
        cases_path=cases_path,
        date=dt.datetime.fromtimestamp(created, dt.UTC).isoformat(timespec="seconds"),
        created_at=created,
        elapsed_s=round(time.perf_counter() - started, 2),
        disagreements=[r for r in results if r.human_verdict != r.judge_verdict],
        unjudged=unjudged,
        green_kappa=green_kappa,
        baseline_kappa=baseline_kappa,
        cases=results,
    )
    return record, results


def gating_state(
    record: CalibrationRecord | None,
    *,
    judge_model_sha256: str,
    rubric_sha256: str,
    method: str,
    kappa_min: float,
    min_cases: int = MIN_CASES,
) -> GatingState:
    """May the audit act on its own authority? Pure: the record and the judge in use now."""
    if record is None:
        return GatingState(
            gating=False,
            stale=True,
            kappa=None,
            kappa_min=kappa_min,
            reasons=["never calibrated: run `triage audit calibrate`"],
        )
    reasons = []
    if record.judge_model_sha256 != judge_model_sha256:
        reasons.append(
            f"judge model changed (calibrated {record.judge_model_sha256[:12]}, now {judge_model_sha256[:12]})"
        )
    if record.rubric_sha256 != rubric_sha256:
        reasons.append(f"rubric changed (calibrated {record.rubric_sha256[:12]}, now {rubric_sha256[:12]})")
    if record.method != method:
        reasons.append(f"judge method changed (calibrated {record.method}, now {method})")
    stale = bool(reasons)
    if stale:
        reasons.append("indicative only until `triage audit calibrate` runs again")
    if record.kappa is None:
        reasons.append("kappa undefined (judge and humans each gave a single verdict)")
    elif record.kappa < kappa_min:
        reasons.append(f"kappa {record.kappa:.3f} < kappa_min {kappa_min:.2f}")
    elif record.baseline_kappa is not None and record.kappa <= record.baseline_kappa:
        # A judge no better than "every green is unacceptable" has learnt the set's
        # composition, not the tickets: it must not act on its own authority.
        reasons.append(f"kappa {record.kappa:.3f} does not beat the level-only baseline {record.baseline_kappa:.3f}")
    if record.n < min_cases:
        reasons.append(f"only {record.n} calibration cases (< {min_cases})")
    return GatingState(
        gating=not reasons,
        stale=stale,
        kappa=record.kappa,
        kappa_min=kappa_min,
        reasons=reasons,
        calibrated_at=record.date,
    )


_record_decoder = msgspec.json.Decoder(CalibrationRecord)


def load_record(path: str | Path) -> CalibrationRecord | None:
    """The calibration record at `path`, or None when there is none yet."""
    path = Path(path)
    if not path.exists():
        return None
    return _record_decoder.decode(path.read_bytes())


def write_record(record: CalibrationRecord, path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(msgspec.json.format(msgspec.json.encode(record), indent=2) + b"\n")
    tmp.replace(path)  # readers never see half a record
