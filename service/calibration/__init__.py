"""Calibration: from raw L2 answers to calibrated probabilities and honestly chosen thresholds.

Serving surface (numpy only): `load_latest(directory, model_sha, prompt_sha) -> LoadOutcome`,
`CalibrationWatcher(directory, model_sha, prompt_sha, on_change)` with a cheap `.poll()`,
`load_artifact(path) -> Calibrator` (for `triage eval --calibration`), and `Calibrator` with
`apply(answers, features)`, `thresholds`, `version`. Fitting lives in `fit` (offline, imports
scikit-learn) and is driven by `triage recalibrate`: `recalibrate` runs the job on the examples
`dataset` collects (and `replay` replays), `recalibrate_commands` is its CLI.
"""

from service.calibration.artifact import ArtifactError, load_artifact, read_artifact
from service.calibration.calibrator import CalibrationMismatch, Calibrator, QuestionModel
from service.calibration.loader import CalibrationWatcher, LoadOutcome, load_latest

__all__ = [
    "ArtifactError",
    "CalibrationMismatch",
    "CalibrationWatcher",
    "Calibrator",
    "LoadOutcome",
    "QuestionModel",
    "load_artifact",
    "load_latest",
    "read_artifact",
]
