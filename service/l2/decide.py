"""decide(): closed questions about a text answered from next-token logits on the resident model.

Generic on purpose: the classifier asks the risk questions about a ticket with the policy as
context; the audit asks rubric criteria (booleans) about a ticket and its answer with the rubric
as context. The same three cache levels apply (see runner.py): the context is evaluated once,
the state once per call, each question adds its suffix only.

decide() never raises for a model failure: it returns method "unavailable" with a reason, and
callers decide what that means (the classifier: yellow). Alias problems are configuration
errors and surface at start-up through `check_aliases`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec
import numpy as np
import structlog

from service.l2.answers import (
    answer_from_logprobs,
    generated_answer,
    log_softmax,
    merge_permutations,
)
from service.l2.prompts import Framing, Question
from service.l2.runner import Capture, DeadlineExceeded, Prefix, Readout, Runner
from service.results import Answer

log = structlog.get_logger()

TRUNCATION_MARK = "\n[…]\n"
FALLBACK_MAX_TOKENS = 48


class Calibrator(Protocol):
    """What a calibration artifact offers (service/calibration): transform answers, thresholds."""

    version: str
    thresholds: Any  # service.l2.decision.Thresholds
    feature_names: frozenset[str]  # the hidden-state vectors its heads read

    def apply(self, answers: dict[str, Answer], features: dict[str, np.ndarray]) -> dict[str, Answer]: ...

    def green_gate(self, features: dict[str, np.ndarray]) -> tuple[bool, float | None] | None: ...


@dataclass(frozen=True)
class Fallback:
    """Constrained generation when the letters carry too little mass on key questions."""

    names: tuple[str, ...]  # questions checked and, on low coverage, generated
    min_coverage: float
    instruction: Callable[[list[str]], str]  # the prompt text for these questions


@dataclass
class Decided:
    method: str  # logits | generated | unavailable
    answers: dict[str, Answer]
    calibrated: bool = False
    calibration_version: str | None = None
    tokens_evaluated: int = 0  # state + question suffixes (+ fallback); never the context
    timings: dict[str, float] = field(default_factory=dict)
    features: dict[str, np.ndarray] = field(default_factory=dict)  # hidden state per question
    variants: dict[str, Answer] = field(default_factory=dict)  # per option order, uncalibrated
    suffix_tokens: dict[str, int] = field(default_factory=dict)
    truncated: bool = False
    reason: str | None = None
    error: str | None = None  # "timeout" or "error" when unavailable
    # The calibration's green gate: (green allowed, distance to the labelled greens); None when
    # the artifact has no gate or the answers were not calibrated.
    gate: tuple[bool, float | None] | None = None


def variant_names(name: str, question: Question) -> list[tuple[str, Question]]:
    """The question as asked: one entry, or k option orders (cyclic shifts) named name@shift."""
    if question.kind != "choice" or question.permutations <= 1:
        return [(name, question)]
    n = len(question.options)
    shifts = sorted({round(i * n / question.permutations) % n for i in range(question.permutations)})
    return [(name if s == 0 else f"{name}@{s}", question.rotated(s)) for s in shifts]


def alias_ids(runner: Runner, question: Question) -> tuple[int, ...]:
    key = ("alias", question.aliases())
    if key not in runner.memo:
        runner.memo[key] = tuple(runner.alias_token(a) for a in question.aliases())
    return runner.memo[key]


def check_aliases(runner: Runner, questions: dict[str, Question]) -> None:
    """Every alias of every question is one token; AliasError names the first that is not."""
    for name, question in questions.items():
        for variant, q in variant_names(name, question):
            ids = alias_ids(runner, q)
            if len(set(ids)) != len(ids):
                raise ValueError(f"question {variant!r}: two aliases share one token")


def prefix_layout(runner: Runner, context: str, framing: Framing) -> tuple[list[int], str, str]:
    """(prefix tokens, text between state and question, template tail) for a context."""
    key = ("layout", context, framing)
    if key not in runner.memo:
        head, between, tail = runner.template.layout(context, framing.ticket_intro, framing.ticket_outro)
        if framing.turn_end == "once":
            between, tail = between + tail, ""
        runner.memo[key] = (runner.prompt_tokens(head), between, tail)
    return runner.memo[key]


def _suffix(runner: Runner, text: str, tail: str) -> list[int]:
    key = ("suffix", text, tail)
    if key not in runner.memo:
        runner.memo[key] = runner.tokenize(text) + runner.tokenize(tail, special=True)
    return runner.memo[key]


def _fit(tokens: list[int], budget: int, mark: list[int]) -> tuple[list[int], bool]:
    """Keep the ticket whole if it fits; else its head (3/4) and tail (1/4) around a mark."""
    if len(tokens) <= budget:
        return tokens, False
    room = max(budget - len(mark), 2)
    head = room * 3 // 4
    return tokens[:head] + mark + tokens[len(tokens) - (room - head) :], True


def fallback_grammar(questions: dict[str, Question], names: list[str]) -> str:
    """GBNF for {"name": "label", ...}: every value an enum of the question's labels."""
    rules = []
    parts = []
    for i, name in enumerate(names):
        labels = " | ".join(_gbnf_str(f'"{lab}"') for lab in questions[name].labels())
        rules.append(f"v{i} ::= {labels}")
        sep = '"{"' if i == 0 else '", "'
        parts.append(f'{sep} {_gbnf_str(chr(34) + name + chr(34))} ": " v{i}')
    root = "root ::= " + " ".join(parts) + ' "}"'
    return "\n".join([root, *rules]) + "\n"


def apply_calibration(
    answers: dict[str, Answer], features: dict[str, np.ndarray], calibrator: Calibrator | None
) -> tuple[dict[str, Answer], bool, str | None, tuple[bool, float | None] | None, str | None]:
    """(answers, calibrated, version, green gate, failure): the artifact applied to the logits
    answers. A broken artifact must not stop triage: the answers stay raw and `failure` says why."""
    if calibrator is None:
        return answers, False, None, None, None
    try:
        logits_answers = {k: a for k, a in answers.items() if a.method == "logits"}
        out = {**answers, **calibrator.apply(logits_answers, features)}
        return out, True, calibrator.version, calibrator.green_gate(features), None
    except Exception as exc:
        log.exception("l2_calibration_failed")
        return answers, False, None, None, f"calibration failed: {exc}"


def hidden_features(readouts: dict[str, Readout], pooled: dict[int, np.ndarray]) -> dict[str, np.ndarray]:
    """Every hidden-state vector of one ticket, by the name a calibration head asks for:
    `<question>` the final layer at its answer, `<question>@l<N>` layer N there, and
    `ticket@l<N>` layer N averaged over the ticket's tokens."""
    features = {v: r.hidden for v, r in readouts.items()}
    for v, r in readouts.items():
        for layer, vector in r.layers.items():
            features[f"{v}@l{layer}"] = vector
    for layer, vector in pooled.items():
        features[f"ticket@l{layer}"] = vector
    return features


def capture_for(feature_names: Iterable[str]) -> Capture:
    """The layers a runner must read to produce these feature names (see hidden_features)."""
    pooled: set[int] = set()
    answers: set[int] = set()
    for name in feature_names:
        base, sep, layer = name.partition("@l")
        if not sep:
            continue
        if not layer.isdigit():
            raise ValueError(f"feature {name!r}: expected <question>@l<N> or ticket@l<N>")
        (pooled if base == "ticket" else answers).add(int(layer))
    return Capture(pooled=tuple(sorted(pooled)), answers=tuple(sorted(answers)))


def _gbnf_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass
class Prepared:
    """One text, ready for the runner: the cached prefix, the ticket's tokens, each question's
    suffix (permutation variants apart) and the alias token ids its answer is read from."""

    prefix: Prefix
    tokens: list[int]  # the (possibly truncated) text and the turn's outro
    suffixes: dict[str, list[int]]
    asked: dict[str, Question]  # variant name -> question as asked
    ids: dict[str, tuple[int, ...]]
    truncated: bool
    tail: str


def prepare(
    runner: Runner,
    state: str,
    context: str,
    questions: dict[str, Question],
    framing: Framing,
    fallback: Fallback | None = None,
) -> Prepared:
    """Tokenise a text and its questions; evaluate the context prefix if it is not cached."""
    prefix_tokens, between, tail = prefix_layout(runner, context, framing)
    prefix = runner.prefix(prefix_tokens)  # evaluated once per context (level 1)
    asked: dict[str, Question] = {}
    for name, question in questions.items():
        for variant, q in variant_names(name, question):
            asked[variant] = q
    suffixes = {v: _suffix(runner, framing.render(q), tail + framing.cue(q)) for v, q in asked.items()}
    ids = {v: alias_ids(runner, q) for v, q in asked.items()}

    # Room for the ticket: the context minus every cached prefix and the widest branch phase.
    think = 8 if runner.think_token is not None else 0
    branch_need = sum(len(s) + think for s in suffixes.values())
    fb_need = 0
    if fallback is not None:
        fb_need = len(_suffix(runner, fallback.instruction(list(fallback.names)), tail + framing.cue(None)))
        fb_need += FALLBACK_MAX_TOKENS
    outro = runner.tokenize(between, special=True)  # holds the turn end when framing.turn_end is "once"
    budget = runner.n_ctx - runner.cached_prefix_tokens() - max(branch_need, fb_need) - len(outro) - 4
    if budget < 16:
        raise RuntimeError(
            f"n_ctx={runner.n_ctx} leaves no room for the text (prefix {prefix.n}, questions {branch_need})"
        )
    ticket, truncated = _fit(runner.tokenize(state), budget, runner.tokenize(TRUNCATION_MARK))
    return Prepared(prefix, ticket + outro, suffixes, asked, ids, truncated, tail + framing.cue(None))


def read_answers(
    p: Prepared, questions: dict[str, Question], readouts: dict[str, Readout]
) -> tuple[dict[str, Answer], dict[str, Answer]]:
    """Each question's answer from its readouts (option orders merged), and the per-order ones."""
    raw: dict[str, Answer] = {}
    for v, r in readouts.items():
        lp = log_softmax(r.logits)
        raw[v] = answer_from_logprobs(
            p.asked[v], {lab: float(lp[i]) for lab, i in zip(p.asked[v].labels(), p.ids[v], strict=True)}
        )
    answers: dict[str, Answer] = {}
    variants: dict[str, Answer] = {}
    for name, question in questions.items():
        parts = [raw[v] for v, _ in variant_names(name, question)]
        if len(parts) > 1:
            variants.update({v: raw[v] for v, _ in variant_names(name, question)})
        answers[name] = merge_permutations(question, parts)
    return answers, variants


def decide(
    runner: Runner,
    state: str,
    context: str,
    questions: dict[str, Question],
    *,
    framing: Framing | None = None,
    mode: str = "parallel",
    deadline: float | None = None,
    calibrator: Calibrator | None = None,
    fallback: Fallback | None = None,
) -> Decided:
    """Answer every question about `state` with `context` as the system turn. Never raises
    for a model failure or timeout: method "unavailable" with a reason instead."""
    framing = framing or Framing()
    started = time.perf_counter()
    timings: dict[str, float] = {}
    with runner.lock:
        try:
            return _decide(
                runner, state, context, questions, framing, mode, deadline, calibrator, fallback, timings, started
            )
        except DeadlineExceeded as exc:
            reason, error = f"timeout: {exc}", "timeout"
        except Exception as exc:  # a model or library failure must not take the caller down
            log.exception("l2_decide_failed")
            reason, error = f"model error: {type(exc).__name__}: {exc}", "error"
        finally:
            runner.close_state()
    timings["total_ms"] = (time.perf_counter() - started) * 1000
    return Decided(method="unavailable", answers={}, timings=timings, reason=reason, error=error)


def _decide(
    runner: Runner,
    state: str,
    context: str,
    questions: dict[str, Question],
    framing: Framing,
    mode: str,
    deadline: float | None,
    calibrator: Calibrator | None,
    fallback: Fallback | None,
    timings: dict[str, float],
    started: float,
) -> Decided:
    t0 = time.perf_counter()
    p = prepare(runner, state, context, questions, framing, fallback)
    timings["prefix_ms"] = (time.perf_counter() - t0) * 1000

    t0 = time.perf_counter()
    if mode == "fused":  # levels 2 and 3 in the same decode calls (see Runner.open_and_ask)
        st, readouts = runner.open_and_ask(p.prefix, p.tokens, p.suffixes, deadline)
        timings["state_and_questions_ms"] = (time.perf_counter() - t0) * 1000
    else:
        st = runner.open_state(p.prefix, p.tokens, deadline)  # level 2
        timings["state_ms"] = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        readouts = runner.ask(st, p.suffixes, mode=mode, deadline=deadline)  # level 3
        timings["questions_ms"] = (time.perf_counter() - t0) * 1000

    features = hidden_features(readouts, st.pooled)
    answers, variants = read_answers(p, questions, readouts)
    tokens = st.tokens_evaluated + sum(r.tokens for r in readouts.values())
    truncated, tail = p.truncated, p.tail

    method = "logits"
    reason = None
    if fallback is not None:
        low = [n for n in fallback.names if n in answers and (answers[n].coverage or 0.0) < fallback.min_coverage]
        if low:
            t0 = time.perf_counter()
            names = [n for n in fallback.names if n in questions]
            suffix = _suffix(runner, fallback.instruction(names), tail)
            text, n_gen = runner.generate(
                st, suffix, fallback_grammar(questions, names), max_tokens=FALLBACK_MAX_TOKENS, deadline=deadline
            )
            tokens += n_gen
            timings["fallback_ms"] = (time.perf_counter() - t0) * 1000
            method = "generated"
            coverage = ", ".join(f"{n} {answers[n].coverage:.2f}" for n in low)
            reason = f"coverage below {fallback.min_coverage:.2f} ({coverage}): generated"
            try:
                parsed = msgspec.json.decode(text.encode())
                for n in names:
                    answers[n] = generated_answer(questions[n], str(parsed[n]))
            except (msgspec.DecodeError, KeyError, TypeError, ValueError):
                for n in names:
                    answers.pop(n, None)  # no answer at all: the verdict falls to yellow
                reason += f"; output malformed: {text[:80]!r}"

    answers, calibrated, version, gate, failure = apply_calibration(answers, features, calibrator)
    if failure:
        reason = (reason + "; " if reason else "") + failure
    timings["total_ms"] = (time.perf_counter() - started) * 1000
    return Decided(
        method=method,
        answers=answers,
        calibrated=calibrated,
        calibration_version=version,
        tokens_evaluated=tokens,
        timings=timings,
        features=features,
        variants=variants,
        suffix_tokens={v: r.tokens for v, r in readouts.items()},
        truncated=truncated,
        reason=reason,
        gate=gate,
    )
