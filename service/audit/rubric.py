"""The judge's rubric as data: load prompts/judge/, hash it, and apply its verdict rule.

The rubric folder holds `context.md` (what the judge is told, the cached prefix) and
`rubric.yaml` (criteria and verdict rule). Its sha256 covers every file in the folder, names
included, so that changing one word anywhere invalidates cached verdicts and the calibration.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

import msgspec
import yaml

from ..errors import RubricError
from ..results import Level

Verdict = Literal["acceptable", "unacceptable"]
CriterionKind = Literal["eliminatory", "secondary"]
LevelName = Level

DEFAULT_RUBRIC_DIR = Path(__file__).resolve().parents[2] / "prompts" / "judge"


class Criterion(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    kind: CriterionKind
    applies_to: tuple[LevelName, ...]
    fails_if: Literal["yes", "no"]
    question: str


class VerdictRule(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    eliminatory_failures: int  # this many eliminatory failures -> unacceptable
    secondary_failures: int  # this many secondary failures -> unacceptable


class RubricFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    version: int
    verdict_rule: VerdictRule
    ticket_template: str  # placeholder {text}
    decision_line: str  # placeholders {level} {category} {urgency}
    pairwise_question: str  # placeholders {first} {second}
    framing: dict[str, str]  # service.l2.prompts.Framing fields: how questions are written
    answer_orders: int  # 1 or 2: option orders each yes/no question is asked in (averaged)
    criteria: tuple[Criterion, ...]
    # The one-token answers read for yes and no: absent, the letters of the framing ("A. yes /
    # B. no"); e.g. [yes, no] to read the words themselves (asked in one order only).
    answer_words: tuple[str, str] | None = None


class Rubric(msgspec.Struct, frozen=True):
    """The loaded rubric: criteria in evaluation order, the judge's context, and the folder hash."""

    version: int
    context: str
    criteria: tuple[Criterion, ...]
    verdict_rule: VerdictRule
    ticket_template: str
    decision_line: str
    pairwise_question: str
    framing: dict[str, str]
    answer_orders: int
    sha256: str
    answer_words: tuple[str, str] | None = None

    def render_ticket(self, text: str) -> str:
        return self.ticket_template.format(text=text)

    def render_decision(self, text: str, level: str, category: str | None, urgency: int | None) -> str:
        unknown = "not given"
        line = self.decision_line.format(
            level=level, category=category or unknown, urgency=unknown if urgency is None else urgency
        )
        return f"{self.render_ticket(text)}\n{line}"

    def criterion(self, criterion_id: str) -> Criterion:
        for criterion in self.criteria:
            if criterion.id == criterion_id:
                return criterion
        raise KeyError(criterion_id)

    def applicable(self, level: str) -> tuple[Criterion, ...]:
        """The criteria that can fail at `level`; the others pass by construction."""
        return tuple(c for c in self.criteria if level in c.applies_to)


def folder_sha256(folder: Path) -> str:
    """sha256 over every regular file under `folder`: relative path, NUL, bytes, NUL, in order."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if "__pycache__" in path.parts or path.name.startswith("."):
            continue  # editor swap files and caches are not part of the rubric
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def load_rubric(folder: str | Path = DEFAULT_RUBRIC_DIR) -> Rubric:
    folder = Path(folder)
    rubric_path, context_path = folder / "rubric.yaml", folder / "context.md"
    for required in (rubric_path, context_path):
        if not required.is_file():
            raise RubricError(f"{required}: missing (the rubric folder needs rubric.yaml and context.md)")
    try:
        raw = yaml.safe_load(rubric_path.read_text(encoding="utf-8"))
        parsed = msgspec.convert(raw, RubricFile)
    except (yaml.YAMLError, msgspec.ValidationError) as exc:
        raise RubricError(f"{rubric_path}: {exc}") from None
    ids = [c.id for c in parsed.criteria]
    if len(set(ids)) != len(ids):
        raise RubricError(f"{rubric_path}: criterion ids must be unique, got {ids}")
    kinds = {c.kind for c in parsed.criteria}
    if kinds != {"eliminatory", "secondary"}:
        raise RubricError(f"{rubric_path}: expected eliminatory and secondary criteria, got {sorted(kinds)}")
    rule = parsed.verdict_rule
    if parsed.answer_orders not in (1, 2):
        raise RubricError(f"{rubric_path}: answer_orders must be 1 or 2, got {parsed.answer_orders}")
    if parsed.answer_words is not None and (parsed.answer_orders != 1 or len(set(parsed.answer_words)) != 2):
        raise RubricError(
            f"{rubric_path}: answer_words needs two different words and "
            f"answer_orders 1 (words have no order to average), got "
            f"{list(parsed.answer_words)} with answer_orders {parsed.answer_orders}"
        )
    if rule.eliminatory_failures < 1 or rule.secondary_failures < 1:
        raise RubricError(f"{rubric_path}: verdict_rule thresholds must be at least 1, got {rule}")
    for template, names in (
        (parsed.ticket_template, ("{text}",)),
        (parsed.decision_line, ("{level}", "{category}", "{urgency}")),
        (parsed.pairwise_question, ("{first}", "{second}")),
    ):
        missing = [name for name in names if name not in template]
        if missing:
            raise RubricError(f"{rubric_path}: template {template[:40]!r}... lacks {missing}")
    return Rubric(
        version=parsed.version,
        context=context_path.read_text(encoding="utf-8").strip(),
        criteria=parsed.criteria,
        verdict_rule=rule,
        ticket_template=parsed.ticket_template,
        decision_line=parsed.decision_line,
        pairwise_question=parsed.pairwise_question,
        framing=parsed.framing,
        answer_orders=parsed.answer_orders,
        answer_words=parsed.answer_words,
        sha256=folder_sha256(folder),
    )


def apply_verdict_rule(rubric: Rubric, failed: list[str] | tuple[str, ...]) -> Verdict:
    """The rubric's explicit rule: enough eliminatory or secondary failures -> unacceptable."""
    eliminatory = sum(1 for c in failed if rubric.criterion(c).kind == "eliminatory")
    secondary = sum(1 for c in failed if rubric.criterion(c).kind == "secondary")
    rule = rubric.verdict_rule
    if eliminatory >= rule.eliminatory_failures or secondary >= rule.secondary_failures:
        return "unacceptable"
    return "acceptable"
