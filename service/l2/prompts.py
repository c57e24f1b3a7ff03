"""Load the L2 prompt data (prompts/): system context, questions, teams, fallback, prompt_sha.

The files are data, not code: this module only parses them into frozen Structs and renders
their few templates. `prompt_sha` hashes exactly the files read here, so a change to any of
them marks results (and calibration artifacts) as coming from another prompt.
"""

from __future__ import annotations

import hashlib
import string
from pathlib import Path
from typing import Literal

import jinja2
import msgspec
import yaml

from service.errors import PromptError

CONTEXT_FILE = "context.md"
QUESTIONS_FILE = "questions.yaml"
TEAMS_FILE = "teams.yaml"
FALLBACK_FILE = "fallback.md"
# The files the model reads: prompt_sha covers exactly these. teams.yaml is not one of them
# (the team follows from the category), so a routing change never orphans a calibration.
L2_FILES = (CONTEXT_FILE, QUESTIONS_FILE, FALLBACK_FILE)

Kind = Literal["choice", "boolean", "score"]
LETTERS = string.ascii_uppercase


class Question(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One closed question. Options are labels; aliases are the one-token answers read."""

    kind: Kind
    text: str
    options: tuple[str, ...] = ()  # choice only; boolean is (yes, no), score is min..max
    min: int = 0  # score only
    max: int = 5  # score only
    permutations: int = 1  # choice only: option orders averaged against position bias
    # The options are listed once in the system context ({{ letters.<name> }}) instead of after
    # every ticket: the context is evaluated once per worker, the question once per ticket.
    options_in_context: bool = False

    def labels(self) -> tuple[str, ...]:
        if self.kind == "boolean":
            return ("yes", "no")
        if self.kind == "score":
            return tuple(str(v) for v in range(self.min, self.max + 1))
        return self.options

    def aliases(self) -> tuple[str, ...]:
        """The answer tokens, in label order: letters for choice/boolean, digits for score."""
        if self.kind == "score":
            return self.labels()
        return tuple(LETTERS[i] for i in range(len(self.labels())))

    def validate(self, name: str) -> None:
        if self.kind == "choice":
            if not 2 <= len(self.options) <= len(LETTERS):
                raise PromptError(f"question {name!r}: a choice needs 2..26 options, got {len(self.options)}")
            if len(set(self.options)) != len(self.options):
                raise PromptError(f"question {name!r}: duplicate options {list(self.options)}")
            if not 1 <= self.permutations <= len(self.options):
                raise PromptError(
                    f"question {name!r}: permutations must be 1..{len(self.options)}, got {self.permutations}"
                )
        elif self.options:
            raise PromptError(f"question {name!r}: options are only for choice questions")
        if self.kind == "score" and not 0 <= self.min < self.max <= 9:
            # Each value must be one digit token; two-digit values would need two tokens.
            raise PromptError(
                f"question {name!r}: a score needs 0 <= min < max <= 9 (one digit each), got {self.min}..{self.max}"
            )
        if self.kind != "choice" and self.permutations != 1:
            raise PromptError(f"question {name!r}: permutations are only for choice questions")
        if self.options_in_context and (self.kind == "score" or self.permutations != 1):
            # A rotated order could not be shown: the context lists one order only.
            raise PromptError(
                f"question {name!r}: options_in_context needs a choice or boolean question with permutations 1"
            )

    def rotated(self, shift: int) -> Question:
        """The same question with its options cyclically shifted (position-bias averaging)."""
        opts = self.options[shift:] + self.options[:shift]
        return msgspec.structs.replace(self, options=opts, permutations=1)


class Framing(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How the state (ticket) and each question are written into the user turn."""

    ticket_intro: str = "<ticket>\n"
    ticket_outro: str = "\n</ticket>\n\nAnswer the question below about the ticket with one letter or digit.\n\n"
    option: str = "{alias}. {label}"
    option_separator: str = "\n"
    choice: str = "{question}\n{options}"
    boolean: str = "{question}\nA. yes\nB. no"
    score: str = "{question} ({min} to {max})"
    # "per_question": each question closes the user turn and opens the assistant's (the chat
    # template's turn end, 5 tokens, paid by every question). "once": the assistant turn is
    # opened once after the ticket and each question is asked inside it, followed by a cue
    # that makes the next token the answer: the turn end is paid once per ticket, the cue per
    # question (docs/l2.md, "Framing").
    turn_end: Literal["per_question", "once"] = "per_question"
    letter_cue: str = "\nAnswer:\n"  # a letter follows a line break
    digit_cue: str = "\nAnswer: "  # a digit follows a space (the tokenizer splits digits)

    def cue(self, q: Question | None) -> str:
        """What follows a question (or the fallback's instruction) before its answer."""
        if self.turn_end == "per_question":
            return ""
        return self.digit_cue if q is not None and q.kind == "score" else self.letter_cue

    def letters(self, q: Question) -> str:
        """The question's options with their aliases, as the question or the context lists them."""
        return self.option_separator.join(
            self.option.format(alias=a, label=lab) for a, lab in zip(q.aliases(), q.labels(), strict=True)
        )

    def render(self, q: Question) -> str:
        """The full question text written after the ticket (before the template's turn end)."""
        if q.options_in_context:
            return q.text
        if q.kind == "choice":
            return self.choice.format(question=q.text, options=self.letters(q))
        if q.kind == "boolean":
            return self.boolean.format(question=q.text)
        return self.score.format(question=q.text, min=q.min, max=q.max)


class Team(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    description: str
    categories: tuple[str, ...]  # the categories this team handles


class _QuestionsFile(msgspec.Struct, forbid_unknown_fields=True):
    framing: Framing
    questions: dict[str, dict]


class _TeamsFile(msgspec.Struct, forbid_unknown_fields=True):
    teams: list[Team]


class Prompts(msgspec.Struct, frozen=True):
    """Everything L2 reads from prompts/, rendered, plus the hash of the files it came from."""

    context: str
    framing: Framing
    questions: dict[str, Question]
    teams: tuple[Team, ...]
    fallback_template: str
    sha: str

    def team_for(self, category: str | None) -> str | None:
        """The team that handles a category (teams.yaml); None when there is no category."""
        for team in self.teams:
            if category in team.categories:
                return team.name
        return None

    def fallback_prompt(self, names: list[str]) -> str:
        """The fallback instruction for the given questions (their labels as enums)."""
        fields = [{"name": n, "text": self.questions[n].text, "labels": self.questions[n].labels()} for n in names]
        return _jinja().from_string(self.fallback_template).render(fields=fields).strip()


def _jinja() -> jinja2.Environment:
    return jinja2.Environment(
        undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False
    )  # plain text prompts, not HTML


def prompt_sha(prompts_dir: str | Path) -> str:
    """sha256 over the L2 prompt files (name and bytes), in a fixed order."""
    digest = hashlib.sha256()
    for name in L2_FILES:
        data = (Path(prompts_dir) / name).read_bytes()
        digest.update(name.encode() + b"\0" + len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def _read(prompts_dir: Path, name: str) -> str:
    path = prompts_dir / name
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PromptError(f"{path}: missing L2 prompt file") from None


def _yaml(prompts_dir: Path, name: str, into: type) -> object:
    try:
        return msgspec.convert(yaml.safe_load(_read(prompts_dir, name)), into)
    except (yaml.YAMLError, msgspec.ValidationError) as exc:
        raise PromptError(f"{prompts_dir / name}: {exc}") from None


def load_prompts(prompts_dir: str | Path) -> Prompts:
    """Parse and validate prompts/; raises PromptError naming the file and field at fault."""
    root = Path(prompts_dir)
    qfile = _yaml(root, QUESTIONS_FILE, _QuestionsFile)
    tfile = _yaml(root, TEAMS_FILE, _TeamsFile)
    assert isinstance(qfile, _QuestionsFile) and isinstance(tfile, _TeamsFile)
    teams = tuple(tfile.teams)
    questions: dict[str, Question] = {}
    for name, raw in qfile.questions.items():
        try:
            question = msgspec.convert(raw, Question)
        except msgspec.ValidationError as exc:
            raise PromptError(f"{root / QUESTIONS_FILE}: question {name!r}: {exc}") from None
        question.validate(name)
        questions[name] = question
    _check_routing(root, teams, questions)
    framing = qfile.framing
    letters = {name: framing.letters(q) for name, q in questions.items() if q.kind != "score"}
    try:
        context = _jinja().from_string(_read(root, CONTEXT_FILE)).render(letters=letters).strip()
    except jinja2.TemplateError as exc:
        raise PromptError(f"{root / CONTEXT_FILE}: {exc}") from None
    # A question whose options are listed nowhere would be answered by letters the model
    # never saw: refuse it at load, naming the file that should list them.
    for name, listed in letters.items():
        if questions[name].options_in_context and listed not in context:
            raise PromptError(
                f"{root / CONTEXT_FILE}: question {name!r} has options_in_context "
                f"but the context does not list {listed!r}"
            )
        if not questions[name].options_in_context and listed not in framing.render(questions[name]):
            raise PromptError(
                f"{root / QUESTIONS_FILE}: question {name!r}: the framing does not "
                f"list its options {listed!r} (or set options_in_context)"
            )
    return Prompts(
        context=context,
        framing=framing,
        questions=questions,
        teams=teams,
        fallback_template=_read(root, FALLBACK_FILE),
        sha=prompt_sha(root),
    )


def _check_routing(root: Path, teams: tuple[Team, ...], questions: dict[str, Question]) -> None:
    """Every category is routed to exactly one team, and no team names an unknown category."""
    categories = questions["category"].options if "category" in questions else ()
    routed: dict[str, str] = {}
    for team in teams:
        for category in team.categories:
            if category not in categories:
                raise PromptError(
                    f"{root / TEAMS_FILE}: team {team.name!r} names the unknown "
                    f"category {category!r} (categories: {list(categories)})"
                )
            if category in routed:
                raise PromptError(
                    f"{root / TEAMS_FILE}: category {category!r} is routed to both "
                    f"{routed[category]!r} and {team.name!r}"
                )
            routed[category] = team.name
    missing = [c for c in categories if c not in routed]
    if missing:
        raise PromptError(f"{root / TEAMS_FILE}: no team handles the categories {missing}")
