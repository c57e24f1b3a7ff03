"""The judge: checks one triage decision against the rubric, criterion by criterion, then applies
the rubric's verdict rule. Verdicts are cached by judge model, rubric, method, ticket, decision.

Two methods, same rubric:
- "logits" (default): one boolean question per applicable criterion, answered from next-token
  probabilities on a KV prefix shared by all questions (the rubric context); a criterion fails
  when P(its failing answer) >= threshold. Every criterion is evaluated before the verdict, and
  the verdict is the rubric's rule, never the model's opinion.
- "generated": one constrained JSON generation whose schema puts every criterion before a
  "verdict" field; the verdict kept is still the rule's, the model's own is recorded beside it.

The model access is a `JudgeBackend` (service/audit/backend.py adapts service.l2), so the
judge's logic and cache are exercised without a model.
"""

from __future__ import annotations

import hashlib
import time
from typing import Literal, Protocol

import msgspec

from ..results import Level
from .rubric import Rubric, Verdict, apply_verdict_rule

Method = Literal["logits", "generated"]
METHODS: tuple[Method, ...] = ("logits", "generated")


class JudgeBackend(Protocol):
    """What the judge needs from a model; one instance owns one loaded GGUF."""

    model_sha256: str
    model_name: str

    def yes_probabilities(self, context: str, state: str, questions: dict[str, str]) -> dict[str, float]:
        """P(yes) for each yes/no question about `state`, all sharing the `context` prefix.
        Every method raises JudgeUnavailable when the model fails or times out."""
        ...

    def choose(self, context: str, state: str, question: str, options: tuple[str, ...]) -> dict[str, float]:
        """Probabilities over `options` (single-token answers) for one closed question."""
        ...

    def generate_json(self, context: str, state: str, instructions: str, schema: dict) -> dict:
        """One JSON object generated under a grammar built from `schema`."""
        ...


class AuditedDecision(msgspec.Struct, frozen=True):
    """What the judge checks: a ticket and the decision the service took on it."""

    text: str
    level: Level
    category: str | None = None
    urgency: int | None = None


class CriterionResult(msgspec.Struct, frozen=True):
    id: str
    kind: str
    applicable: bool  # False: cannot fail at this level, not asked
    failed: bool
    p_fail: float | None = None  # logits: probability of the failing answer
    answer: str | None = None  # generated: "yes" or "no"


class JudgeVerdict(msgspec.Struct, frozen=True):
    verdict: Verdict
    failed: list[str]
    criteria: list[CriterionResult]
    method: Method
    judge_model_sha256: str
    rubric_sha256: str
    model_verdict: str | None = None  # generated: the verdict field the model wrote
    elapsed_ms: float = 0.0
    cached: bool = False


class VerdictCache(Protocol):
    def get(self, key: str) -> bytes | None: ...
    def put(self, key: str, value: bytes) -> None: ...


class MemoryCache:
    """A dict-backed cache (calibration runs, tests); service.store.RedisVerdictCache is the shared one."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def get(self, key: str) -> bytes | None:
        return self.data.get(key)

    def put(self, key: str, value: bytes) -> None:
        self.data[key] = value


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def verdict_cache_key(judge_sha: str, rubric_sha: str, method: str, decision: AuditedDecision) -> str:
    """sha256 of judge model, rubric, method, ticket text hash and the audited decision.

    The audited level alone is not enough: the secondary criteria read the category and urgency
    given, so they are part of the decision the verdict is about.
    """
    parts = [
        "v1",
        judge_sha,
        rubric_sha,
        method,
        text_sha256(decision.text),
        decision.level,
        decision.category or "",
        "" if decision.urgency is None else str(decision.urgency),
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


_encoder = msgspec.json.Encoder()
_verdict_decoder = msgspec.json.Decoder(JudgeVerdict)


class Judge:
    """Judges decisions with one backend, one rubric and one method."""

    def __init__(
        self,
        backend: JudgeBackend,
        rubric: Rubric,
        method: Method = "logits",
        cache: VerdictCache | None = None,
        threshold: float = 0.5,
    ) -> None:
        if method not in METHODS:
            raise ValueError(f"judge method: expected one of {METHODS}, got {method!r}")
        self.backend = backend
        self.rubric = rubric
        self.method = method
        self.cache = cache
        self.threshold = threshold

    @property
    def model_sha256(self) -> str:
        return self.backend.model_sha256

    def judge(self, decision: AuditedDecision) -> JudgeVerdict:
        key = verdict_cache_key(self.model_sha256, self.rubric.sha256, self.method, decision)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                return msgspec.structs.replace(_verdict_decoder.decode(hit), cached=True)
        started = time.perf_counter()
        if self.method == "logits":
            results, model_verdict = self._by_logits(decision), None
        else:
            results, model_verdict = self._by_generation(decision)
        failed = [r.id for r in results if r.failed]
        verdict = JudgeVerdict(
            verdict=apply_verdict_rule(self.rubric, failed),
            failed=failed,
            criteria=results,
            method=self.method,
            judge_model_sha256=self.model_sha256,
            rubric_sha256=self.rubric.sha256,
            model_verdict=model_verdict,
            elapsed_ms=round((time.perf_counter() - started) * 1000, 1),
        )
        if self.cache is not None:
            self.cache.put(key, _encoder.encode(verdict))
        return verdict

    def _state(self, decision: AuditedDecision) -> str:
        return self.rubric.render_decision(decision.text, decision.level, decision.category, decision.urgency)

    def _by_logits(self, decision: AuditedDecision) -> list[CriterionResult]:
        applicable = self.rubric.applicable(decision.level)
        p_yes = self.backend.yes_probabilities(
            self.rubric.context, self._state(decision), {c.id: c.question for c in applicable}
        )
        results = []
        for criterion in self.rubric.criteria:
            if criterion not in applicable:
                results.append(CriterionResult(id=criterion.id, kind=criterion.kind, applicable=False, failed=False))
                continue
            p_yes_c = p_yes[criterion.id]
            # Rounded before comparing, so that the stored probability and `failed` agree.
            p_fail = round(p_yes_c if criterion.fails_if == "yes" else 1 - p_yes_c, 4)
            results.append(
                CriterionResult(
                    id=criterion.id,
                    kind=criterion.kind,
                    applicable=True,
                    failed=p_fail >= self.threshold,
                    p_fail=p_fail,
                )
            )
        return results

    def generation_schema(self, level: str) -> tuple[str, dict]:
        """Instructions and JSON schema: one yes/no per applicable criterion, then the verdict."""
        applicable = self.rubric.applicable(level)
        lines = [f'"{c.id}": {c.question}' for c in applicable]
        rule = self.rubric.verdict_rule
        instructions = (
            'Answer every question with "yes" or "no", in this order, then give the verdict:\n'
            + "\n".join(lines)
            + f"\nVerdict rule: unacceptable if {rule.eliminatory_failures} eliminatory or "
            f"{rule.secondary_failures} secondary criteria fail (eliminatory: "
            + ", ".join(c.id for c in applicable if c.kind == "eliminatory")
            + "), else acceptable. Reply with one JSON object."
        )
        properties: dict[str, dict] = {
            c.id: {"type": "string", "enum": ["yes", "no"], "description": c.question} for c in applicable
        }
        properties["verdict"] = {
            "type": "string",
            "enum": ["acceptable", "unacceptable"],
            "description": "The verdict under the rule above.",
        }
        schema = {
            "type": "object",
            "properties": properties,
            "required": list(properties),
            "additionalProperties": False,
        }
        return instructions, schema

    def _by_generation(self, decision: AuditedDecision) -> tuple[list[CriterionResult], str]:
        instructions, schema = self.generation_schema(decision.level)
        reply = self.backend.generate_json(self.rubric.context, self._state(decision), instructions, schema)
        results = []
        for criterion in self.rubric.criteria:
            if criterion.id not in schema["properties"]:
                results.append(CriterionResult(id=criterion.id, kind=criterion.kind, applicable=False, failed=False))
                continue
            answer = str(reply.get(criterion.id, "")).lower()
            # A missing or malformed answer on an eliminatory criterion counts as failed: the
            # audit errs towards showing a person, like the service itself.
            failed = answer == criterion.fails_if or (answer not in ("yes", "no") and criterion.kind == "eliminatory")
            results.append(
                CriterionResult(
                    id=criterion.id, kind=criterion.kind, applicable=True, failed=failed, answer=answer or None
                )
            )
        return results, str(reply.get("verdict", ""))


Preference = Literal["a", "b", "tie"]


class Comparison(msgspec.Struct, frozen=True):
    preferred: Preference
    a_first: dict[str, float]  # P(decision 1), P(decision 2) with A shown first
    b_first: dict[str, float]  # the same with B shown first


def _describe(answer: AuditedDecision | str) -> str:
    if isinstance(answer, str):
        return answer
    return f"level {answer.level}, category {answer.category}, urgency {answer.urgency}"


def compare(judge: Judge, ticket: str, answer_a: AuditedDecision | str, answer_b: AuditedDecision | str) -> Comparison:
    """Which of two answers on one ticket is better, asked in both orders.

    Judges prefer a position (often the first); asking A-then-B and B-then-A and keeping only a
    preference that survives the swap cancels that bias: a disagreement between orders is a tie.
    """
    rubric = judge.rubric
    state = rubric.render_ticket(ticket)
    options = ("1", "2")

    def ask(first: str, second: str) -> dict[str, float]:
        question = rubric.pairwise_question.format(first=first, second=second)
        return judge.backend.choose(rubric.context, state, question, options)

    a_first = ask(_describe(answer_a), _describe(answer_b))
    b_first = ask(_describe(answer_b), _describe(answer_a))
    pick_a_first = "a" if a_first["1"] >= a_first["2"] else "b"
    pick_b_first = "b" if b_first["1"] >= b_first["2"] else "a"
    preferred: Preference = pick_a_first if pick_a_first == pick_b_first else "tie"
    return Comparison(preferred=preferred, a_first=a_first, b_first=b_first)
