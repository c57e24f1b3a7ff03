"""L2 benchmark: the logits path against the old JSON-generation path, same model, same tickets.

`run(settings, tickets)` returns the `l2` section of the bench report. Per ticket, in one run
and interleaved (so drift in machine load hits every variant alike), it times:
- logits: `Classifier.classify` with every question (the serving path);
- the other KV-sharing modes: "parallel" (seq_cp + one batch) or "fused" (ticket and
  question bodies in one batch), and "rewind" (one question after the other, seq_rm back),
  with the largest probability difference between the served mode and rewind;
- first question: the ticket and the risk question only; the marginal cost of the others;
- without layers: the raw path (no artifact, no intermediate layer read), so the cost of the layers
  the calibration's heads and green gate read (the features);
- json: the old path, a JSON object (category, risk, confidence, reasoning) generated under a
  grammar after the same cached system context and ticket.
"""

from __future__ import annotations

import resource
import statistics
import time
from typing import Any

from service.l2.classifier import FALLBACK_QUESTIONS, Classifier
from service.l2.decide import Fallback, decide, prefix_layout
from service.l2.runner import Capture
from service.policy import vocabulary
from service.results import ticket_text

# The old path's instruction and grammar, reproduced here for measurement only.
_VOCABULARY = vocabulary()
JSON_INSTRUCTION = (
    "Classify the ticket above under the policy. Reply with one JSON object: "
    f'{{"category": one of {", ".join(_VOCABULARY.categories)}; '
    f'"risk": {", ".join(_VOCABULARY.levels[:-1])} or {_VOCABULARY.levels[-1]}; '
    '"confidence": a number from 0 to 1; "reasoning": one short sentence}.'
)


def _alternatives(words: tuple[str, ...]) -> str:
    return " | ".join(f'"{word}"' for word in words)


JSON_GRAMMAR = (
    r"""root ::= ( "{\"category\": \"" cat "\", \"risk\": \"" risk "\", "
         "\"confidence\": " conf ", \"reasoning\": \"" reason "\"}" )
"""
    f"cat ::= {_alternatives(_VOCABULARY.categories)}\n"
    f"risk ::= {_alternatives(_VOCABULARY.levels)}\n"
    r"""conf ::= "0." [0-9] [0-9]? | "1.0" | "1"
reason ::= [^"\\\n]*
"""
)
JSON_MAX_TOKENS = 128


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _texts(tickets: list[Any]) -> list[str]:
    out = []
    for t in tickets:
        if isinstance(t, str):
            out.append(t)
        elif isinstance(t, dict):
            out.append(ticket_text(t.get("subject"), t["body"]))
        else:
            out.append(ticket_text(getattr(t, "subject", None), t.body))
    return out


def run(settings: Any, tickets: list[Any], classifier: Classifier | None = None, quiet: bool = False) -> dict:
    """The `l2` section of the bench report (times in ms)."""
    from ..progress import progress

    texts = _texts(tickets)
    if classifier is None:
        classifier = Classifier.from_settings(settings)
        # as a worker serves: with the artifact it would load, so the layers its heads and
        # green gate read are read here too (the `layer_features` cost)
        from service.calibration.loader import load_latest

        classifier.set_calibrator(
            load_latest(settings.calibration_dir, classifier.model_info.sha256, classifier.prompt_sha).calibrator
        )
    runner = classifier.runner
    prompts = classifier.prompts
    questions = classifier.questions
    system_tokens = classifier.system_tokens
    prefix_tokens_at_start = runner.stats.prefix_tokens
    fallback = Fallback(
        names=FALLBACK_QUESTIONS, min_coverage=classifier.thresholds.min_coverage, instruction=prompts.fallback_prompt
    )

    def timed(text: str, qs: dict, mode: str = "parallel"):
        started = time.perf_counter()
        d = decide(runner, text, prompts.context, qs, framing=prompts.framing, mode=mode, fallback=fallback)
        return (time.perf_counter() - started) * 1000, d

    classifier.classify(texts[0])  # warm-up, not counted (first-call allocations)
    logits_ms, rewind_ms, other_ms, first_ms, no_layers_ms, json_ms = [], [], [], [], [], []
    json_answers_ms: list[float] = []
    tokens, ticket_tokens, json_tokens, max_diff = [], [], [], []
    first_only = {"risk": questions["risk"]}
    served_capture = runner.capture
    # The old path answers risk and category (plus free text): the like-for-like comparison.
    json_answers = {k: questions[k] for k in ("risk", "category")}
    for text in progress(texts, desc="bench l2", unit="ticket", quiet=quiet):
        started = time.perf_counter()
        out = classifier.classify(text)
        logits_ms.append((time.perf_counter() - started) * 1000)
        tokens.append(out.result.tokens_evaluated)
        ms, rewound = timed(text, questions, mode="rewind")
        rewind_ms.append(ms)
        ms, _ = timed(text, questions, mode="parallel" if classifier.mode != "parallel" else "fused")
        other_ms.append(ms)
        # raw against raw: the classifier's answers are calibrated when an artifact is loaded,
        # and calibration is not what the modes may change
        ms, served_raw = timed(text, questions, mode=classifier.mode)
        diffs = [
            abs(p - rewound.answers[q].probabilities[lab])
            for q, a in served_raw.answers.items()
            if a.probabilities and q in rewound.answers and rewound.answers[q].probabilities
            for lab, p in a.probabilities.items()
        ]
        if diffs:
            max_diff.append(max(diffs))
        ms, first = timed(text, first_only)
        first_ms.append(ms)
        ticket_tokens.append(first.tokens_evaluated - first.suffix_tokens.get("risk", 0))
        served_calibrator = classifier.calibrator
        classifier.set_calibrator(None)  # raw answers, no layer read: what the features cost
        runner.set_capture(Capture())
        started = time.perf_counter()
        classifier.classify(text)
        no_layers_ms.append((time.perf_counter() - started) * 1000)
        classifier.set_calibrator(served_calibrator)
        json_answers_ms.append(timed(text, json_answers, mode=classifier.mode)[0])
        ms, n_json = _json_path(classifier, text)
        json_ms.append(ms)
        json_tokens.append(n_json)
    n_variants = len(_variants(questions))
    logits_med = _median(logits_ms)
    first_med = _median(first_ms)
    extra = (
        (logits_med - first_med) / (n_variants - 1)
        if logits_med is not None and first_med is not None and n_variants > 1
        else None
    )
    json_med = _median(json_ms)
    json_answers_med = _median(json_answers_ms)
    return {
        "model": classifier.model_info.name,
        "n_tickets": len(texts),
        "n_threads": runner.n_threads,
        "mode": classifier.mode,
        "questions": n_variants,
        "system_tokens": system_tokens,
        "logits_ms_median": logits_med,
        "json_ms_median": json_med,
        "ratio": (json_med / logits_med) if json_med and logits_med else None,
        "same_answers_as_json": {
            "questions": list(json_answers),
            "logits_ms_median": json_answers_med,
            "ratio": (json_med / json_answers_med) if json_med and json_answers_med else None,
        },
        "suffix_tokens": {name: len(_suffix_tokens(classifier, name)) for name in questions},
        "first_question_ms": first_med,
        "extra_question_ms": extra,
        "extra_question_share": (extra / first_med) if extra is not None and first_med else None,
        "tokens_per_ticket_median": _median(tokens),
        "ticket_tokens_median": _median(ticket_tokens),
        "json_generated_tokens_median": _median(json_tokens),
        "system_tokens_reevaluated": runner.stats.prefix_tokens - prefix_tokens_at_start,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "kv_sharing": _kv_sharing(classifier.mode, logits_ms, other_ms, rewind_ms, max_diff),
        "calibration": classifier.calibrator.version if classifier.calibrator else None,
        "layer_features": {
            "pooled_layers": list(served_capture.pooled),
            "answer_layers": list(served_capture.answers),
            "ms_median_without": _median(no_layers_ms),
            "ms_median_with": logits_med,
            "overhead_share": _median([(a - b) / b for a, b in zip(logits_ms, no_layers_ms, strict=True) if b]),
        },
    }


def _kv_sharing(
    mode: str, served: list[float], other: list[float], rewind: list[float], max_diff: list[float]
) -> dict[str, Any]:
    """Median ms per ticket for each way of sharing the ticket's KV between the questions."""
    other_mode = "parallel" if mode != "parallel" else "fused"
    medians = {mode: _median(served), other_mode: _median(other), "rewind": _median(rewind)}
    return {
        **{f"{m}_ms_median": v for m, v in medians.items()},
        "fastest": min(medians, key=lambda m: medians[m] or float("inf")),
        "served_mode": mode,
        "max_probability_difference_vs_rewind": max(max_diff) if max_diff else None,
    }


def _variants(questions: dict) -> list[str]:
    from service.l2.decide import variant_names

    return [v for name, q in questions.items() for v, _ in variant_names(name, q)]


def _suffix_tokens(classifier: Classifier, name: str) -> list[int]:
    from service.l2.decide import _suffix

    _, _, tail = prefix_layout(classifier.runner, classifier.prompts.context, classifier.prompts.framing)
    q = classifier.questions[name]
    return _suffix(classifier.runner, classifier.prompts.framing.render(q), tail)


def _json_path(classifier: Classifier, text: str) -> tuple[float, int]:
    """The old path: cached system context, the ticket, then JSON generated under a grammar."""
    runner = classifier.runner
    prompts = classifier.prompts
    started = time.perf_counter()
    with runner.lock:
        try:
            prefix_tokens, between, tail = prefix_layout(runner, prompts.context, prompts.framing)
            prefix = runner.prefix(prefix_tokens)
            state = runner.open_state(prefix, runner.tokenize(text) + runner.tokenize(between, special=True))
            suffix = runner.tokenize(JSON_INSTRUCTION) + runner.tokenize(tail, special=True)
            _, generated = runner.generate(state, suffix, JSON_GRAMMAR, max_tokens=JSON_MAX_TOKENS)
        finally:
            runner.close_state()
    return (time.perf_counter() - started) * 1000, generated - len(suffix)


def main(argv: list[str] | None = None) -> int:
    """python -m service.l2.bench --data dev.jsonl --n 12 --json out.json (settings from env)."""
    import argparse
    import json
    from pathlib import Path

    from service.settings import load_settings

    parser = argparse.ArgumentParser(prog="python -m service.l2.bench", description=__doc__)
    parser.add_argument("--data", required=True, help="JSONL with subject/body per line")
    parser.add_argument("--n", type=int, default=12, help="tickets (spread over the file)")
    parser.add_argument("--json", help="write the l2 section here ('-': stdout only)")
    args = parser.parse_args(argv)
    records = [json.loads(line) for line in Path(args.data).read_text().splitlines() if line]
    step = max(1, len(records) // args.n)
    tickets = records[::step][: args.n]
    section = run(load_settings(), tickets)
    text = json.dumps(section, indent=2)
    if args.json and args.json != "-":
        Path(args.json).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
