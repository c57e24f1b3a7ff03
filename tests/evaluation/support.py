"""Synthetic eval rows with known answers (no model): the shape run.make_row writes."""

from __future__ import annotations

from service.l2.classifier import Classification
from service.l2.decision import Thresholds
from service.results import L2Result, ModelInfo


def row(i, truth, pred, l1="none", l2=None, lang="en", category="billing", **extra):
    base = {
        "id": f"T-{i:03d}",
        "truth": truth,
        "predicted": pred,
        "l1": l1,
        "l2": l2 or pred,
        "language": lang,
        "category_truth": category,
        "category": category,
        "latency_ms": 100.0 + i,
        "method": "logits",
        "calibrated": False,
    }
    base.update(extra)
    return base


def answers(p_green, p_red, flag=0.1):
    """L2 answers as stored in a row: risk with these probabilities, every flag at `flag`."""

    def boolean(p):
        return {
            "kind": "boolean",
            "options": ["yes", "no"],
            "chosen": "no",
            "probabilities": {"yes": p, "no": 1 - p},
            "probability": p,
            "coverage": 0.9,
        }

    risk = {
        "kind": "choice",
        "options": ["green", "yellow", "red"],
        "chosen": "green",
        "probabilities": {"green": p_green, "yellow": 1 - p_green - p_red, "red": p_red},
        "coverage": 0.9,
    }
    return {
        "risk": risk,
        "commitment": boolean(flag),
        "destructive_or_access": boolean(0.1),
        "third_party_personal_data": boolean(0.1),
        "instructions": boolean(0.1),
    }


def scored(i, truth, p_green, p_red=0.05, **extra):
    """A row whose L2 level follows from its answers under default thresholds (green 0.8)."""
    l2 = "red" if p_red >= 0.3 else ("green" if p_green >= 0.8 else "yellow")
    return row(
        i,
        truth,
        l2,
        l2=l2,
        answers=answers(p_green, p_red),
        probabilities={"risk": answers(p_green, p_red)["risk"]["probabilities"]},
        **extra,
    )


class FixedL2:
    """Stands in for the model (model tests are separate): every ticket gets `result`."""

    model_info = ModelInfo(name="stand-in.gguf", sha256="0" * 64)
    prompt_sha = "1" * 64
    mode = "fused"
    calibrator = None
    thresholds = Thresholds()
    runner = type("Runner", (), {"n_threads": 1})()

    def __init__(self, result: L2Result) -> None:
        self.result = result

    def set_calibrator(self, calibrator) -> None:
        self.calibrator = calibrator

    def classify(self, text: str) -> Classification:
        return Classification(result=self.result)
