"""The typed records that cross module boundaries: L1 hits, L2 answers, the stored result.

Every Struct here is part of an edge (HTTP response, Redis payload, eval rows), so they
forbid unknown fields and are encoded with msgspec, never pickle.
"""

from __future__ import annotations

from typing import Literal, get_args

import msgspec

Level = Literal["green", "yellow", "red"]
L1Level = Literal["none", "yellow", "red"]
Flag = Literal["commitment", "destructive_or_access", "third_party_personal_data"]
RuleFlag = Literal["commitment", "destructive_or_access", "third_party_personal_data", "none"]
L2Method = Literal["logits", "generated", "unavailable"]
AnswerMethod = Literal["logits", "head", "generated"]

LEVEL_ORDER: dict[str, int] = {"none": 0, "green": 0, "yellow": 1, "red": 2}
LEVELS: tuple[Level, ...] = get_args(Level)  # least to most severe
RED_FLAGS: tuple[Flag, ...] = get_args(Flag)


def max_level(*levels: str) -> Level:
    """The most severe of the given levels; L1's "none" counts as green."""
    worst = max(levels, key=lambda level: LEVEL_ORDER[level])
    return "green" if worst == "none" else worst  # type: ignore[return-value]


class Record(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=False):
    """Base for every stored or transmitted record."""


class RuleHit(Record, frozen=True):
    id: str
    level: Literal["yellow", "red"]
    flag: RuleFlag
    # character offsets into the original (un-normalised) text; (0, 0), empty, for a rule that
    # fires because none of its patterns is found (docs/l1.md, `fires: no_match`)
    span: tuple[int, int]
    text: str = ""  # the matched original text, for highlighting


class L1Result(Record, frozen=True):
    level: L1Level
    rules: list[RuleHit]
    rules_sha: str = ""
    elapsed_ms: float = 0.0


class Answer(Record):
    """One closed question answered from the next-token distribution (or generated)."""

    kind: Literal["choice", "boolean", "score"]
    options: list[str]
    chosen: str
    probabilities: dict[str, float] | None = None  # renormalised over the allowed aliases
    logprobs: dict[str, float] | None = None  # raw log-softmax over the whole vocabulary
    coverage: float | None = None  # mass on the aliases before renormalising
    confidence: float | None = None  # p(chosen) * coverage
    probability: float | None = None  # boolean: P(yes)
    value: float | None = None  # score: expected value
    mode: int | None = None  # score: most probable value
    method: AnswerMethod = "logits"
    calibrated: bool = False
    raw_probabilities: dict[str, float] | None = None  # uncalibrated, kept when calibrated


def is_calibrated(answer: Answer | None) -> bool:
    """True when a calibration artifact mapped this answer; otherwise it is the model's guess.

    Raw letters (method "logits", not calibrated) and generated answers are guesses: nothing
    measured how often they are right, so they must never be shown as facts.
    """
    return answer is not None and answer.calibrated and answer.method != "generated"


class L2Result(Record):
    level: Level
    method: L2Method
    calibrated: bool = False
    calibration_version: str | None = None
    answers: dict[str, Answer] = {}
    red_flags: list[str] = []
    category: str | None = None
    urgency: int | None = None
    team: str | None = None
    tokens_evaluated: int = 0
    timings_ms: dict[str, float] = {}
    reason: str | None = None  # why the method is generated/unavailable, or why not green
    # The green gate of the calibration: distance of the ticket to the labelled greens, and
    # whether that alone kept it from green (P(green) and every other rule allowed it).
    ood_distance: float | None = None
    ood_blocked: bool = False


# The result fields read from L2 answers, and the answers each one comes from. The team follows
# from the category (prompts/teams.yaml) when the model is not asked for it.
FIELD_ANSWERS: dict[str, tuple[str, ...]] = {
    "category": ("category",),
    "urgency": ("urgency",),
    "team": ("team",),
    "red_flags": RED_FLAGS,
}


def calibrated_fields(l2: L2Result) -> list[str]:
    """The fields of FIELD_ANSWERS whose value a calibration artifact mapped (every answer it is
    read from calibrated); any other field with a value is a guess."""
    out = []
    for name, sources in FIELD_ANSWERS.items():
        if name == "team" and "team" not in l2.answers:
            sources = ("category",)
        if all(is_calibrated(l2.answers.get(s)) for s in sources):
            out.append(name)
    return out


class ModelInfo(Record, frozen=True):
    name: str
    sha256: str


def ticket_text(subject: str | None, body: str) -> str:
    """The one text that L1 spans index into and L2 reads: subject, blank line, body."""
    return f"{subject}\n\n{body}" if subject else body


class TicketIn(Record, frozen=True):
    """POST /v1/tickets body."""

    body: str
    subject: str | None = None
    language: str | None = None
    customer_id: str | None = None
    channel: str | None = None
    metadata: dict[str, str] | None = None
    callback_url: str | None = None


class Timings(Record):
    l1: float = 0.0
    queue_wait: float = 0.0
    l2: float = 0.0
    total: float = 0.0


class TriageResult(Record):
    """The stored outcome of one ticket; GET /v1/tickets/{id} returns it when done."""

    id: str
    status: Literal["queued", "processing", "done", "failed"]
    final_level: Level
    l1: L1Result
    l2: L2Result
    category: str | None
    urgency: int | None
    model: ModelInfo
    prompt_sha: str
    rules_sha: str
    timings_ms: Timings
    completed_at: float = 0.0
    # category, urgency, l2.team, l2.red_flags: those calibrated (see calibrated_fields); any
    # other is the model's uncalibrated guess and must be shown as one.
    calibrated_fields: list[str] = []


Action = Literal["approve", "edit", "escalate", "downgrade"]


class DecisionIn(Record, frozen=True):
    """POST /v1/tickets/{id}/decision body: an operator's verdict, the label recalibration uses."""

    operator: str
    action: Action
    correct_level: Level
    category: str | None = None
    flags: dict[str, bool] | None = None
    false_green: bool = False
    note: str | None = None


class Decision(Record, frozen=True):
    """A decision as appended to the decisions stream (ticket id and when added)."""

    ticket_id: str
    operator: str
    action: Action
    correct_level: Level
    given_level: Level
    decided_at: float
    category: str | None = None
    flags: dict[str, bool] | None = None
    false_green: bool = False
    note: str | None = None
