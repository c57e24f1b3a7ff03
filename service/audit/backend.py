"""The judge's model access: service.l2's decide() on a resident GGUF, behind `JudgeBackend`.

No runner of our own: every question goes through `decide()` (KV prefix = the rubric context,
evaluated once per run; state = ticket + audited decision, evaluated once per ticket; one suffix
per criterion). Constrained generation goes through decide()'s fallback path with a coverage bar
above 1, which always generates, under the GBNF that lists the criteria before the verdict.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path

import msgspec

from ..errors import JudgeUnavailable
from ..model_fetch import BUNDLED, ModelError, resolve_model_path
from ..settings import Settings


def resolve_judge_model(settings: Settings, choice: str = "") -> tuple[Path, str]:
    """(path, sha256) of the judge GGUF.

    `choice` (the CLI's --judge-model) wins: a bundled size ("0.5b", "1.5b") or a path; then
    TRIAGE_JUDGE_MODEL_PATH; then the classifier's own model (TRIAGE_MODEL_PATH or the bundled
    TRIAGE_MODEL_SIZE).
    """
    if choice in BUNDLED:
        return resolve_model_path("", settings.model_dir, choice)
    path = choice or settings.judge_model_path
    if path:
        if not Path(path).is_file():
            raise ModelError(f"judge model {path}: no such file (--judge-model or TRIAGE_JUDGE_MODEL_PATH)")
        return resolve_model_path(path, settings.model_dir)
    return resolve_model_path(settings.model_path, settings.model_dir, settings.model_size)


@functools.cache
def _word_question_type():
    from ..l2 import Question

    class WordQuestion(Question, frozen=True):
        words: tuple[str, str] = ("yes", "no")

        def aliases(self) -> tuple[str, ...]:
            return self.words

    return WordQuestion


def word_question(text: str, words: tuple[str, str]):
    """A yes/no question read from the next-token probabilities of `words` (for yes, for no)
    instead of option letters. service.l2 reads letters; only the aliases differ here."""
    return _word_question_type()(kind="boolean", text=text, words=words)


class L2Backend:
    """JudgeBackend over one service.l2 Runner."""

    def __init__(
        self,
        runner,
        *,
        model_sha256: str,
        framing: dict[str, str],
        answer_orders: int = 1,
        timeout_s: float = 60.0,
        answer_words: tuple[str, str] | None = None,
    ) -> None:
        from ..l2 import Framing
        from ..l2.decide import check_aliases

        if answer_orders not in (1, 2):
            raise ValueError(f"answer_orders: expected 1 or 2, got {answer_orders}")
        if answer_words is not None:
            # Each word must be one token of this model's vocabulary (AliasError names it):
            # checked here so that a bad word stops the command instead of every case.
            check_aliases(runner, {"words": word_question("?", answer_words)})
        self.answer_words = answer_words
        self.answer_orders = answer_orders
        self.runner = runner
        self.model_sha256 = model_sha256
        self.model_name = Path(runner.model_path).name
        self.framing = msgspec.convert(framing, Framing)
        self.timeout_s = timeout_s

    @classmethod
    def load(
        cls,
        model_path: Path,
        model_sha256: str,
        framing: dict[str, str],
        *,
        n_threads: int,
        n_ctx: int = 4096,
        answer_orders: int = 1,
        timeout_s: float = 60.0,
        answer_words: tuple[str, str] | None = None,
    ) -> L2Backend:
        from ..l2 import Runner

        runner = Runner(model_path, n_threads=n_threads, n_ctx=n_ctx)
        return cls(
            runner,
            model_sha256=model_sha256,
            framing=framing,
            answer_orders=answer_orders,
            timeout_s=timeout_s,
            answer_words=answer_words,
        )

    def _decide(self, context: str, state: str, questions: dict, fallback=None):
        from ..l2 import decide

        decided = decide(
            self.runner,
            state,
            context,
            questions,
            framing=self.framing,
            deadline=time.monotonic() + self.timeout_s,
            fallback=fallback,
        )
        if decided.method == "unavailable":
            raise JudgeUnavailable(decided.reason or "judge model unavailable")
        return decided

    def yes_probabilities(self, context: str, state: str, questions: dict[str, str]) -> dict[str, float]:
        from ..l2 import Question

        if self.answer_words is not None:
            asked = {name: word_question(text, self.answer_words) for name, text in questions.items()}
        elif self.answer_orders == 2:
            # "A. yes / B. no" and "A. no / B. yes", averaged: small models favour the first
            # letter, and this cancels that bias instead of calibrating it away.
            asked = {
                name: Question(kind="choice", text=text, options=("yes", "no"), permutations=2)
                for name, text in questions.items()
            }
        else:
            asked = {name: Question(kind="boolean", text=text) for name, text in questions.items()}
        decided = self._decide(context, state, asked)
        return {name: float(decided.answers[name].probabilities["yes"]) for name in questions}

    def choose(self, context: str, state: str, question: str, options: tuple[str, ...]) -> dict[str, float]:
        from ..l2 import Question

        decided = self._decide(context, state, {"choice": Question(kind="choice", text=question, options=options)})
        return dict(decided.answers["choice"].probabilities)

    def generate_json(self, context: str, state: str, instructions: str, schema: dict) -> dict:
        """Constrained generation of {criterion: yes|no, ..., verdict: ...} in schema order.

        decide() first reads every question from the logits (they share the KV prefix, so this
        costs one suffix each), then its fallback generates all of them under a grammar because
        no coverage can reach the bar of 2. Malformed output leaves the fields out: the judge
        then counts the eliminatory criteria as failed.
        """
        from ..l2.decide import Fallback
        from ..l2.prompts import Question

        asked = {}
        for name, spec in schema["properties"].items():
            labels, text = tuple(spec["enum"]), spec.get("description", name)
            if labels == ("yes", "no"):
                asked[name] = Question(kind="boolean", text=text)
            else:
                asked[name] = Question(kind="choice", text=text, options=labels)
        fallback = Fallback(names=tuple(asked), min_coverage=2.0, instruction=lambda names: instructions)
        decided = self._decide(context, state, asked, fallback)
        return {name: answer.chosen for name, answer in decided.answers.items() if answer.method == "generated"}
