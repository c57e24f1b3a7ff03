"""The hidden-state byte codec Redis and the replay cache share."""

from __future__ import annotations

import numpy as np

from service.hidden_states import features_from_bytes, features_to_bytes


def test_vectors_round_trip_as_float32():
    features = {"risk": np.arange(4, dtype=np.float64), "category": np.array([0.5, -1.25], dtype=np.float32)}
    raw = features_to_bytes(features)
    assert raw["risk"] == np.arange(4, dtype=np.float32).tobytes()  # 4 bytes a value, native order
    back = features_from_bytes(raw)
    assert {name: v.dtype for name, v in back.items()} == {"risk": np.float32, "category": np.float32}
    assert back["risk"].tolist() == [0.0, 1.0, 2.0, 3.0] and back["category"].tolist() == [0.5, -1.25]
    assert features_to_bytes({}) == {} and features_from_bytes({}) == {}
