"""The judge on the real GGUF (through service.l2's decide) and `audit run` on real Redis + model.

Small on purpose (2 cores): three calibration cases and a three-ticket audit, one loaded model.
"""

from __future__ import annotations

import random
from pathlib import Path

import msgspec
import pytest

from service.audit.backend import L2Backend, resolve_judge_model
from service.audit.calibration import calibrate, gating_state
from service.audit.cases import load_cases
from service.audit.job import run_audit
from service.audit.judge import AuditedDecision, Judge
from service.audit.rubric import apply_verdict_rule, load_rubric
from service.results import L1Result, L2Result, ModelInfo, TicketIn, TriageResult
from service.store import AuditStore, Keys, RedisVerdictCache
from tests.support import make_settings

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def backend():
    settings = make_settings("unused")
    rubric = load_rubric()
    path, sha = resolve_judge_model(settings)
    return L2Backend.load(
        path,
        sha,
        rubric.framing,
        n_threads=settings.n_threads,
        n_ctx=settings.n_ctx,
        answer_orders=rubric.answer_orders,
        timeout_s=300,
    )


def test_judge_on_calibration_cases(backend) -> None:
    rubric = load_rubric()
    cases = {c.kind: c for c in load_cases()}
    chosen = [cases["correct_green"], cases["false_green_red"], cases["two_secondary"]]
    record, results = calibrate(Judge(backend, rubric), chosen)
    assert record.n == 3
    assert record.judge_model_sha256 == backend.model_sha256 and len(backend.model_sha256) == 64
    for case, result in zip(chosen, results, strict=True):
        applicable = {c.id for c in rubric.applicable(case.level_given)}
        assert set(result.p_fail) == applicable  # every applicable criterion was read
        assert all(0.0 <= p <= 1.0 for p in result.p_fail.values())
        # The verdict is the rubric's rule applied to the criteria the model failed.
        assert result.judge_verdict == apply_verdict_rule(rubric, result.judge_failed)
        assert result.judge_failed == [c for c, p in result.p_fail.items() if p >= 0.5]
    # The record counts what happened, whatever the model said.
    assert sum(sum(row.values()) for row in record.confusion.values()) == 3
    assert (
        gating_state(
            record, judge_model_sha256=backend.model_sha256, rubric_sha256=rubric.sha256, method="logits", kappa_min=0.6
        ).gating
        is False
    )  # 3 cases never earn gating


def test_generated_method_answers_every_criterion(backend) -> None:
    case = next(c for c in load_cases() if c.kind == "false_green_instruction")
    verdict = Judge(backend, load_rubric(), method="generated").judge(
        AuditedDecision(
            text=case.text, level=case.level_given, category=case.category_given, urgency=case.urgency_given
        )
    )
    answers = {c.id: c.answer for c in verdict.criteria if c.applicable}
    assert set(answers) == {"green_needs_person", "green_on_instruction", "category_right", "urgency_plausible"}
    assert all(answer in ("yes", "no") for answer in answers.values()), answers
    assert verdict.model_verdict in ("acceptable", "unacceptable")


def test_audit_run_on_real_redis_and_model(backend, redis_client, prefix, tmp_path: Path) -> None:
    keys = Keys(prefix)
    tickets = [
        ("A1", "Please refund my last invoice in full and cancel the contract today.", "green", "billing", 2),
        ("A2", "How do I change the language of the interface to French?", "green", "technical", 0),
        ("A3", "The mobile app crashes when I open the calendar.", "yellow", "technical", 3),
    ]
    for ticket_id, body, level, category, urgency in tickets:
        result = TriageResult(
            id=ticket_id,
            status="done",
            final_level=level,
            l1=L1Result(level="none", rules=[]),
            l2=L2Result(level=level, method="logits"),
            category=category,
            urgency=urgency,
            model=ModelInfo(name="m", sha256="0" * 64),
            prompt_sha="p",
            rules_sha="r",
            timings_ms={},
        )
        redis_client.hset(
            keys.ticket(ticket_id),
            mapping={
                "status": "done",
                "final_level": level,
                "request": msgspec.json.encode(TicketIn(body=body)),
                "result": msgspec.json.encode(result),
            },
        )
        redis_client.xadd(keys.results, {"id": ticket_id})
    rubric = load_rubric()
    judge = Judge(backend, rubric, cache=RedisVerdictCache(redis_client, keys))
    gating = gating_state(
        None, judge_model_sha256=backend.model_sha256, rubric_sha256=rubric.sha256, method="logits", kappa_min=0.6
    )
    report = run_audit(
        AuditStore(redis_client, keys),
        judge,
        gating,
        cases_path=tmp_path / "c.jsonl",
        sample_size=3,
        rng=random.Random(0),
    )
    assert {t.ticket_id for t in report.tickets} == {"A1", "A2", "A3"}
    assert report.unjudged == {}
    assert report.queued == []  # never calibrated: indicative only
    assert redis_client.zcard(keys.queue("audit")) == 0
    assert set(report.indicative) == {t.ticket_id for t in report.tickets if t.verdict == "unacceptable"}
    assert redis_client.hget(keys.audit_state, "gating") == b"0.0"
    assert len(list(redis_client.scan_iter(f"{prefix}:audit:verdicts:*"))) == 3
    again = run_audit(
        AuditStore(redis_client, keys),
        judge,
        gating,
        cases_path=tmp_path / "c.jsonl",
        sample_size=3,
        rng=random.Random(0),
    )
    assert all(t.cached for t in again.tickets)
    assert [t.verdict for t in sorted(again.tickets, key=lambda t: t.ticket_id)] == [
        t.verdict for t in sorted(report.tickets, key=lambda t: t.ticket_id)
    ]
