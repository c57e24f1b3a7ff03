"""`audit run` against a real Redis (own key prefix, cleaned by the `prefix` fixture).

The judge here is a lookup table so that every assertion is exact; test_model.py runs the same
job with the real GGUF.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import msgspec
import pytest

from service import metrics
from service.audit.calibration import GatingState
from service.audit.cases import load_cases
from service.audit.job import run_audit
from service.audit.judge import Judge
from service.audit.report import render_markdown, write_report
from service.audit.rubric import load_rubric
from service.results import (
    Decision,
    L1Result,
    L2Result,
    ModelInfo,
    TicketIn,
    TriageResult,
)
from service.store import AuditStore, Keys, RedisVerdictCache

from .support import LookupBackend

TICKETS = [
    # id, subject, body, final level, category, urgency
    ("T-refund", "refund", "Please refund invoice 4471 in full, today.", "green", "billing", 2),
    ("T-howto", "export", "How do I export my own drafts as PDF?", "green", "technical", 1),
    ("T-hours", "hours", "What are your phone support hours on Saturday?", "green", "other", 0),
    ("T-bug", "crash", "The export crashes every time since the update.", "yellow", "technical", 3),
    ("T-delete", "delete", "Delete the account of my colleague Tom right now.", "red", "account", 3),
]

ON = GatingState(
    gating=True, stale=False, kappa=0.8, kappa_min=0.6, reasons=[], calibrated_at="2025-01-01T00:00:00+00:00"
)
OFF = GatingState(
    gating=False,
    stale=True,
    kappa=0.8,
    kappa_min=0.6,
    reasons=["rubric changed", "indicative only"],
    calibrated_at=None,
)


def _store(client, keys: Keys) -> None:
    for ticket_id, subject, body, level, category, urgency in TICKETS:
        request = TicketIn(body=body, subject=subject, language="en")
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
            completed_at=1.0,
        )
        client.hset(
            keys.ticket(ticket_id),
            mapping={
                "status": "done",
                "final_level": level,
                "request": msgspec.json.encode(request),
                "result": msgspec.json.encode(result),
            },
        )
        client.xadd(keys.results, {"id": ticket_id})
    # A result whose ticket hash has expired: sampled but reported as not judged.
    client.xadd(keys.results, {"id": "T-gone"})
    client.hset(keys.ticket("T-gone"), mapping={"status": "done", "final_level": "green"})


def _judge(client, keys: Keys) -> tuple[Judge, LookupBackend]:
    backend = LookupBackend(
        {
            "refund": {"green_needs_person": 0.95, "category_right": 0.9, "urgency_plausible": 0.9},
            "drafts": {"green_needs_person": 0.1, "category_right": 0.9, "urgency_plausible": 0.9},
            "phone support": {"green_needs_person": 0.2, "category_right": 0.9, "urgency_plausible": 0.9},
            "crashes": {"category_right": 0.9, "urgency_plausible": 0.8},
            # Two secondary criteria failed on a red: unacceptable, but not a false green.
            "colleague": {"category_right": 0.1, "urgency_plausible": 0.2},
        }
    )
    return Judge(backend, load_rubric(), cache=RedisVerdictCache(client, keys)), backend


def test_audit_run_gating_queues_reports_and_publishes_state(redis_client, prefix, tmp_path: Path) -> None:
    keys = Keys(prefix)
    _store(redis_client, keys)
    judge, backend = _judge(redis_client, keys)
    cases = tmp_path / "cases.jsonl"
    report = run_audit(
        AuditStore(redis_client, keys), judge, ON, cases_path=cases, sample_size=10, rng=random.Random(1), now=1000.0
    )

    assert report.population == {"green": 4, "yellow": 1, "red": 1}
    assert report.sampled == {"green": 4, "yellow": 1, "red": 1}
    assert report.unjudged == {"T-gone": "ticket expired or incomplete"}
    fg = report.false_green
    assert (fg.false_greens, fg.greens_judged) == (1, 3)
    assert fg.rate == pytest.approx(1 / 3)
    assert (round(fg.low, 4), round(fg.high, 4)) == (0.0615, 0.7923)  # Wilson 1/3
    assert sorted(report.queued) == ["T-delete", "T-refund"]
    assert report.indicative == []
    queue = {m.decode(): s for m, s in redis_client.zrange(keys.queue("audit"), 0, -1, withscores=True)}
    assert queue == {"T-delete": 1000.0, "T-refund": 1000.0}

    state = {k.decode(): v.decode() for k, v in redis_client.hgetall(keys.audit_state).items()}
    assert float(state["kappa"]) == 0.8 and state["gating"] == "1.0"
    assert float(state["false_green_rate"]) == pytest.approx(1 / 3)
    assert float(state["last_run"]) == 1000.0 and state["stale"] == "0"
    assert metrics.audit_gating._value.get() == 1.0
    assert metrics.audit_false_green_rate._value.get() == pytest.approx(1 / 3)

    json_path, md_path = write_report(report, tmp_path / "audit")
    assert json_path.name == "audit-19700101T001640Z.json"
    assert "Wilson 95 %" in md_path.read_text() and "T-refund" in render_markdown(report)
    assert "Indicative only" not in md_path.read_text()

    # Second run: every verdict comes from the Redis cache, the model is not asked again.
    calls = len(backend.calls)
    again = run_audit(
        AuditStore(redis_client, keys), judge, ON, cases_path=cases, sample_size=10, rng=random.Random(2), now=1001.0
    )
    assert len(backend.calls) == calls
    assert all(t.cached for t in again.tickets)


def test_audit_run_without_gating_only_lists_indicative(redis_client, prefix, tmp_path: Path) -> None:
    keys = Keys(prefix)
    _store(redis_client, keys)
    judge, _ = _judge(redis_client, keys)
    report = run_audit(
        AuditStore(redis_client, keys),
        judge,
        OFF,
        cases_path=tmp_path / "c.jsonl",
        sample_size=10,
        rng=random.Random(1),
        now=1000.0,
    )
    assert report.queued == []
    assert sorted(report.indicative) == ["T-delete", "T-refund"]
    assert redis_client.zcard(keys.queue("audit")) == 0
    assert redis_client.hget(keys.audit_state, "gating") == b"0.0"
    assert "indicative" in render_markdown(report)
    assert "Indicative only" in render_markdown(report)


def test_operator_verdicts_on_audited_tickets_join_the_calibration_set(redis_client, prefix, tmp_path: Path) -> None:
    keys = Keys(prefix)
    _store(redis_client, keys)
    judge, _ = _judge(redis_client, keys)
    cases = tmp_path / "cases.jsonl"
    run_audit(
        AuditStore(redis_client, keys), judge, ON, cases_path=cases, sample_size=10, rng=random.Random(1), now=1000.0
    )
    # Operators decide: T-refund was indeed a false green; T-delete's category was fine; and
    # a decision on a ticket the audit never queued is not a calibration case.
    for decision in (
        Decision(
            ticket_id="T-refund",
            operator="ana",
            action="escalate",
            correct_level="red",
            given_level="green",
            decided_at=1.0,
            category="billing",
            false_green=True,
        ),
        Decision(
            ticket_id="T-delete",
            operator="ana",
            action="approve",
            correct_level="red",
            given_level="red",
            decided_at=2.0,
            category="account",
        ),
        Decision(
            ticket_id="T-bug",
            operator="bo",
            action="approve",
            correct_level="yellow",
            given_level="yellow",
            decided_at=3.0,
        ),
    ):
        redis_client.xadd(keys.decisions, {"id": decision.ticket_id, "data": msgspec.json.encode(decision)})
        redis_client.hset(keys.ticket(decision.ticket_id), "decision", msgspec.json.encode(decision))
        redis_client.zrem(keys.queue("audit"), decision.ticket_id)

    report = run_audit(
        AuditStore(redis_client, keys), judge, ON, cases_path=cases, sample_size=10, rng=random.Random(1), now=2000.0
    )
    assert sorted(report.operator_cases_added) == ["T-delete", "T-refund"]
    added = {c.source: c for c in load_cases(cases)}
    assert added["operator:T-refund"].human_verdict == "unacceptable"
    assert added["operator:T-refund"].judge_verdict == "unacceptable"
    # The judge called T-delete unacceptable; the operator found nothing wrong: a judge miss
    # that now sits in the calibration set.
    assert added["operator:T-delete"].human_verdict == "acceptable"
    assert added["operator:T-delete"].judge_verdict == "unacceptable"
    assert redis_client.hlen(keys.audit_queued) == 0
    # Decided tickets are judged again but not queued again.
    assert report.queued == [] and sorted(report.indicative) == ["T-delete", "T-refund"]

    # Running again reads nothing twice (cursor) and appends nothing twice.
    third = run_audit(
        AuditStore(redis_client, keys), judge, ON, cases_path=cases, sample_size=10, rng=random.Random(1), now=3000.0
    )
    assert third.operator_cases_added == []
    assert len(load_cases(cases)) == 2
    # T-refund was queued because the judge objected, not drawn for a check: its operator
    # decision says nothing about the false-green rate of served greens (that draw is biased).
    assert third.checked_greens.checked == 0 and redis_client.hlen(keys.audit_green_checks) == 0


def _decide(client, keys: Keys, ticket_id: str, level: str, decided_at: float, false_green: bool = False) -> None:
    decision = Decision(
        ticket_id=ticket_id,
        operator="ana",
        action="approve" if level == "green" else "escalate",
        correct_level=level,
        given_level="green",
        decided_at=decided_at,
        false_green=false_green,
    )
    client.xadd(keys.decisions, {"id": ticket_id, "data": msgspec.json.encode(decision)})
    client.hset(keys.ticket(ticket_id), "decision", msgspec.json.encode(decision))
    client.zrem(keys.queue("audit"), ticket_id)


def test_operators_check_sampled_greens_and_the_upper_bound_is_published(redis_client, prefix, tmp_path: Path) -> None:
    keys = Keys(prefix)
    _store(redis_client, keys)
    judge, _ = _judge(redis_client, keys)
    cases = tmp_path / "cases.jsonl"
    day = 86400.0
    # Gating off: the judge queues nothing, yet every sampled green goes to the operators.
    report = run_audit(
        AuditStore(redis_client, keys),
        judge,
        OFF,
        cases_path=cases,
        sample_size=10,
        rng=random.Random(1),
        now=1000.0,
        check_greens=4,
        max_false_green_rate=0.01,
        checks_window_s=30 * day,
    )
    assert sorted(m.decode() for m in redis_client.zrange(keys.queue("audit"), 0, -1)) == [
        "T-hours",
        "T-howto",
        "T-refund",
    ]  # T-gone expired: nothing to check
    assert sorted(t.ticket_id for t in report.tickets if t.checked) == ["T-hours", "T-howto", "T-refund"]
    check = report.checked_greens
    assert (check.queued, check.checked, check.false_greens, check.rate) == (3, 0, 0, None)
    assert check.upper == 1.0 and check.exceeded and check.checks_needed == 299
    state = redis_client.hgetall(keys.audit_state)
    assert float(state[b"checked_false_green_upper"]) == 1.0
    assert float(state[b"checked_greens"]) == 0.0
    assert float(state[b"max_false_green_rate"]) == 0.01
    assert math.isnan(float(state[b"checked_false_green_rate"]))
    assert "299 checked greens" in render_markdown(report)

    # Operators: the refund needed a person, the how-to was a right green; a decision on a
    # ticket that was not drawn for a check (T-bug) does not count.
    _decide(redis_client, keys, "T-refund", "red", decided_at=1100.0, false_green=True)
    _decide(redis_client, keys, "T-howto", "green", decided_at=1200.0)
    _decide(redis_client, keys, "T-bug", "red", decided_at=1300.0)
    report = run_audit(
        AuditStore(redis_client, keys),
        judge,
        OFF,
        cases_path=cases,
        sample_size=10,
        rng=random.Random(1),
        now=2000.0,
        check_greens=4,
        max_false_green_rate=0.01,
        checks_window_s=30 * day,
    )
    check = report.checked_greens
    assert (check.checked, check.false_greens, check.rate) == (2, 1, 0.5)
    assert check.upper == pytest.approx(math.sqrt(0.95))  # exact bound for 1 of 2
    assert check.exceeded
    assert sorted(report.operator_cases_added) == ["T-howto", "T-refund"]
    assert metrics.audit_checked_false_green_upper_ratio._value.get() == pytest.approx(math.sqrt(0.95))
    assert metrics.audit_checked_false_greens._value.get() == 1.0
    assert metrics.max_false_green_rate_ratio._value.get() == 0.01
    assert "Operators found false greens" in render_markdown(report)
    # Decided greens are not queued again; T-hours, still undecided, stays queued as a check.
    assert [m.decode() for m in redis_client.zrange(keys.queue("audit"), 0, -1)] == ["T-hours"]

    # A month later those checks are out of the window: the figure follows today's traffic.
    later = run_audit(
        AuditStore(redis_client, keys),
        judge,
        OFF,
        cases_path=cases,
        sample_size=10,
        rng=random.Random(1),
        now=1200.0 + 31 * day,
        check_greens=0,
        max_false_green_rate=0.01,
        checks_window_s=30 * day,
    )
    assert later.checked_greens.checked == 0 and redis_client.hlen(keys.audit_green_checks) == 0


def test_state_is_nan_when_nothing_is_known(redis_client, prefix, tmp_path: Path) -> None:
    keys = Keys(prefix)
    judge, _ = _judge(redis_client, keys)
    never = GatingState(gating=False, stale=True, kappa=None, kappa_min=0.6, reasons=["never calibrated"])
    report = run_audit(AuditStore(redis_client, keys), judge, never, cases_path=tmp_path / "c.jsonl", now=5.0)
    assert report.tickets == [] and report.false_green.rate is None
    state = redis_client.hgetall(keys.audit_state)
    assert math.isnan(float(state[b"kappa"])) and math.isnan(float(state[b"false_green_rate"]))
