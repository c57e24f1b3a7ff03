"""L1 + L2 → final level: pure functions, no I/O.

finalLevel = max(L1, L2). A rule's level is never lowered, and nothing is green unless the model
positively said so by the logits path (fail closed).
"""

from __future__ import annotations

import msgspec

from .results import (
    L1Result,
    L2Result,
    ModelInfo,
    Timings,
    TriageResult,
    calibrated_fields,
    max_level,
)


def fail_closed(l2: L2Result) -> L2Result:
    """Green only from the logits path; generated, unavailable or malformed answers are yellow."""
    if l2.level == "green" and l2.method != "logits":
        return msgspec.structs.replace(l2, level="yellow", reason=l2.reason or f"{l2.method} is never green")
    return l2


def unavailable(reason: str) -> L2Result:
    """The L2 result when the model could not answer: yellow, says why."""
    return L2Result(level="yellow", method="unavailable", reason=reason)


def combine(
    ticket_id: str,
    l1: L1Result,
    l2: L2Result,
    model: ModelInfo,
    prompt_sha: str,
    timings: Timings,
    completed_at: float,
    status: str = "done",
) -> TriageResult:
    l2 = fail_closed(l2)
    return TriageResult(
        id=ticket_id,
        status=status,  # type: ignore[arg-type]
        final_level=max_level(l1.level, l2.level),
        l1=l1,
        l2=l2,
        category=l2.category,
        urgency=l2.urgency,
        model=model,
        prompt_sha=prompt_sha,
        rules_sha=l1.rules_sha,
        timings_ms=timings,
        completed_at=completed_at,
        calibrated_fields=calibrated_fields(l2),
    )
