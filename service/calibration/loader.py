"""Finding and hot-loading the newest calibration artifact that matches the running model.

`load_latest` scans calibration/ once; `CalibrationWatcher.poll()` is the cheap check the worker
calls in its loop (one directory listing and one stat per artifact) and reloads only when the
listing changed. Stale artifacts (another model sha256 or prompt_sha) are ignored and counted;
broken ones are rejected and whatever was loaded before stays.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import structlog

from service import metrics
from service.calibration.artifact import (
    ARTIFACT_FILE,
    ArtifactError,
    calibrator_from,
    read_artifact_with_gate,
    read_meta,
)
from service.calibration.calibrator import Calibrator

log = structlog.get_logger()


class LoadOutcome(msgspec.Struct, frozen=True):
    """What a scan found. calibrator: the newest valid matching artifact, or None.

    stale: the newest artifact in the directory is for another model or prompt (ignored).
    error: why the newest artifact was rejected, when it was broken (older ones were tried).
    """

    calibrator: Calibrator | None
    stale: bool = False
    error: str | None = None


def stale_reasons(model_sha: str, prompt_sha: str, artifact_model_sha: str, artifact_prompt_sha: str) -> list[str]:
    """What makes an artifact stale for the running classifier (empty: it matches). Its heads
    read hidden states, which another model or other prompts would not produce."""
    return [
        name
        for name, running, made_for in (
            ("model sha256", model_sha, artifact_model_sha),
            ("prompt_sha", prompt_sha, artifact_prompt_sha),
        )
        if running != made_for
    ]


def _candidates(directory: Path) -> list[Path]:
    """Artifact directories, newest first; dot-names are temporary writes and are skipped."""
    try:
        entries = [e for e in os.scandir(directory) if e.is_dir() and not e.name.startswith(".")]
    except FileNotFoundError:
        return []
    return [Path(e.path) for e in sorted(entries, key=lambda e: e.name, reverse=True)]


def load_latest(directory: str | Path, model_sha: str, prompt_sha: str) -> LoadOutcome:
    """The newest valid artifact made for this model and these prompts.

    Sets metrics.calibration_stale (1 when the newest artifact is stale), and on a successful
    load metrics.calibration_ece{question} and calibration_age_seconds.
    """
    stale = False
    error: str | None = None
    found: Calibrator | None = None
    for index, path in enumerate(_candidates(Path(directory))):
        try:
            meta = read_meta(path)
            if stale_reasons(model_sha, prompt_sha, meta.model.sha256, meta.prompt_sha):
                stale = stale or index == 0
                log.warning(
                    "calibration_stale",
                    version=meta.version,
                    path=str(path),
                    artifact_model=meta.model.sha256[:12],
                    running_model=model_sha[:12],
                    artifact_prompt=meta.prompt_sha[:12],
                    running_prompt=prompt_sha[:12],
                )
                continue
            meta, heads, gate = read_artifact_with_gate(path)
            found = calibrator_from(meta, heads, str(path), gate)
            break
        except ArtifactError as exc:
            if index == 0:
                error = str(exc)
            log.error("calibration_rejected", path=str(path), error=str(exc))
    metrics.calibration_stale.set(1 if stale else 0)
    if found is not None:
        publish(found)
        log.info(
            "calibration_loaded",
            version=found.version,
            path=found.path,
            questions=sorted(found.models),
            stale_newer=stale,
        )
    return LoadOutcome(calibrator=found, stale=stale, error=error)


def publish(calibrator: Calibrator | None) -> None:
    """Export the loaded artifact's figures: whether there is one, ECE per question and age."""
    metrics.calibration_ece.clear()
    metrics.calibration_loaded.set(0 if calibrator is None else 1)
    if calibrator is None:
        metrics.calibration_age_seconds.set(0)
        return
    for question, value in calibrator.ece.items():
        metrics.calibration_ece.labels(question=question).set(value)
    metrics.calibration_age_seconds.set(max(0.0, time.time() - calibrator.created_at))


class CalibrationWatcher:
    """Loads the newest matching artifact at the first poll and again whenever one appears.

    `on_change(calibrator_or_none)` is called when the chosen artifact changes (a new version,
    or None when none is usable any more); a broken newcomer leaves the current one in place.
    """

    def __init__(
        self, directory: str | Path, model_sha: str, prompt_sha: str, on_change: Callable[[Calibrator | None], None]
    ) -> None:
        self.directory = Path(directory)
        self.model_sha = model_sha
        self.prompt_sha = prompt_sha
        self.on_change = on_change
        self.current: Calibrator | None = None
        self.outcome: LoadOutcome | None = None
        self._signature: tuple | None = None

    def status(self) -> dict[str, object]:
        """For the worker's heartbeat: what is loaded and what the last scan found."""
        current = self.current
        outcome = self.outcome
        return {
            "version": current.version if current is not None else None,
            "age_s": round(time.time() - current.created_at, 1) if current is not None else None,
            "stale": bool(outcome.stale) if outcome is not None else False,
            "error": outcome.error if outcome is not None else None,
        }

    def _listing(self) -> tuple:
        """Names, mtimes and sizes of every artifact.json: changes on a rename or a rewrite."""
        sig = []
        for path in _candidates(self.directory):
            try:
                st = (path / ARTIFACT_FILE).stat()
                sig.append((path.name, st.st_mtime_ns, st.st_size))
            except OSError:
                sig.append((path.name, 0, -1))
        return tuple(sig)

    def poll(self) -> bool:
        """Reload if the directory changed; True when on_change was called."""
        signature = self._listing()
        if signature == self._signature:
            if self.current is not None:
                metrics.calibration_age_seconds.set(max(0.0, time.time() - self.current.created_at))
            return False
        self._signature = signature
        outcome = load_latest(self.directory, self.model_sha, self.prompt_sha)
        self.outcome = outcome
        chosen = outcome.calibrator
        if (
            chosen is None
            and outcome.error is not None
            and self.current is not None
            and Path(self.current.path).is_dir()
        ):
            # The artifact in use was damaged on disk and nothing else is usable: the copy in
            # memory was valid when loaded, so it keeps serving.
            chosen = self.current
        before = self.current.version if self.current is not None else None
        after = chosen.version if chosen is not None else None
        publish(chosen)
        if after == before:
            return False
        self.current = chosen
        log.info("calibration_changed", before=before, after=after)
        self.on_change(chosen)
        return True
