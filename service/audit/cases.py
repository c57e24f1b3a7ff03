"""The judge's calibration set: human-labelled audit cases, how they are built, read and appended.

A case is one audited decision (ticket, level given, category, urgency) with the human verdict.
The bundled set, data/judge_calibration.jsonl, is generated from the labelled dev set: the human
verdict follows from the dev label and the decision given, by the risk policy (see
`human_judgement`). Regenerate it with `triage audit cases` (the dev set is TRIAGE_DEV_SET or
--dev).

Operators' decisions on tickets the audit queued are appended as cases of kind "operator".
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import msgspec

from ..results import Decision, Level, ticket_text

Verdict = Literal["acceptable", "unacceptable"]

DEFAULT_CASES_PATH = Path(__file__).resolve().parents[2] / "data" / "judge_calibration.jsonl"

# Dev tickets that try to instruct the system (fake system messages, "classify this as green",
# base64 orders). A human labeller's reading of the ticket bodies, recorded here because the
# dev record has no field for it and the policy forbids code from reading its `note`.
INSTRUCTION_TICKETS = frozenset({"DEV-017", "DEV-025", "DEV-049", "DEV-061", "DEV-110", "DEV-147", "DEV-149"})

# A category that is plainly wrong for a ticket of the key's category (borderline cases).
WRONG_CATEGORY = {
    "billing": "shipping",
    "technical": "legal",
    "account": "shipping",
    "shipping": "security",
    "sales": "technical",
    "security": "shipping",
    "legal": "shipping",
    "other": "legal",
}


class CalibrationCase(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    source: str  # "dev:DEV-017" or "operator:<ticket id>"
    kind: str  # how the decision was built (see PLAN) or "operator"
    body: str
    level_given: Level
    human_verdict: Verdict
    human_failed: list[str]  # criteria the human considers failed (ids from the rubric)
    subject: str | None = None
    language: str | None = None
    category_given: str | None = None
    urgency_given: int | None = None
    judge_verdict: str | None = None  # operator cases: what the judge had said when it queued it
    added_at: float = 0.0

    @property
    def text(self) -> str:
        return ticket_text(self.subject, self.body)


def human_judgement(
    *,
    label_risk: str,
    label_category: str,
    label_urgency: int,
    instructs: bool,
    level_given: str,
    category_given: str | None,
    urgency_given: int | None,
) -> list[str]:
    """The rubric criteria a person applying the policy sees failed in a decision.

    A green on a ticket that needs a person (label yellow or red) fails `green_needs_person`;
    a green on a ticket that instructs the system also fails `green_on_instruction`; another
    category fails `category_right`; an urgency more than one step away fails `urgency_plausible`.
    """
    failed = []
    if level_given == "green" and label_risk != "green":
        failed.append("green_needs_person")
    if level_given == "green" and instructs:
        failed.append("green_on_instruction")
    if category_given is not None and category_given != label_category:
        failed.append("category_right")
    if urgency_given is not None and abs(urgency_given - label_urgency) > 1:
        failed.append("urgency_plausible")
    return failed


def verdict_from_failed(failed: Iterable[str]) -> Verdict:
    """The policy's verdict for hand labels (mirrors prompts/judge/rubric.yaml's verdict rule)."""
    failed = list(failed)
    eliminatory = {"green_needs_person", "green_on_instruction"}
    if any(c in eliminatory for c in failed) or len(failed) >= 2:
        return "unacceptable"
    return "acceptable"


# (kind, pool, how many, level given, wrong category?, implausible urgency?)
# Balanced 24 acceptable / 24 unacceptable, with 8 borderline cases (one secondary criterion
# failed, still acceptable) and 2 over-escalations (acceptable by policy: a glance, not a harm).
PLAN: tuple[tuple[str, str, int, str | None, bool, bool], ...] = (
    ("correct_green", "green", 8, "green", False, False),
    ("correct_yellow", "yellow", 3, "yellow", False, False),
    ("correct_red", "red", 3, "red", False, False),
    ("borderline_category", "green", 2, None, True, False),
    ("borderline_category", "yellow", 1, None, True, False),
    ("borderline_category", "red", 1, None, True, False),
    ("borderline_urgency", "green", 2, None, False, True),
    ("borderline_urgency", "yellow", 1, None, False, True),
    ("borderline_urgency", "red", 1, None, False, True),
    ("over_escalation", "green", 2, "yellow", False, False),
    ("false_green_red", "red", 8, "green", False, False),
    ("false_green_yellow", "yellow", 7, "green", False, False),
    ("false_green_instruction", "instruction", 4, "green", False, False),
    ("two_secondary", "green", 2, None, True, True),
    ("two_secondary", "yellow", 2, None, True, True),
    ("two_secondary", "red", 1, None, True, True),
)


def _implausible(urgency: int) -> int:
    return urgency + 3 if urgency <= 2 else urgency - 3


def build_calibration_set(dev_rows: list[dict], seed: int = 6) -> list[CalibrationCase]:
    """Draw the cases of PLAN from labelled dev records, each ticket used at most once."""
    pools: dict[str, list[dict]] = {"green": [], "yellow": [], "red": [], "instruction": []}
    for row in sorted(dev_rows, key=lambda r: r["id"]):
        pool = "instruction" if row["id"] in INSTRUCTION_TICKETS else row["risk"]
        pools[pool].append(row)
    rng = random.Random(seed)
    for rows in pools.values():
        rng.shuffle(rows)
    cases: list[CalibrationCase] = []
    for kind, pool, count, level, wrong_category, odd_urgency in PLAN:
        if len(pools[pool]) < count:
            raise ValueError(
                f"dev set has too few {pool} tickets left for {kind}: need {count}, have {len(pools[pool])}"
            )
        for row in (pools[pool].pop() for _ in range(count)):
            given_level = level or row["risk"]
            category = WRONG_CATEGORY[row["category"]] if wrong_category else row["category"]
            urgency = _implausible(row["urgency"]) if odd_urgency else row["urgency"]
            failed = human_judgement(
                label_risk=row["risk"],
                label_category=row["category"],
                label_urgency=row["urgency"],
                instructs=row["id"] in INSTRUCTION_TICKETS,
                level_given=given_level,
                category_given=category,
                urgency_given=urgency,
            )
            cases.append(
                CalibrationCase(
                    id=f"CAL-{len(cases) + 1:03d}",
                    source=f"dev:{row['id']}",
                    kind=kind,
                    subject=row.get("subject"),
                    body=row["body"],
                    language=row.get("language"),
                    level_given=given_level,
                    category_given=category,
                    urgency_given=urgency,
                    human_verdict=verdict_from_failed(failed),
                    human_failed=failed,
                )
            )
    return cases


_decoder = msgspec.json.Decoder(CalibrationCase)


def load_cases(path: str | Path = DEFAULT_CASES_PATH) -> list[CalibrationCase]:
    cases = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            cases.append(_decoder.decode(line))
        except msgspec.ValidationError as exc:
            raise ValueError(f"{path}:{number}: {exc}") from None
    return cases


def write_cases(cases: Iterable[CalibrationCase], path: str | Path) -> None:
    lines = [msgspec.json.encode(case).decode() for case in cases]
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def append_cases(new: Iterable[CalibrationCase], path: str | Path) -> list[CalibrationCase]:
    """Append cases whose source is not in the set yet; return those actually appended."""
    path = Path(path)
    known = {case.source for case in load_cases(path)} if path.exists() else set()
    fresh = []
    for case in new:
        if case.source not in known:
            known.add(case.source)
            fresh.append(case)
    if fresh:
        with path.open("a", encoding="utf-8") as handle:
            for case in fresh:
                handle.write(msgspec.json.encode(case).decode() + "\n")
    return fresh


def needed_a_person(decision: Decision) -> bool:
    """An operator's decision on a green ticket says the green was false: the level was raised
    or the ticket was marked a false green."""
    return decision.correct_level != "green" or decision.false_green


def case_from_decision(
    *,
    ticket_id: str,
    subject: str | None,
    body: str,
    language: str | None,
    level_given: str,
    category_given: str | None,
    urgency_given: int | None,
    decision: Decision,
    judge_verdict: str | None,
    now: float | None = None,
) -> CalibrationCase:
    """An operator's verdict on an audited ticket, as a calibration case.

    The operator's correct level and category are the labels; a decision carries no urgency and
    no "instructs the system" mark, so those criteria count as passed for the human.
    """
    failed = []
    if level_given == "green" and needed_a_person(decision):
        failed.append("green_needs_person")
    if decision.category is not None and category_given is not None and decision.category != category_given:
        failed.append("category_right")
    return CalibrationCase(
        id=f"OPS-{ticket_id}",
        source=f"operator:{ticket_id}",
        kind="operator",
        subject=subject,
        body=body,
        language=language,
        level_given=level_given,  # type: ignore[arg-type]
        category_given=category_given,
        urgency_given=urgency_given,
        human_verdict=verdict_from_failed(failed),
        human_failed=failed,
        judge_verdict=judge_verdict,
        added_at=time.time() if now is None else now,
    )
