"""Cross-ticket batching, measured: k tickets' prefixes and questions in the same decode calls.

A worker with a backlog could hand the model k tickets at once (Runner.open_and_ask_many). This
measures what that buys on this machine before the worker is allowed to do it: tickets per
minute with a saturated backlog at each k, the time a lone ticket takes, and how far the
answers move against k = 1 (llama.cpp's batch shape changes the floating-point sums a little).
The worker batches only if the best k clears `MIN_GAIN`.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from service.l2.classifier import Classifier
from service.l2.decide import Prepared, prepare, read_answers
from service.l2.runner import Runner

KS = (1, 2, 4, 8)
MIN_GAIN = 0.15  # the bar: ship only for at least 15 % more tickets per minute


def _probabilities(p: Prepared, questions: dict, readouts: dict) -> dict[tuple[str, str], float]:
    answers, _ = read_answers(p, questions, readouts)
    return {(q, lab): pr for q, a in answers.items() for lab, pr in (a.probabilities or {}).items()}


def _pass(runner: Runner, prepared: list[Prepared], k: int) -> tuple[float, list[list]]:
    """Every ticket once, k at a time: (seconds, readouts per ticket)."""
    readouts: list = []
    started = time.perf_counter()
    for i in range(0, len(prepared), k):
        group = prepared[i : i + k]
        out = runner.open_and_ask_many(group[0].prefix, [(p.tokens, p.suffixes) for p in group])
        readouts += [r for _, r in out]
    return time.perf_counter() - started, readouts


def measure(settings: Any, texts: list[str], ks: tuple[int, ...] = KS, rounds: int = 2) -> dict:
    """Tickets per minute at each k (a pass over every text per k and round; rounds alternate
    the order of k so that a drift in the machine's speed does not favour one k)."""
    from service.calibration.loader import load_latest

    # As a worker serves: with the artifact it would load, so the layers its heads and gate read
    # are read here too.
    classifier = Classifier.from_settings(settings)
    classifier.set_calibrator(
        load_latest(settings.calibration_dir, classifier.model_info.sha256, classifier.prompt_sha).calibrator
    )
    questions, prompts, capture = classifier.questions, classifier.prompts, classifier.runner.capture
    model_path = classifier.runner.model_path
    per_ticket = len(prepare(classifier.runner, texts[0], prompts.context, questions, prompts.framing).suffixes)
    classifier.close()
    # One runner for every k, with room for the largest batch: sequences and context.
    runner = Runner(
        model_path,
        n_threads=settings.n_threads,
        n_ctx=max(settings.n_ctx, 1024 * max(ks)),
        n_seq_max=max(32, per_ticket * max(ks) + 4),
        capture=capture,
    )
    prepared = [prepare(runner, t, prompts.context, questions, prompts.framing) for t in texts]
    _pass(runner, prepared[:2], 1)  # warm-up: first-call allocations
    seconds: dict[int, list[float]] = {k: [] for k in ks}
    reference: list[dict] = []
    max_diff: dict[int, float] = {k: 0.0 for k in ks}
    for r in range(rounds):
        for k in ks if r % 2 == 0 else tuple(reversed(ks)):
            took, readouts = _pass(runner, prepared, k)
            seconds[k].append(took)
            probs = [_probabilities(p, questions, ro) for p, ro in zip(prepared, readouts, strict=True)]
            if k == 1 and not reference:
                reference = probs
            elif reference:
                diff = max(abs(a[key] - b[key]) for a, b in zip(probs, reference, strict=True) for key in a)
                max_diff[k] = max(max_diff[k], diff)
    lone = []
    for p in prepared:
        started = time.perf_counter()
        runner.open_and_ask_many(p.prefix, [(p.tokens, p.suffixes)])
        lone.append((time.perf_counter() - started) * 1000)
    runner.close()
    n = len(prepared)
    per_minute = {k: [60 * n / s for s in seconds[k]] for k in ks}
    mean = {k: statistics.fmean(v) for k, v in per_minute.items()}
    best = max(ks, key=lambda k: mean[k])
    gain = mean[best] / mean[1] - 1
    return {
        "tickets": n,
        "questions_per_ticket": per_ticket,
        "rounds": rounds,
        "tickets_per_minute": {str(k): [round(x, 2) for x in v] for k, v in per_minute.items()},
        "mean_tickets_per_minute": {str(k): round(v, 2) for k, v in mean.items()},
        "ratio_to_k1": {str(k): round(mean[k] / mean[1], 3) for k in ks},
        "max_probability_difference_vs_k1": {str(k): float(f"{max_diff[k]:.3g}") for k in ks if k != 1},
        "lone_ticket_p50_ms": round(statistics.median(lone), 1),
        "best_k": best,
        "gain_at_best_k": round(gain, 3),
        "min_gain_to_ship": MIN_GAIN,
        "decision": (
            f"ship adaptive batching up to k={best}"
            if gain >= MIN_GAIN
            else f"not shipped: the best k ({best}) gives {gain:+.0%}, under the {MIN_GAIN:.0%} bar"
        ),
    }
