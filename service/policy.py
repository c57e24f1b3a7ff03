"""The risk policy's vocabulary, in one place: levels, red flags, categories, teams.

Levels and red flags are types (service/results.py); categories and teams are the options the
model is asked for (prompts/questions.yaml, prompts/teams.yaml), so an operator, a bench run
and the audit name exactly the categories and teams the classifier can answer.
"""

from __future__ import annotations

import functools
from pathlib import Path

import msgspec
import yaml

from .results import LEVELS, RED_FLAGS
from .settings import PROJECT_ROOT

DEFAULT_PROMPTS_DIR = str(PROJECT_ROOT / "prompts")


class Vocabulary(msgspec.Struct, frozen=True):
    levels: tuple[str, ...]
    flags: tuple[str, ...]
    categories: tuple[str, ...]
    teams: tuple[str, ...]


class _Question(msgspec.Struct):
    options: list[str] = []


class _Questions(msgspec.Struct):
    questions: dict[str, _Question]


class _Team(msgspec.Struct):
    name: str


class _Teams(msgspec.Struct):
    teams: list[_Team]


def _read(path: Path, into: type) -> object:
    return msgspec.convert(yaml.safe_load(path.read_text(encoding="utf-8")), into, strict=False, from_attributes=False)


@functools.cache
def vocabulary(prompts_dir: str = DEFAULT_PROMPTS_DIR) -> Vocabulary:
    """The vocabulary of the prompts in `prompts_dir` (TRIAGE_PROMPTS_DIR); read once."""
    root = Path(prompts_dir)
    questions = _read(root / "questions.yaml", _Questions)
    teams = _read(root / "teams.yaml", _Teams)
    assert isinstance(questions, _Questions) and isinstance(teams, _Teams)
    return Vocabulary(
        levels=tuple(LEVELS),
        flags=tuple(RED_FLAGS),
        categories=tuple(questions.questions["category"].options),
        teams=tuple(team.name for team in teams.teams),
    )
