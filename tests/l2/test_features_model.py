"""The hidden-state features a calibration head is trained on are the ones serving computes.

Real model, real tickets: the replay (`triage recalibrate`, every candidate layer read) and a
serving classifier (only the layers its artifact's heads and gate ask for) must produce the same
vectors under the same names; the mean over the ticket must cover the ticket's tokens only
(the same in the fused mode, where question tokens share the decode call, and in the rewind
mode, where they do not)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from service.calibration.calibrator import Calibrator, QuestionModel
from service.calibration.heads import LinearHead
from service.calibration.replay import replay_capture
from service.l2 import Classifier
from service.l2.decide import capture_for
from service.l2.decision import Thresholds
from service.l2.runner import Capture
from service.results import ticket_text
from service.settings import PROJECT_ROOT
from tests.l2.support import MODEL, shared_classifier

pytestmark = pytest.mark.model

DEV = PROJECT_ROOT.parent / "shared" / "data" / "tickets" / "dev.jsonl"
FALLBACK_TEXTS = [
    "How do I export my invoices as PDF?",
    "Please delete the account of our former employee Anna Weber (anna.weber@example.com).",
    "Le site est en panne depuis ce matin, plus rien ne charge.",
]


def _texts() -> list[str]:
    if DEV.exists():
        rows = [json.loads(line) for line in DEV.read_text().splitlines()[:3]]
        return [ticket_text(r.get("subject"), r["body"]) for r in rows]
    return FALLBACK_TEXTS


@pytest.fixture
def runner():
    shared = shared_classifier()
    yield shared.runner
    shared.runner.set_capture(Capture())  # the shared classifier serves uncalibrated


def _artifact_needing(names: list[str], n_embd: int) -> Calibrator:
    """A real calibrator whose risk head reads `names` (weights arbitrary: only the features
    it makes serving compute matter here)."""
    rng = np.random.default_rng(0)
    d = n_embd * len(names)
    head = LinearHead(np.zeros(d), np.ones(d), rng.normal(size=(3, d)) * 1e-3, np.zeros(3), 1.0)
    risk = QuestionModel("head_all", ("green", "yellow", "red"), "choice", head=head, inputs=tuple(names))
    return Calibrator("test", {"risk": risk}, Thresholds())


def test_serving_computes_the_features_the_replay_trained_on(runner):
    capture = replay_capture(runner.n_layer)
    mid, late = capture.answers
    wanted = [f"ticket@l{mid}", f"risk@l{late}", f"ticket@l{capture.pooled[-1]}", "category"]
    replaying = Classifier(MODEL, runner=runner, capture=capture, timeout_s=300.0)
    serving = Classifier(MODEL, runner=runner, timeout_s=300.0, calibrator=_artifact_needing(wanted, runner.n_embd))
    needed = capture_for(wanted)
    assert runner.capture == needed != capture  # serving reads only what the artifact needs
    for text in _texts():
        runner.set_capture(capture)
        replayed = replaying.classify(text)
        serving.set_calibrator(serving.calibrator)  # as a worker loading the artifact does
        assert runner.capture == needed
        served = serving.classify(text)
        assert served.result.calibrated and served.result.method in ("logits", "generated")
        for name in wanted:
            assert served.features[name].shape == (runner.n_embd,)
            np.testing.assert_allclose(served.features[name], replayed.features[name], rtol=0, atol=1e-4, err_msg=name)


def test_the_ticket_mean_covers_the_ticket_only(runner):
    capture = replay_capture(runner.n_layer)
    fused = Classifier(MODEL, runner=runner, capture=capture, mode="fused", timeout_s=300.0)
    rewind = Classifier(MODEL, runner=runner, capture=capture, mode="rewind", timeout_s=300.0)
    text = _texts()[0]
    a, b = fused.classify(text).features, rewind.classify(text).features
    for layer in capture.pooled:
        name = f"ticket@l{layer}"
        scale = float(np.abs(b[name]).max())
        # batch-shape noise only: llama.cpp is not bit-identical across batch shapes
        assert float(np.abs(a[name] - b[name]).max()) <= 0.02 * scale, name
    for layer in capture.answers:
        name = f"risk@l{layer}"
        scale = float(np.abs(b[name]).max())
        assert float(np.abs(a[name] - b[name]).max()) <= 0.02 * scale, name
    # and a wrong row set would not pass: the answer state is far from the ticket mean
    mid = capture.answers[0]
    assert float(np.abs(a[f"risk@l{mid}"] - a[f"ticket@l{mid}"]).max()) > 0.1 * scale


def test_the_replayed_classifier_decides_as_serving_does(runner, tmp_path):
    """`triage study served` grades an artifact from the replay cache: its verdicts must be
    serving's, ticket by ticket, with the bundled artifact applied."""
    from service.calibration.loader import load_latest
    from service.calibration.replay import ReplayCache, ReplayedClassifier, text_sha
    from service.l2.classifier import DEFAULT_MODE, model_sha256

    shared = shared_classifier()
    outcome = load_latest(PROJECT_ROOT / "calibration", model_sha256(MODEL), shared.prompt_sha)
    assert outcome.calibrator is not None, "the bundled artifact must match the bundled prompts"
    capture = replay_capture(runner.n_layer)
    cache = ReplayCache(tmp_path, model_sha256(MODEL), shared.prompt_sha, DEFAULT_MODE, capture)
    replaying = Classifier(MODEL, runner=runner, capture=capture, timeout_s=300.0)
    serving = Classifier(MODEL, runner=runner, calibrator=outcome.calibrator, timeout_s=300.0)
    replayed = ReplayedClassifier(cache, shared.prompts, outcome.calibrator, shared.model_info)
    for text in _texts():
        runner.set_capture(capture)
        raw = replaying.classify(text)
        cache.put(text_sha(text), raw.result, raw.features, raw.truncated)
        serving.set_calibrator(outcome.calibrator)
        served = serving.classify(text).result
        offline = replayed.classify(text).result
        assert (offline.level, offline.red_flags, offline.team) == (served.level, served.red_flags, served.team)
        assert offline.ood_blocked == served.ood_blocked
        assert offline.ood_distance == pytest.approx(served.ood_distance, rel=1e-3)
        for name, answer in served.answers.items():
            for option, p in (answer.probabilities or {}).items():
                assert offline.answers[name].probabilities[option] == pytest.approx(p, abs=1e-3)
