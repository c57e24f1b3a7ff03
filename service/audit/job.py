"""`triage audit run` against Redis: operator feedback in, sample, judge, queue (if gating), report.

Redis keys read and written, all through `AuditStore` (service/store/audit.py; service/store/keys.py
names them):
- {p}:results (stream, field `id`) and {p}:ticket:{id} (fields status, final_level, request,
  result, decision): what was decided and on which text; read only.
- {p}:queue:audit (zset, score = time added): unacceptable tickets, only while gating; and
  `check_greens` of the sampled greens per run, whatever the judge said (operator checks).
- {p}:audit:queued (hash, ticket id -> QueuedEntry JSON): what the audit queued and why, so
  that an operator's decision on it can become a calibration case; entries leave when decided
  or after `max_age_s` (the ticket itself has expired by then).
- {p}:audit:green_checks (hash, ticket id -> GreenCheck JSON): operators' decisions on the
  greens queued for a check; those older than the checks window are dropped.
- {p}:decisions (stream, fields id, data): operators' decisions; read from a cursor.
- {p}:audit:state (hash): kappa, gating, false_green_rate, last_run, the checked greens'
  figures and max_false_green_rate (what /metrics shows, metrics.AUDIT_STATE_GAUGES), stale,
  and decisions_cursor (the last decisions entry already read).
- {p}:audit:verdicts:{key}: the verdict cache (service/audit/judge.py).
"""

from __future__ import annotations

import datetime as dt
import math
import random
import time
from pathlib import Path

import structlog

from .. import metrics
from ..errors import JudgeUnavailable
from ..progress import progress
from ..results import ticket_text
from ..store.audit import AuditStore
from ..store.records import GreenCheck, QueuedEntry
from .calibration import GatingState
from .cases import append_cases, case_from_decision, needed_a_person
from .judge import AuditedDecision, Judge
from .report import AuditedTicket, AuditReport, checked_greens, false_green_estimate
from .sampling import stratified_sample

log = structlog.get_logger()


def ingest_operator_decisions(store: AuditStore, cases_path: str | Path, now: float | None = None) -> list[str]:
    """Operators' decisions on tickets the audit queued become calibration cases; returns ids."""
    queued = store.queued()
    cases, done, last = [], [], None
    checks: dict[str, GreenCheck] = {}
    for item in store.new_decisions():
        last, decision = item.entry_id, item.decision
        if decision is None:
            continue
        entry = queued.get(decision.ticket_id)
        if entry is None:
            continue  # not a ticket the audit queued
        if entry.check and entry.level == "green":
            checks[decision.ticket_id] = GreenCheck(
                decided_at=decision.decided_at, false_green=needed_a_person(decision)
            )
        ticket = store.request(decision.ticket_id)
        done.append(decision.ticket_id)
        if ticket is None:
            log.info("audit_decision_ticket_expired", ticket_id=decision.ticket_id)
            continue
        cases.append(
            case_from_decision(
                ticket_id=decision.ticket_id,
                subject=ticket.subject,
                body=ticket.body,
                language=ticket.language,
                level_given=entry.level,
                category_given=entry.category,
                urgency_given=entry.urgency,
                decision=decision,
                judge_verdict=entry.verdict,
                now=now,
            )
        )
    added = append_cases(cases, cases_path) if cases else []
    # Cursor and queued entries move only after the cases are on disk: a crash before this line
    # re-reads the same decisions, and append_cases skips what is already there.
    store.commit_decisions(last, done, checks)
    for case in added:
        agreed = case.judge_verdict == case.human_verdict
        log.info(
            "audit_operator_case_added",
            case_id=case.id,
            human=case.human_verdict,
            judge=case.judge_verdict,
            judge_missed=not agreed,
        )
    return [case.source.split(":", 1)[1] for case in added]


def prune_queued(store: AuditStore, max_age_s: float, now: float) -> int:
    """Forget queued entries older than the tickets' own expiry (never decided, now gone)."""
    stale = [ticket_id for ticket_id, entry in store.queued().items() if now - entry.queued_at > max_age_s]
    store.forget_queued(stale)
    return len(stale)


def green_checks(store: AuditStore, window_s: float, now: float) -> tuple[int, int]:
    """(false greens, checks) among the operator checks decided in the last `window_s`; older
    checks are dropped, so the figure follows today's traffic, model and thresholds."""
    k = n = 0
    old = []
    for ticket_id, check in store.green_checks().items():
        if now - check.decided_at > window_s:
            old.append(ticket_id)
            continue
        n += 1
        k += check.false_green
    store.forget_checks(old)
    return k, n


def run_audit(
    store: AuditStore,
    judge: Judge,
    gating: GatingState,
    *,
    cases_path: str | Path,
    sample_size: int = 60,
    window: int = 5000,
    green_share: float = 0.6,
    rng: random.Random | None = None,
    max_age_s: float = 30 * 86400,
    now: float | None = None,
    quiet: bool = False,
    check_greens: int = 0,
    max_false_green_rate: float = 0.01,
    checks_window_s: float = 30 * 86400,
) -> AuditReport:
    started = time.perf_counter()
    fixed_clock = now is not None
    now = time.time() if now is None else now
    added = ingest_operator_decisions(store, cases_path, now=now)
    prune_queued(store, max_age_s, now)
    sample = stratified_sample(store.recent_levels(window), sample_size, rng or random.Random(), green_share)
    # The greens are in random order within their stratum: the first `check_greens` are a
    # uniform draw of served greens, which operators check whatever the judge says.
    to_check = set(sample.picked.get("green", [])[: max(0, check_greens)])
    tickets: list[AuditedTicket] = []
    unjudged: dict[str, str] = {}
    queued: list[str] = []
    indicative: list[str] = []
    checking: list[str] = []
    for ticket_id, level in progress(sample.ids, desc="audit run", unit="ticket", quiet=quiet):
        loaded = store.served(ticket_id)
        if loaded is None:
            unjudged[ticket_id] = "ticket expired or incomplete"
            continue
        request, result, decided = loaded
        decision = AuditedDecision(
            text=ticket_text(request.subject, request.body),
            level=result.final_level,  # type: ignore[arg-type]
            category=result.category,
            urgency=result.urgency,
        )
        check = ticket_id in to_check and level == "green" and not decided
        try:
            verdict = judge.judge(decision)
        except JudgeUnavailable as exc:
            unjudged[ticket_id] = f"judge unavailable: {exc}"
            verdict = None
        push = verdict is not None and verdict.verdict == "unacceptable" and gating.gating and not decided
        if push or check:
            store.queue(
                ticket_id,
                QueuedEntry(
                    level=level,
                    category=result.category,
                    urgency=result.urgency,
                    verdict=verdict.verdict if verdict else None,
                    failed=verdict.failed if verdict else [],
                    queued_at=now,
                    check=check,
                ),
            )
        if check:
            checking.append(ticket_id)
        if verdict is None:
            continue
        eliminatory = {c.id for c in judge.rubric.criteria if c.kind == "eliminatory"}
        false_green = level == "green" and any(c in eliminatory for c in verdict.failed)
        if verdict.verdict == "unacceptable":
            (queued if push else indicative).append(ticket_id)
        tickets.append(
            AuditedTicket(
                ticket_id=ticket_id,
                level=level,
                category=result.category,
                urgency=result.urgency,
                verdict=verdict.verdict,
                failed=verdict.failed,
                false_green=false_green,
                p_fail={c.id: c.p_fail for c in verdict.criteria if c.applicable},
                cached=verdict.cached,
                queued=push,
                checked=check,
            )
        )
    estimate = false_green_estimate(tickets, sample.population)
    found, checked = green_checks(store, checks_window_s, now)
    checks = checked_greens(found, checked, max_false_green_rate, checks_window_s, len(checking))
    finished = now if fixed_clock else time.time()
    report = AuditReport(
        run_at=dt.datetime.fromtimestamp(finished, dt.UTC).isoformat(timespec="seconds"),
        finished_at=finished,
        judge_model=judge.backend.model_name,
        judge_model_sha256=judge.model_sha256,
        rubric_sha256=judge.rubric.sha256,
        method=judge.method,
        gating=gating,
        population=sample.population,
        sampled={level: len(ids) for level, ids in sample.picked.items()},
        false_green=estimate,
        unacceptable=queued + indicative,
        queued=queued,
        indicative=indicative,
        unjudged=unjudged,
        operator_cases_added=added,
        tickets=tickets,
        elapsed_s=round(time.perf_counter() - started, 2),
        checked_greens=checks,
    )
    publish_state(store, report)
    if checks.exceeded and checks.false_greens:
        log.warning(
            "audit_false_green_bound_exceeded",
            false_greens=checks.false_greens,
            checked=checks.checked,
            upper=round(checks.upper, 4),
            max_rate=checks.max_rate,
        )
    if estimate.false_greens and gating.gating:
        log.warning(
            "audit_false_greens",
            false_greens=estimate.false_greens,
            greens_judged=estimate.greens_judged,
            rate=estimate.rate,
            queued=len(queued),
        )
    elif indicative:
        log.info("audit_indicative_only", unacceptable=len(indicative), reasons=gating.reasons)
    return report


def _num(value: float | None) -> float:
    return math.nan if value is None else float(value)


def publish_state(store: AuditStore, report: AuditReport) -> dict[str, str]:
    """Write {p}:audit:state for the API's /metrics and set this process's gauges."""
    values = {
        "kappa": _num(report.gating.kappa),
        "gating": 1.0 if report.gating.gating else 0.0,
        "false_green_rate": _num(report.false_green.rate),
        "last_run": report.finished_at,
    }
    check = report.checked_greens
    if check is not None:
        values |= {
            "checked_false_green_rate": _num(check.rate),
            "checked_false_green_upper": check.upper,
            "checked_greens": float(check.checked),
            "checked_false_greens": float(check.false_greens),
            "max_false_green_rate": check.max_rate,
        }
    fields = {name: repr(value) for name, value in values.items()}  # "nan" when unknown
    fields["stale"] = "1" if report.gating.stale else "0"
    store.publish_state(fields)
    for name, value in values.items():
        metrics.AUDIT_STATE_GAUGES[name].set(value)
    return fields
