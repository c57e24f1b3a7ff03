"""The calibration artifact on disk: calibration/<version>/{artifact.json, heads.npz, report}.

artifact.json is a msgspec Struct (forbid_unknown_fields: a typo is an error, not a default);
heads.npz holds the heads' arrays and is read with allow_pickle=False. A version directory is
written under a dot-prefixed temporary name and renamed into place, so a reader never sees a
half-written artifact. Versions sort chronologically by name (UTC timestamp first).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import msgspec
import numpy as np

from service.calibration.calibrator import HEADS, METHODS, Calibrator, Method, QuestionModel
from service.calibration.heads import LinearHead
from service.calibration.maths import Scaling
from service.calibration.ood import GATE_ARRAYS, GateInfo, GreenGate
from service.calibration.thresholds import GreenChoice, LevelSummary, RedChoice, YellowFlagChoice
from service.errors import ArtifactError
from service.l2.decision import Thresholds
from service.results import ModelInfo

SCHEMA = 1
ARTIFACT_FILE = "artifact.json"
HEADS_FILE = "heads.npz"
HEAD_ARRAYS = ("mean", "scale", "coef", "intercept")


class Candidate(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One method tried for a question: its cross-validated NLL, or why it could not be fit."""

    method: Method
    cv_nll: float | None
    error: str | None = None


class HeadInfo(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    dim: int
    c: float  # inverse regularisation strength chosen by cross-validation
    arrays: list[str]  # keys in heads.npz: "<question>.mean", ".scale", ".coef", ".intercept"
    inputs: list[str] = []  # head_all: the questions whose hidden states are concatenated


class QuestionEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One question's chosen map and its cross-validated figures."""

    kind: Literal["choice", "boolean", "score"]
    options: list[str]
    method: Method
    temperature: float | None = None
    bias: list[float] | None = None
    head: HeadInfo | None = None
    label_counts: dict[str, int] = {}
    candidates: list[Candidate] = []
    n: int = 0  # labelled tickets the figures are computed on
    ece_before: float | None = None  # raw probabilities
    ece_after: float | None = None  # chosen map, nested cross-validation
    nll_before: float | None = None
    nll_after: float | None = None
    accuracy_before: float | None = None
    accuracy_after: float | None = None


class Evaluation(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Level outcomes. nested: thresholds and maps fitted without the graded fold (honest);
    selection: the out-of-fold probabilities the final thresholds were chosen on."""

    nested: LevelSummary
    selection: LevelSummary
    raw_default: LevelSummary  # raw probabilities with the default thresholds, for comparison


class ArtifactMeta(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    schema: int
    version: str
    created_at: float  # unix time
    command: str
    model: ModelInfo
    prompt_sha: str
    rules_sha: str
    thresholds: Thresholds
    questions: dict[str, QuestionEntry]
    skipped: dict[str, str] = {}  # question -> why it was left uncalibrated
    label_counts: dict[str, dict[str, int]] = {}
    n_tickets: int = 0
    sources: dict[str, int] = {}  # where the labels came from: file, corpus, decisions
    folds: int = 5
    seed: int = 0
    min_per_class: int = 15
    green: GreenChoice | None = None
    red: RedChoice | None = None
    yellow: dict[str, YellowFlagChoice] = {}
    evaluation: Evaluation | None = None
    gate: GateInfo | None = None  # the green gate (service.calibration.ood); None: no gate
    green_after_l1: bool = False  # the green threshold was chosen on L1's "none" tickets only
    machine: str = ""
    elapsed_s: float = 0.0


def new_version(created_at: float, content: bytes) -> str:
    """UTC timestamp (sorts chronologically) plus a short content hash (unique)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(created_at))
    return f"{stamp}-{hashlib.sha256(content).hexdigest()[:8]}"


def write_artifact(
    directory: str | Path,
    meta: ArtifactMeta,
    heads: dict[str, LinearHead],
    extra: Callable[[Path], None] | None = None,
    gate: GreenGate | None = None,
) -> Path:
    """Write calibration/<meta.version>/ atomically; `extra(tmpdir)` may add the report files.

    Returns the final directory. The temporary directory is removed if anything fails, so
    the directory never holds a partial artifact under a version name.
    """
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    final = root / meta.version
    if final.exists():
        raise ArtifactError(f"{final}: an artifact with this version already exists")
    tmp = root / f".tmp-{meta.version}-{os.getpid()}"
    try:
        tmp.mkdir()
        arrays: dict[str, np.ndarray] = {}
        for name, head in heads.items():
            arrays.update(
                {
                    f"{name}.mean": head.mean,
                    f"{name}.scale": head.scale,
                    f"{name}.coef": head.coef,
                    f"{name}.intercept": head.intercept,
                }
            )
        if gate is not None:
            arrays.update({f"gate.{part}": a for part, a in gate.arrays.items()})
        with (tmp / HEADS_FILE).open("wb") as handle:
            np.savez(handle, **arrays)
            handle.flush()
            os.fsync(handle.fileno())
        with (tmp / ARTIFACT_FILE).open("wb") as handle:
            handle.write(msgspec.json.format(msgspec.json.encode(meta), indent=2) + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        if extra is not None:
            extra(tmp)
        # Validate what was written before it becomes visible under its version name.
        read_artifact(tmp)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def read_meta(path: str | Path) -> ArtifactMeta:
    """artifact.json of an artifact directory, decoded and checked (no arrays loaded)."""
    file = Path(path) / ARTIFACT_FILE
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise ArtifactError(f"{file}: cannot read: {exc.strerror or exc}") from None
    try:
        meta = msgspec.json.decode(data, type=ArtifactMeta)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ArtifactError(f"{file}: {exc}") from None
    if meta.schema != SCHEMA:
        raise ArtifactError(f"{file}: schema {meta.schema}, this service reads {SCHEMA}")
    for name, q in meta.questions.items():
        if q.method not in METHODS:
            raise ArtifactError(f"{file}: question {name!r}: unknown method {q.method!r}")
        if q.method in ("temperature", "vector"):
            if q.temperature is None or not (q.temperature > 0 and np.isfinite(q.temperature)):
                raise ArtifactError(f"{file}: question {name!r}: temperature must be > 0, got {q.temperature!r}")
            if q.bias is None or len(q.bias) != len(q.options):
                raise ArtifactError(f"{file}: question {name!r}: bias needs {len(q.options)} entries")
        if q.method in HEADS and q.head is None:
            raise ArtifactError(f"{file}: question {name!r}: method {q.method} without head")
        if q.method == "head_all" and not q.head.inputs:  # type: ignore[union-attr]
            raise ArtifactError(f"{file}: question {name!r}: head_all without inputs")
    t = meta.thresholds
    # green may sit just above 1.0: "no P(green) passes" (thresholds.above_all)
    if not 0.0 <= t.green <= 1.0 + 1e-9:
        raise ArtifactError(f"{file}: threshold green must be in [0, 1], got {t.green}")
    for label, value in [("red", t.red), *t.flags.items(), *t.yellow_flags.items()]:
        if not 0.0 <= value <= 1.0:
            raise ArtifactError(f"{file}: threshold {label} must be in [0, 1], got {value}")
    return meta


def read_artifact(path: str | Path) -> tuple[ArtifactMeta, dict[str, LinearHead]]:
    """Metadata and heads of one artifact directory; ArtifactError if anything is off."""
    meta, heads, _gate = read_artifact_with_gate(path)
    return meta, heads


def read_artifact_with_gate(path: str | Path) -> tuple[ArtifactMeta, dict[str, LinearHead], GreenGate | None]:
    """Metadata, heads and green gate of one artifact directory; ArtifactError if anything is off."""
    root = Path(path)
    meta = read_meta(root)
    heads: dict[str, LinearHead] = {}
    needed = {name: q for name, q in meta.questions.items() if q.method in HEADS}
    if not needed and meta.gate is None:
        return meta, heads, None
    file = root / HEADS_FILE
    try:
        # Our own handle: np.load leaks the one it opens when a truncated zip fails to parse.
        with open(file, "rb") as handle, np.load(handle, allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
    except (OSError, ValueError, EOFError) as exc:
        raise ArtifactError(f"{file}: cannot load: {exc}") from None
    except Exception as exc:  # zipfile.BadZipFile and friends from a truncated file
        raise ArtifactError(f"{file}: cannot load: {type(exc).__name__}: {exc}") from None
    for name, q in needed.items():
        try:
            head = LinearHead(*(arrays[f"{name}.{part}"] for part in HEAD_ARRAYS), c=q.head.c)  # type: ignore[union-attr]
        except KeyError as exc:
            raise ArtifactError(f"{file}: question {name!r}: missing array {exc}") from None
        except ValueError as exc:
            raise ArtifactError(f"{file}: question {name!r}: {exc}") from None
        if head.n_classes != len(q.options) or head.dim != q.head.dim:  # type: ignore[union-attr]
            raise ArtifactError(
                f"{file}: question {name!r}: head is {head.n_classes}x{head.dim},"
                f" artifact.json says {len(q.options)} options, dim "
                f"{q.head.dim}"
            )  # type: ignore[union-attr]
        heads[name] = head
    gate = None
    if meta.gate is not None:
        try:
            gate = GreenGate(meta.gate, *(arrays[f"gate.{part}"] for part in GATE_ARRAYS))
        except KeyError as exc:
            raise ArtifactError(f"{file}: green gate: missing array {exc}") from None
        except ValueError as exc:
            raise ArtifactError(f"{file}: green gate: {exc}") from None
    return meta, heads, gate


def calibrator_from(
    meta: ArtifactMeta, heads: dict[str, LinearHead], path: str = "", gate: GreenGate | None = None
) -> Calibrator:
    models: dict[str, QuestionModel] = {}
    for name, q in meta.questions.items():
        scaling = None
        if q.method in ("temperature", "vector"):
            scaling = Scaling(
                temperature=float(q.temperature),  # type: ignore[arg-type]
                bias=list(q.bias or []),
            )
        models[name] = QuestionModel(
            q.method,
            tuple(q.options),
            q.kind,
            scaling=scaling,
            head=heads.get(name),
            inputs=tuple(q.head.inputs) if q.head is not None else (),
        )
    # Only the fitted thresholds come from the artifact (a yellow flag only when the job chose
    # it: `meta.yellow`); the rest keep the current defaults.
    fitted = meta.thresholds
    defaults = Thresholds()
    thresholds = msgspec.structs.replace(
        defaults,
        green=fitted.green,
        red=fitted.red,
        flags={**defaults.flags, **fitted.flags},
        yellow_flags={**defaults.yellow_flags, **{f: v for f, v in fitted.yellow_flags.items() if f in meta.yellow}},
    )
    ece = {name: q.ece_after for name, q in meta.questions.items() if q.ece_after is not None}
    return Calibrator(
        meta.version,
        models,
        thresholds,
        model_sha=meta.model.sha256,
        prompt_sha=meta.prompt_sha,
        created_at=meta.created_at,
        ece=ece,
        path=path,
        gate=gate,
    )


def load_artifact(path: str | Path) -> Calibrator:
    """The Calibrator of one artifact directory (or its artifact.json); no staleness check.

    For `triage eval --calibration ARTIFACT`: compare `.model_sha` / `.prompt_sha` with the
    running classifier yourself if it matters. Raises ArtifactError.
    """
    root = Path(path)
    if root.name == ARTIFACT_FILE:
        root = root.parent
    meta, heads, gate = read_artifact_with_gate(root)
    return calibrator_from(meta, heads, str(root), gate)
