"""load_latest and CalibrationWatcher: newest matching artifact, stale ignored, broken rejected."""

from __future__ import annotations

import os
import shutil
import time

from service.calibration import CalibrationWatcher, load_latest
from service.metrics import REGISTRY
from tests.calibration import artifacts
from tests.calibration.artifacts import MODEL_SHA, PROMPT_SHA


def gauge(name, **labels):
    return REGISTRY.get_sample_value(name, labels or None)


class Changes:
    def __init__(self):
        self.seen = []

    def __call__(self, calibrator):
        self.seen.append(None if calibrator is None else calibrator.version)


def test_the_newest_matching_artifact_is_loaded_and_published(tmp_path):
    artifacts.write(tmp_path, "20260101T000000Z-00000001", green=0.91)
    artifacts.write(tmp_path, "20260102T000000Z-00000002", green=0.92, created_at=time.time() - 100)
    out = load_latest(tmp_path, MODEL_SHA, PROMPT_SHA)
    assert out.calibrator is not None and out.error is None and not out.stale
    assert out.calibrator.version == "20260102T000000Z-00000002"
    assert out.calibrator.thresholds.green == 0.92
    assert gauge("triage_calibration_stale") == 0
    assert gauge("triage_calibration_ece_ratio", question="risk") == 0.05
    assert 99 <= gauge("triage_calibration_age_seconds") < 200


def test_a_stale_artifact_is_ignored_logged_and_counted(tmp_path, logs):
    artifacts.write(tmp_path, "20260101T000000Z-00000001", model_sha="c" * 64)
    out = load_latest(tmp_path, MODEL_SHA, PROMPT_SHA)
    assert out.calibrator is None and out.stale
    assert gauge("triage_calibration_stale") == 1
    assert any(e["event"] == "calibration_stale" for e in logs)
    # another prompt is stale too
    shutil.rmtree(tmp_path / "20260101T000000Z-00000001")
    artifacts.write(tmp_path, "20260101T000000Z-00000003", prompt_sha="d" * 64)
    assert load_latest(tmp_path, MODEL_SHA, PROMPT_SHA).stale


def test_a_newer_stale_artifact_leaves_an_older_matching_one_in_use(tmp_path):
    artifacts.write(tmp_path, "20260101T000000Z-00000001")
    artifacts.write(tmp_path, "20260102T000000Z-00000002", model_sha="c" * 64)
    out = load_latest(tmp_path, MODEL_SHA, PROMPT_SHA)
    assert out.calibrator.version == "20260101T000000Z-00000001"
    assert out.stale  # the newest is for another model: the gauge says so


def test_a_broken_newest_artifact_is_rejected_and_the_previous_kept(tmp_path, logs):
    artifacts.write(tmp_path, "20260101T000000Z-00000001")
    broken = tmp_path / "20260102T000000Z-00000002"
    broken.mkdir()
    (broken / "artifact.json").write_text("{not json")
    out = load_latest(tmp_path, MODEL_SHA, PROMPT_SHA)
    assert out.calibrator.version == "20260101T000000Z-00000001"
    assert out.error and "20260102T000000Z-00000002" in out.error
    assert any(e["event"] == "calibration_rejected" for e in logs)


def test_no_directory_means_no_calibrator(tmp_path):
    out = load_latest(tmp_path / "absent", MODEL_SHA, PROMPT_SHA)
    assert out.calibrator is None and not out.stale and out.error is None


def test_temporary_directories_are_not_candidates(tmp_path):
    artifacts.write(tmp_path, "20260101T000000Z-00000001")
    (tmp_path / ".tmp-20260109T000000Z-x-1").mkdir()  # a write in progress
    out = load_latest(tmp_path, MODEL_SHA, PROMPT_SHA)
    assert out.calibrator.version == "20260101T000000Z-00000001" and out.error is None


def test_watcher_loads_at_start_and_hot_loads_a_new_artifact(tmp_path):
    changes = Changes()
    watcher = CalibrationWatcher(tmp_path, MODEL_SHA, PROMPT_SHA, changes)
    assert watcher.poll() is False  # nothing there yet: no change from "none"
    artifacts.write(tmp_path, "20260101T000000Z-00000001")
    assert watcher.poll() is True
    assert changes.seen == ["20260101T000000Z-00000001"]
    assert watcher.poll() is False  # nothing new
    artifacts.write(tmp_path, "20260102T000000Z-00000002")
    assert watcher.poll() is True
    assert changes.seen[-1] == "20260102T000000Z-00000002"
    assert watcher.status()["version"] == "20260102T000000Z-00000002"


def test_watcher_keeps_the_previous_artifact_when_a_broken_one_appears(tmp_path):
    changes = Changes()
    artifacts.write(tmp_path, "20260101T000000Z-00000001")
    watcher = CalibrationWatcher(tmp_path, MODEL_SHA, PROMPT_SHA, changes)
    watcher.poll()
    broken = tmp_path / "20260102T000000Z-00000002"
    shutil.copytree(tmp_path / "20260101T000000Z-00000001", broken)
    (broken / "heads.npz").write_bytes(b"PK\x03\x04 truncated")
    assert watcher.poll() is False
    assert changes.seen == ["20260101T000000Z-00000001"]
    assert watcher.current.version == "20260101T000000Z-00000001"
    assert watcher.status()["error"] and "heads.npz" in watcher.status()["error"]


def test_watcher_keeps_serving_when_the_loaded_artifact_is_damaged_in_place(tmp_path):
    changes = Changes()
    path = artifacts.write(tmp_path, "20260101T000000Z-00000001")
    watcher = CalibrationWatcher(tmp_path, MODEL_SHA, PROMPT_SHA, changes)
    watcher.poll()
    (path / "artifact.json").write_text("garbage")
    assert watcher.poll() is False
    assert watcher.current is not None and changes.seen == ["20260101T000000Z-00000001"]


def test_watcher_drops_calibration_when_only_stale_artifacts_remain(tmp_path):
    changes = Changes()
    path = artifacts.write(tmp_path, "20260101T000000Z-00000001")
    watcher = CalibrationWatcher(tmp_path, MODEL_SHA, PROMPT_SHA, changes)
    watcher.poll()
    shutil.rmtree(path)
    artifacts.write(tmp_path, "20260102T000000Z-00000002", model_sha="c" * 64)
    assert watcher.poll() is True
    assert changes.seen == ["20260101T000000Z-00000001", None]
    assert gauge("triage_calibration_stale") == 1
    assert watcher.status()["stale"] is True


def test_poll_is_cheap_when_nothing_changed(tmp_path, monkeypatch):
    artifacts.write(tmp_path, "20260101T000000Z-00000001")
    watcher = CalibrationWatcher(tmp_path, MODEL_SHA, PROMPT_SHA, Changes())
    watcher.poll()
    calls = []
    import service.calibration.loader as loader

    real = loader.load_latest
    monkeypatch.setattr(loader, "load_latest", lambda *a: calls.append(a) or real(*a))
    for _ in range(50):
        watcher.poll()
    assert calls == []
    # a rewrite in place (new mtime) is noticed
    os.utime(tmp_path / "20260101T000000Z-00000001" / "artifact.json", ns=(1, 1))
    watcher.poll()
    assert len(calls) == 1


def test_stale_reasons_name_what_differs():
    from service.calibration.loader import stale_reasons

    assert stale_reasons("m", "p", "m", "p") == []
    assert stale_reasons("m", "p", "other", "p") == ["model sha256"]
    assert stale_reasons("m", "p", "other", "q") == ["model sha256", "prompt_sha"]


def test_the_loaded_gauge_says_whether_any_calibration_is_in_use(tmp_path):
    """TriageCalibrationMissing (deploy/prometheus) fires on this gauge at 0."""
    metrics_before = gauge("triage_calibration_loaded")
    watcher = CalibrationWatcher(tmp_path, MODEL_SHA, PROMPT_SHA, Changes())
    try:
        watcher.poll()  # an empty directory
        assert gauge("triage_calibration_loaded") == 0
        artifacts.write(tmp_path, "20260101T000000Z-00000001")
        watcher.poll()
        assert gauge("triage_calibration_loaded") == 1
        shutil.rmtree(tmp_path / "20260101T000000Z-00000001")
        watcher.poll()
        assert gauge("triage_calibration_loaded") == 0
    finally:
        from service import metrics

        metrics.calibration_loaded.set(metrics_before or 0)
