"""`triage study framing`: the served question framing against one that pays the chat
template's turn end once per ticket (prompts/questions.yaml, `turn_end: once`), on the same
labelled tickets: tokens evaluated per ticket, the raw answers' coverage, and the calibrated
levels graded by nested cross-validation (the procedure `triage recalibrate` reports).

A framing changes prompt_sha, so each one has a replay cache of its own and an artifact fitted
on one can never be served with the other.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from service.calibration.dataset import build_dataset
from service.calibration.fit import FitConfig, calibrate
from service.calibration.replay import Example
from service.errors import PromptError
from service.l2.prompts import QUESTIONS_FILE, Prompts

TURN_ENDS = ("per_question", "once")


def variant_prompts(prompts_dir: str | Path, out_dir: str | Path, turn_end: str) -> Path:
    """A copy of prompts/ whose framing sets `turn_end`; the served directory itself for the
    framing it already has. Everything else stays byte for byte the same."""
    source = Path(prompts_dir)
    text = (source / QUESTIONS_FILE).read_text(encoding="utf-8")
    if "turn_end:" in text:
        raise PromptError(f"{source / QUESTIONS_FILE}: sets turn_end already; study the default framing")
    if turn_end == "per_question":
        return source
    marker = "\nframing:\n"
    if marker not in text:
        raise PromptError(f"{source / QUESTIONS_FILE}: no top-level 'framing:' block")
    target = Path(out_dir) / f"prompts-turn-{turn_end}"
    shutil.copytree(source, target, dirs_exist_ok=True)
    (target / QUESTIONS_FILE).write_text(text.replace(marker, f"{marker}  turn_end: {turn_end}\n", 1))
    return target


def fixed_tokens(runner: Any, prompts: Prompts) -> dict[str, Any]:
    """Tokens every ticket pays beside its own text: the outro and each question's suffix."""
    from service.l2.decide import prepare

    probe = "x"
    prepared = prepare(runner, probe, prompts.context, prompts.questions, prompts.framing)
    suffixes = {name: len(tokens) for name, tokens in prepared.suffixes.items()}
    outro = len(prepared.tokens) - len(runner.tokenize(probe))
    return {"outro": outro, "suffixes": suffixes, "per_ticket": outro + sum(suffixes.values())}


def coverage(examples: list[Example], min_coverage: float) -> dict[str, dict[str, float]]:
    """Per question: median and lowest raw coverage, and the share under the fallback's floor."""
    out: dict[str, dict[str, float]] = {}
    names = sorted({q for e in examples for q in e.answers})
    for q in names:
        found = [e.answers[q].coverage for e in examples if q in e.answers]
        values = np.array([c for c in found if c is not None])
        if len(values):
            out[q] = {
                "median": float(np.median(values)),
                "min": float(values.min()),
                "below_floor": float((values < min_coverage).mean()),
            }
    return out


def grade(
    examples: list[Example],
    questions: dict[str, Any],
    cfg: FitConfig,
    head_inputs: tuple[str, ...],
    gate_inputs: tuple[str, ...],
) -> dict[str, Any]:
    """Nested cross-validation of the whole calibration procedure, as `triage recalibrate`."""
    data = build_dataset(examples, questions, head_inputs, gate_inputs)
    calibration = calibrate(data, cfg)
    nested = calibration.nested
    greens = sum(nested.confusion[0])
    return {
        "nested": msgspec.to_builtins(nested),
        "greens_cleared": nested.confusion[0][0] / greens if greens else 0.0,
        "methods": {q: f.model.method for q, f in calibration.final.questions.items()},
        "green_threshold": float(calibration.final.thresholds.green),
    }


def decision(per_question: dict[str, Any], once: dict[str, Any]) -> dict[str, Any]:
    """Ship `once` only if it evaluates fewer tokens and its nested levels are no worse: no more
    false greens, red recall and greens answered automatically held."""
    a, b = per_question["nested"], once["nested"]
    saved = per_question["tokens"]["per_ticket"] - once["tokens"]["per_ticket"]
    holds = (
        b["false_greens"] <= a["false_greens"]
        and b["red_recall"] >= a["red_recall"]
        and b["green_rate"] >= a["green_rate"]
    )
    return {"tokens_saved_per_ticket": saved, "quality_holds": holds, "ship": bool(saved > 0 and holds)}
