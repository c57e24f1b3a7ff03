"""L2: closed questions answered from next-token logits on the resident Qwen GGUF.

Public surface for the worker: `Classifier` (from_settings, classify, model_info, prompt_sha,
set_calibrator) and `Classification`. `decide` is the generic primitive the audit reuses;
`Thresholds` / `decide_level` the pure verdict.
"""

from service.l2.classifier import Classification, Classifier
from service.l2.decide import Decided, decide
from service.l2.decision import Thresholds, decide_level
from service.l2.prompts import Framing, Question, load_prompts
from service.l2.runner import AliasError, Runner

__all__ = [
    "AliasError",
    "Classification",
    "Classifier",
    "Decided",
    "Framing",
    "Question",
    "Runner",
    "Thresholds",
    "decide",
    "decide_level",
    "load_prompts",
]
