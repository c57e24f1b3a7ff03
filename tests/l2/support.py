"""One resident Classifier per test process (the machine has 2 cores and one model is enough)."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

MODEL = Path(
    os.environ.get("TRIAGE_TEST_MODEL", Path.home() / ".cache/triage/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
)
MODEL_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"


@functools.cache
def shared_classifier():
    from service.l2 import Classifier
    from service.settings import PROJECT_ROOT

    if not MODEL.is_file():
        pytest.skip(f"model not present: {MODEL} (run `triage fetch-model`)")
    return Classifier(
        MODEL,
        n_threads=int(os.environ.get("TRIAGE_N_THREADS", "2")),
        n_ctx=4096,
        prompts_dir=PROJECT_ROOT / "prompts",
        timeout_s=300.0,
    )
