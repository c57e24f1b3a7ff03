"""Artifact on disk: round trip, atomic write, no pickle, broken files rejected with a reason."""

from __future__ import annotations

import json

import numpy as np
import pytest

from service.calibration import ArtifactError, load_artifact
from service.calibration.artifact import HEADS_FILE, new_version, read_artifact, write_artifact
from service.results import Answer
from tests.calibration import artifacts


def _risk_answer():
    return Answer(
        kind="choice",
        options=["green", "yellow", "red"],
        chosen="green",
        probabilities={"green": 0.7, "yellow": 0.2, "red": 0.1},
        logprobs={"green": -0.4, "yellow": -1.6, "red": -2.3},
        coverage=0.95,
    )


def test_round_trip_gives_the_same_calibrator(tmp_path):
    path = artifacts.write(tmp_path, "20260101T000000Z-aaaa0001")
    assert path == tmp_path / "20260101T000000Z-aaaa0001"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp left over
    cal = load_artifact(path)
    assert cal.version == "20260101T000000Z-aaaa0001"
    assert cal.model_sha == artifacts.MODEL_SHA and cal.prompt_sha == artifacts.PROMPT_SHA
    assert cal.thresholds.green == 0.9 and cal.thresholds.red == 0.35
    # fitted flags override, the others keep the current defaults
    assert cal.thresholds.flags["commitment"] == 0.6
    assert cal.thresholds.flags["destructive_or_access"] == 0.5
    assert cal.thresholds.yellow_flags == {"instructions": 0.7}
    x = np.linspace(-1, 1, artifacts.DIM)
    expected = artifacts.head().predict_proba(x)[0]
    out = cal.apply({"risk": _risk_answer()}, {"risk": x.astype(np.float32)})["risk"]
    assert [out.probabilities[o] for o in ("green", "yellow", "red")] == pytest.approx(
        list(expected), abs=1e-6
    )  # float32 features
    assert cal.ece == {"risk": 0.05, "commitment": 0.04}
    # load_artifact also accepts the artifact.json path itself
    assert load_artifact(path / "artifact.json").version == cal.version


def test_a_failing_report_leaves_no_artifact_behind(tmp_path):
    def broken_report(tmp):
        (tmp / "report.md").write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        write_artifact(
            tmp_path, artifacts.meta("20260101T000000Z-aaaa0002"), {"risk": artifacts.head()}, extra=broken_report
        )
    assert list(tmp_path.iterdir()) == []


def test_an_existing_version_is_not_overwritten(tmp_path):
    artifacts.write(tmp_path, "20260101T000000Z-aaaa0003")
    with pytest.raises(ArtifactError, match="already exists"):
        artifacts.write(tmp_path, "20260101T000000Z-aaaa0003")


def test_heads_are_read_without_pickle(tmp_path):
    path = artifacts.write(tmp_path, "20260101T000000Z-aaaa0004")
    arrays = dict(np.load(path / HEADS_FILE))
    arrays["risk.coef"] = np.array([{"evil": 1}], dtype=object)  # only loadable with pickle
    with (path / HEADS_FILE).open("wb") as handle:
        np.savez(handle, **arrays)
    with pytest.raises(ArtifactError, match="cannot load"):
        read_artifact(path)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda d: d.update(schema=2), "schema 2"),
        (lambda d: d.update(surprise=1), "unknown field"),
        (lambda d: d["questions"]["commitment"].update(temperature=-1.0), "temperature must be > 0"),
        (lambda d: d["questions"]["commitment"].update(bias=[0.0]), "bias needs 2"),
        (lambda d: d["thresholds"].update(green=1.5), "threshold green"),
        (lambda d: d["questions"]["risk"].update(method="magic"), "Invalid enum value .magic."),
        (lambda d: d["questions"]["risk"]["head"].update(dim=7), "dim 7"),
    ],
)
def test_broken_metadata_is_rejected_with_a_reason(tmp_path, damage, message):
    path = artifacts.write(tmp_path, "20260101T000000Z-aaaa0005")
    data = json.loads((path / "artifact.json").read_text())
    damage(data)
    (path / "artifact.json").write_text(json.dumps(data))
    with pytest.raises(ArtifactError, match=message):
        load_artifact(path)


def test_truncated_files_are_rejected(tmp_path):
    path = artifacts.write(tmp_path, "20260101T000000Z-aaaa0006")
    blob = (path / HEADS_FILE).read_bytes()
    (path / HEADS_FILE).write_bytes(blob[: len(blob) // 2])
    with pytest.raises(ArtifactError, match="heads.npz"):
        load_artifact(path)
    (path / "artifact.json").write_text('{"schema": 1, "vers')
    with pytest.raises(ArtifactError, match="artifact.json"):
        load_artifact(path)


def test_versions_sort_chronologically():
    a = new_version(1_700_000_000, b"x")
    b = new_version(1_700_000_001, b"a")
    assert a < b and a.startswith("20231114T221320Z-")


def test_the_green_gate_round_trips_and_holds_back_what_it_should(tmp_path):
    import msgspec

    from service.calibration.ood import fit_gate

    rng = np.random.default_rng(3)
    x = np.vstack([rng.normal(size=(60, 8)), rng.normal(size=(60, 8)) + 0.5])
    gate = fit_gate(x, np.r_[np.ones(60, bool), np.zeros(60, bool)], ["ticket@l11"], dims=4)
    meta = msgspec.structs.replace(artifacts.meta("20260101T000000Z-aaaa0009"), gate=gate.info)
    path = write_artifact(tmp_path, meta, {"risk": artifacts.head()}, gate=gate)
    cal = load_artifact(path)
    assert cal.gate is not None and cal.gate.info == gate.info
    assert "ticket@l11" in cal.feature_names  # the runner reads the gate's layer too
    near, far = x[0], x[0] + 50.0
    assert cal.green_gate({"ticket@l11": near}) == gate.check({"ticket@l11": near})
    assert cal.green_gate({"ticket@l11": far})[0] is False
    assert cal.green_gate({})[0] is False  # cannot measure: not allowed
    # arrays missing from heads.npz: the artifact is refused, not served without its gate
    with np.load(path / HEADS_FILE) as npz:
        kept = {k: npz[k] for k in npz.files if not k.startswith("gate.")}
    np.savez(path / HEADS_FILE, **kept)
    with pytest.raises(ArtifactError, match="green gate: missing array"):
        load_artifact(path)
