"""Hidden states as bytes: the one float32 codec that Redis ({p}:features:{id}) and the replay
cache keep vectors in."""

from __future__ import annotations

import numpy as np


def features_to_bytes(features: dict[str, np.ndarray]) -> dict[str, bytes]:
    """Per name, the vector's float32 bytes."""
    return {name: np.asarray(vector, dtype=np.float32).tobytes() for name, vector in features.items()}


def features_from_bytes(raw: dict[str, bytes]) -> dict[str, np.ndarray]:
    """Per name, the float32 vector `features_to_bytes` wrote (read-only: it shares the bytes)."""
    return {name: np.frombuffer(value, dtype=np.float32) for name, value in raw.items()}
