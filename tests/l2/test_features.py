"""Feature names: what a calibration asks for, and the layers a runner must read for it."""

from __future__ import annotations

import numpy as np
import pytest

from service.calibration.replay import FEATURE_SETS, feature_names, replay_capture
from service.l2.decide import capture_for, hidden_features
from service.l2.runner import Capture, Readout

QUESTIONS = ["risk", "commitment", "category"]


def test_replay_reads_the_middle_three_quarters_and_last_full_layer():
    assert replay_capture(24) == Capture(pooled=(11, 17, 22), answers=(11, 17))
    assert replay_capture(28) == Capture(pooled=(13, 20, 26), answers=(13, 20))


@pytest.mark.parametrize(
    ("spec", "names"),
    [
        ("answers", ("risk", "commitment", "category")),
        ("answers@mid", ("risk@l11", "commitment@l11", "category@l11")),
        ("ticket@mid", ("ticket@l11",)),
        ("ticket@last", ("ticket@l22",)),
        ("answers+ticket@late", ("risk", "commitment", "category", "ticket@l17")),
    ],
)
def test_feature_sets_resolve_against_the_model_layers(spec, names):
    assert feature_names(spec, QUESTIONS, 24) == names


def test_unknown_feature_set_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown feature set 'ticket@top'"):
        feature_names("ticket@top", QUESTIONS, 24)
    assert "answers" in FEATURE_SETS


def test_capture_reads_only_the_layers_named():
    names = feature_names("answers+answers@late+ticket@mid", QUESTIONS, 24)
    assert capture_for(names) == Capture(pooled=(11,), answers=(17,))
    assert capture_for(QUESTIONS) == Capture()  # final-layer states need no capture
    assert not Capture()
    with pytest.raises(ValueError):
        capture_for(["risk@lx"])


def test_hidden_features_name_every_vector():
    v = np.arange(4, dtype=np.float32)
    readouts = {
        "risk": Readout(logits=np.zeros(2), hidden=v, tokens=3, layers={11: v + 1}),
        "category": Readout(logits=np.zeros(2), hidden=v + 2, tokens=3),
    }
    features = hidden_features(readouts, {11: v + 3})
    assert sorted(features) == ["category", "risk", "risk@l11", "ticket@l11"]
    assert features["ticket@l11"][0] == 3 and features["risk@l11"][0] == 1
