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
