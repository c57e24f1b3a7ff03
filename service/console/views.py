"""What the console shows, as pure functions: highlighted text, answer bars, status strip, form → decision.

No I/O here: the routes read Redis and hand plain dicts to these functions, so every rule about what
an operator sees (and what a keystroke records) is tested without a server.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from ..errors import InvalidTicket
from ..results import (
    LEVELS,
    RED_FLAGS,
    Answer,
    Decision,
    DecisionIn,
    Level,
    RuleHit,
    TicketIn,
    TriageResult,
    is_calibrated,
    ticket_text,
)
from ..store import Heartbeat, StoredTicket

# Buttons of the decision form. `false_green` is the console's one-keystroke shorthand for
# "escalate, and this green was a false green"; it is recorded as action `escalate`.
CONSOLE_ACTIONS = ("approve", "escalate", "downgrade", "edit", "false_green")
# The questions an operator reads first; any other answer follows in name order.
ANSWER_ORDER = ("risk", *RED_FLAGS, "category", "urgency", "team")


def human_age(seconds: float) -> str:
    """'42 s', '7 min', '3 h 05 min', '2 d 4 h': precise enough to sort by eye."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


# --- the ticket text with the fired rules' spans marked ------------------------------------------


class Segment(msgspec.Struct, frozen=True):
    text: str
    rules: tuple[str, ...] = ()  # ids of the rules whose span covers this piece
    level: str | None = None  # the most severe of those rules: "red" or "yellow"


def highlight(text: str, hits: Iterable[RuleHit]) -> list[Segment]:
    """Cut `text` at every span boundary; each piece knows which rules cover it.

    Spans are character offsets into ticket_text(subject, body). Overlapping and nested spans are
    common (a keyword inside a regex match), so pieces are cut at every boundary rather than
    nesting <mark>s. Spans outside the text (a stale rule pack, a truncated text) are clipped,
    never trusted to index.
    """
    size = len(text)
    spans: list[tuple[int, int, RuleHit]] = []
    cuts = {0, size}
    for hit in hits:
        start, end = (min(max(int(v), 0), size) for v in hit.span)
        if end > start:
            spans.append((start, end, hit))
            cuts.update((start, end))
    points = sorted(cuts)
    segments: list[Segment] = []
    for start, end in zip(points, points[1:], strict=False):
        covering = [hit for s, e, hit in spans if s <= start and end <= e]
        rules = tuple(sorted({hit.id for hit in covering}))
        level = None
        if covering:
            level = "red" if any(hit.level == "red" for hit in covering) else "yellow"
        piece = text[start:end]
        if segments and segments[-1].rules == rules:
            segments[-1] = Segment(segments[-1].text + piece, rules, level)
        else:
            segments.append(Segment(piece, rules, level))
    return segments or [Segment(text)]


# --- L2 answers as bars ---------------------------------------------------------------------------


class Bar(msgspec.Struct, frozen=True):
    option: str
    p: float
    chosen: bool

    @property
    def percent(self) -> str:
        return f"{self.p * 100:.1f}"

    @property
    def width(self) -> str:
        """SVG rect width in a 0..100 viewBox (an attribute, so no inline style under the CSP)."""
        return f"{max(0.0, min(1.0, self.p)) * 100:.2f}"


class AnswerView(msgspec.Struct, frozen=True):
    name: str
    kind: str
    chosen: str
    method: str
    calibrated: bool
    bars: list[Bar]
    coverage: float | None
    confidence: float | None
    value: float | None
    raw: list[Bar]  # the uncalibrated distribution, when the shown one is calibrated


def _bars(options: list[str], probabilities: Mapping[str, float] | None, chosen: str) -> list[Bar]:
    if not probabilities:
        return []
    names = list(options) + [o for o in probabilities if o not in options]
    return [Bar(option=o, p=_finite(probabilities.get(o, 0.0)), chosen=o == chosen) for o in names]


def _finite(value: float | None) -> float:
    return float(value) if value is not None and math.isfinite(value) else 0.0


def answer_view(name: str, answer: Answer) -> AnswerView:
    probabilities = answer.probabilities
    if probabilities is None and answer.kind == "boolean" and answer.probability is not None:
        probabilities = {"yes": answer.probability, "no": 1.0 - answer.probability}
    return AnswerView(
        name=name,
        kind=answer.kind,
        chosen=answer.chosen,
        method=answer.method,
        calibrated=is_calibrated(answer),
        bars=_bars(answer.options, probabilities, answer.chosen),
        coverage=answer.coverage,
        confidence=answer.confidence,
        value=answer.value,
        raw=_bars(answer.options, answer.raw_probabilities, answer.chosen) if answer.calibrated else [],
    )


def ordered_answers(answers: Mapping[str, Answer]) -> list[AnswerView]:
    rank = {name: i for i, name in enumerate(ANSWER_ORDER)}
    names = sorted(answers, key=lambda n: (rank.get(n, len(rank)), n))
    return [answer_view(name, answers[name]) for name in names]


# --- one stored ticket, ready for the template -----------------------------------------------------

# What the ticket page and the queue show of the model's answers beside the level.
SHOWN_FIELDS = ("category", "urgency", "team")


def guesses(values: Mapping[str, Any], calibrated_fields: Iterable[str]) -> frozenset[str]:
    """The shown fields that have a value no calibration mapped: the model's guesses, to be shown
    as such (muted, tagged, never coloured like a finding, never pre-filled as a label)."""
    calibrated = set(calibrated_fields)
    return frozenset(name for name in SHOWN_FIELDS if values.get(name) is not None and name not in calibrated)


class TicketView(msgspec.Struct, frozen=True):
    id: str
    status: str
    level: Level  # the level the service gave: what an approval confirms
    subject: str | None
    text: str
    segments: list[Segment]
    rules: list[RuleHit]
    l1_level: str
    result: TriageResult | None
    answers: list[AnswerView]
    category: str | None
    urgency: int | None
    team: str | None
    guesses: frozenset[str]  # of category, urgency, team: those that are uncalibrated guesses
    age_s: float
    request: TicketIn
    suggested_flags: frozenset[str]  # red flags raised by a rule or by the model: the form's default
    decision: Decision | None


def ticket_view(stored: StoredTicket, now: float) -> TicketView:
    """Everything the ticket page shows, from the ticket as stored (it must have its request)."""
    request = stored.request
    assert request is not None, "the routes show only tickets with a request"
    result = stored.result
    l1 = result.l1 if result else stored.l1
    assert l1 is not None, "a ticket is stored with its L1 result"
    text = ticket_text(request.subject, request.body)
    flags = {hit.flag for hit in l1.rules if hit.flag != "none"}
    if result:
        flags |= {f for f in result.l2.red_flags if f in RED_FLAGS}
    accepted_at = stored.accepted_at if stored.accepted_at is not None else now
    shown = {"category": result.category, "urgency": result.urgency, "team": result.l2.team} if result else {}
    return TicketView(
        id=stored.id,
        status=stored.status or "queued",
        level=stored.level,
        subject=request.subject,
        text=text,
        segments=highlight(text, l1.rules),
        rules=l1.rules,
        l1_level=l1.level,
        result=result,
        answers=ordered_answers(result.l2.answers) if result else [],
        category=shown.get("category"),
        urgency=shown.get("urgency"),
        team=shown.get("team"),
        guesses=guesses(shown, result.calibrated_fields if result else ()),
        age_s=now - accepted_at,
        request=request,
        suggested_flags=frozenset(flags),
        decision=stored.decision,
    )


# --- the decision form -----------------------------------------------------------------------------


def _step(level: Level, by: int) -> Level | None:
    index = LEVELS.index(level) + by
    return LEVELS[index] if 0 <= index < len(LEVELS) else None


def escalated(level: Level) -> Level | None:
    return _step(level, 1)


def downgraded(level: Level) -> Level | None:
    return _step(level, -1)


def decision_from_form(form: Mapping[str, str], given: Level, operator: str) -> DecisionIn:
    """The DecisionIn a console form submission stands for.

    The quick actions fix the level relative to the one the service gave (approve: the same;
    escalate/downgrade: one step), so a single keystroke is a complete label; `edit` takes the
    level from the form. The three flags are always sent, checked or not: an explicit "no" is
    a label too. Validation that the API also does (categories, flags against the level,
    false green only on a green ticket) is left to the API's own checks.
    """
    action = form.get("action", "")
    if action not in CONSOLE_ACTIONS:
        raise InvalidTicket(f"`action` must be one of {list(CONSOLE_ACTIONS)}", field="action")
    flags = {flag: form.get(f"flag_{flag}") == "on" for flag in RED_FLAGS}
    false_green = form.get("false_green") == "on"
    level: Level | None
    if action == "approve":
        level = given
    elif action == "escalate":
        level = escalated(given)
        if level is None:
            raise InvalidTicket("a red ticket cannot be escalated further", field="action")
    elif action == "downgrade":
        level = downgraded(given)
        if level is None:
            raise InvalidTicket("a green ticket cannot be downgraded", field="action")
        if level != "red":  # policy: any red flag makes a ticket red, so "not red" means none
            flags = dict.fromkeys(RED_FLAGS, False)
    elif action == "false_green":
        false_green = True
        level = "red" if any(flags.values()) else "yellow"
    else:
        chosen = form.get("level", "")
        if chosen not in LEVELS:
            raise InvalidTicket(f"`level` must be one of {list(LEVELS)}", field="correct_level")
        level = chosen  # type: ignore[assignment]
    note = form.get("note", "").strip() or None
    return DecisionIn(
        operator=operator,
        action="escalate" if action == "false_green" else action,  # type: ignore[arg-type]
        correct_level=level,
        category=form.get("category") or None,
        flags=flags,
        false_green=false_green,
        note=note,
    )


# --- the status strip ------------------------------------------------------------------------------


class Calibration(msgspec.Struct, frozen=True):
    state: str  # "current", "stale", "uncalibrated", "unknown", "no worker", "mixed"
    version: str | None
    age_s: float | None
    detail: str | None


class Audit(msgspec.Struct, frozen=True):
    kappa: float | None
    gating: bool | None
    false_green_rate: float | None
    age_s: float | None


class Status(msgspec.Struct, frozen=True):
    queues: dict[str, int]
    backlog: int
    workers: int
    calibration: Calibration
    audit: Audit


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _flag(value: Any) -> bool | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "1.0", "true", "yes", "on"):
        return True
    if text in ("0", "0.0", "false", "no", "off"):
        return False
    return None


def calibration_status(workers: list[Heartbeat], now: float) -> Calibration:
    """What the workers' heartbeats say about the calibration they serve with.

    A heartbeat (written at `at`) carries `calibration` as service.calibration's watcher reports
    it; `age_s` is as of the heartbeat, so the time since is added. When workers disagree the
    strip says so rather than picking one.
    """
    if not workers:
        return Calibration(
            state="no worker", version=None, age_s=None, detail="no worker heartbeat: nothing is being triaged"
        )
    known = [(w, w.calibration) for w in workers if w.calibration is not None]
    if not known:
        return Calibration(state="unknown", version=None, age_s=None, detail="workers do not report their calibration")
    versions = sorted({c.version for _, c in known if c.version})
    if len(versions) > 1:
        return Calibration(
            state="mixed",
            version=", ".join(versions),
            age_s=None,
            detail="workers serve different calibration versions",
        )
    beat, report = known[0]
    age = None if report.age_s is None else report.age_s + max(0.0, now - beat.at)
    detail = next((c.error for _, c in known if c.error), None)
    if any(c.stale for _, c in known):
        state = "stale"
    else:
        state = "current" if versions else "uncalibrated"
    return Calibration(state=state, version=versions[0] if versions else None, age_s=age, detail=detail)


def status_strip(gauges: Mapping[str, Any], workers: list[Heartbeat], now: float) -> Status:
    """AsyncStore.gauges() + AsyncStore.workers() → the strip at the top of every page."""
    audit = gauges.get("audit") or {}
    last_run = _number(audit.get("last_run"))
    return Status(
        queues={name: int(depth) for name, depth in (gauges.get("queues") or {}).items()},
        backlog=int(gauges.get("backlog") or 0),
        workers=len(workers),
        calibration=calibration_status(workers, now),
        audit=Audit(
            kappa=_number(audit.get("kappa")),
            gating=_flag(audit.get("gating")),
            false_green_rate=_number(audit.get("false_green_rate")),
            age_s=now - last_run if last_run else None,
        ),
    )
