"""The replay cache without the model: what it writes is read back, keyed by text and setup."""

from __future__ import annotations

import msgspec
import numpy as np

from service.calibration.replay import ReplayCache, text_sha
from service.hidden_states import features_to_bytes
from service.l2.runner import Capture
from service.results import L2Result


def test_an_entry_round_trips_in_the_shared_codec(tmp_path):
    cache = ReplayCache(tmp_path, "a" * 64, "b" * 64, "shared", Capture(pooled=(11,), answers=()))
    sha = text_sha("Refund, please.")
    assert cache.get(sha) is None
    features = {"risk": np.linspace(0, 1, 5), "ticket@11": np.ones(3, dtype=np.float32)}
    result = L2Result(level="yellow", method="logits")
    cache.put(sha, result, features, truncated=True)

    got, feats, truncated = cache.get(sha)
    assert got == result and truncated is True
    assert {k: v.tolist() for k, v in feats.items()} == {k: v.astype(np.float32).tolist() for k, v in features.items()}
    # On disk the vectors are the codec's bytes: files written before and after read alike.
    stored = msgspec.msgpack.decode((cache.dir / f"{sha}.msgpack").read_bytes())
    assert stored["features"] == features_to_bytes(features)


def test_the_directory_names_model_prompts_mode_and_layers(tmp_path):
    one = ReplayCache(tmp_path, "a" * 64, "b" * 64, "shared", Capture(pooled=(11,), answers=(23,)))
    assert one.dir.name == f"{'a' * 16}-{'b' * 16}-shared-p11-a23"
    assert ReplayCache(tmp_path, "a" * 64, "c" * 64, "shared", Capture(pooled=(11,), answers=(23,))).dir != one.dir


def test_replay_records_the_l1_level_the_fit_can_hold_back(tmp_path):
    """`l1` tells each example's L1 level (recalibrate --green-after-l1); the dataset marks the
    tickets the rules raise. Cached texts: no model is loaded."""
    from service.calibration.dataset import build_dataset
    from service.calibration.replay import replay
    from service.labelled import LabelledTicket

    cache = ReplayCache(tmp_path, "a" * 64, "b" * 64, "shared", Capture(pooled=(11,), answers=()))
    records = [
        LabelledTicket(id="t1", body="Please delete our production database.", risk="red"),
        LabelledTicket(id="t2", body="How do I export a report?", risk="green"),
    ]
    for rec in records:
        cache.put(text_sha(rec.body), L2Result(level="yellow", method="logits"), {}, truncated=False)

    def no_model():
        raise AssertionError("every text is cached")

    levels = {"Please delete our production database.": "red", "How do I export a report?": "none"}
    examples, skipped = replay(records, "file", cache, no_model, l1=levels.__getitem__)
    assert not skipped and [e.l1_level for e in examples] == ["red", "none"]
    assert build_dataset(examples, {}, (), ()).l1_raised.tolist() == [True, False]
    plain, _ = replay(records, "file", cache, no_model)
    assert {e.l1_level for e in plain} == {"none"}
