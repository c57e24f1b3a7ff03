"""Small hand-made artifacts for the artifact and loader tests (no fitting)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from service.calibration.artifact import ArtifactMeta, HeadInfo, QuestionEntry, write_artifact
from service.calibration.heads import LinearHead
from service.calibration.thresholds import YellowFlagChoice
from service.l2.decision import Thresholds
from service.results import ModelInfo

MODEL_SHA = "a" * 64
PROMPT_SHA = "b" * 64
DIM = 6


def head(seed: int = 0) -> LinearHead:
    rng = np.random.default_rng(seed)
    return LinearHead(
        rng.normal(size=DIM), rng.random(DIM) + 0.5, rng.normal(size=(3, DIM)), rng.normal(size=3), c=0.01
    )


def meta(
    version: str,
    *,
    model_sha: str = MODEL_SHA,
    prompt_sha: str = PROMPT_SHA,
    created_at: float = 1_700_000_000.0,
    green: float = 0.9,
) -> ArtifactMeta:
    return ArtifactMeta(
        schema=1,
        version=version,
        created_at=created_at,
        command="test",
        model=ModelInfo(name="m.gguf", sha256=model_sha),
        prompt_sha=prompt_sha,
        rules_sha="r",
        thresholds=Thresholds(green=green, red=0.35, flags={"commitment": 0.6}, yellow_flags={"instructions": 0.7}),
        yellow={"instructions": YellowFlagChoice(threshold=0.7, max_on_green=0.68, n_green=9, reason="test")},
        questions={
            "risk": QuestionEntry(
                kind="choice",
                options=["green", "yellow", "red"],
                method="head",
                head=HeadInfo(dim=DIM, c=0.01, arrays=[]),
                ece_after=0.05,
            ),
            "commitment": QuestionEntry(
                kind="boolean",
                options=["yes", "no"],
                method="temperature",
                temperature=2.0,
                bias=[0.0, 0.0],
                ece_after=0.04,
            ),
        },
    )


def write(directory: Path, version: str, **kwargs) -> Path:
    return write_artifact(directory, meta(version, **kwargs), {"risk": head()})
