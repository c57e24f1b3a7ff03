"""Calibration maths on hand-computed and synthetic cases with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from service.calibration.maths import (
    DegenerateFit,
    Scaling,
    bin_index,
    ece,
    fit_temperature,
    fit_vector,
    nll,
    reliability,
    softmax,
    stratified_folds,
)


def test_ece_matches_hand_computation():
    probs = np.array([[0.95, 0.05], [0.95, 0.05], [0.30, 0.70], [0.62, 0.38]])
    y = np.array([0, 1, 1, 0])
    # bins of width 1/15: 0.95 -> (14/15, 1], 0.70 -> (10/15, 11/15], 0.62 -> (9/15, 10/15]
    # |0.5 - 0.95| * 2/4 + |1 - 0.70| * 1/4 + |1 - 0.62| * 1/4 = 0.225 + 0.075 + 0.095
    assert ece(probs, y) == pytest.approx(0.395, abs=1e-12)
    rel = reliability(probs, y)
    assert rel.counts[14] == 2 and rel.counts[10] == 1 and rel.counts[9] == 1
    assert sum(rel.counts) == 4
    assert rel.accuracy[14] == pytest.approx(0.5)
    assert rel.confidence[14] == pytest.approx(0.95)


def test_ece_is_zero_when_confidence_equals_accuracy():
    # 10 tickets at confidence 0.7, 7 of them right.
    probs = np.tile([0.7, 0.3], (10, 1))
    y = np.array([0] * 7 + [1] * 3)
    assert ece(probs, y) == pytest.approx(0.0, abs=1e-12)


def test_bin_edges_are_right_closed_and_zero_goes_first():
    assert list(bin_index(np.array([0.0, 1 / 15, 0.5, 1.0]))) == [0, 0, 7, 14]


def test_nll_by_hand():
    probs = np.array([[0.8, 0.2], [0.4, 0.6]])
    assert nll(probs, np.array([0, 0])) == pytest.approx(-(math.log(0.8) + math.log(0.4)) / 2)


def test_nll_of_a_confident_mistake_is_bounded_not_infinite():
    assert nll(np.array([[1.0, 0.0]]), np.array([1])) == pytest.approx(-math.log(1e-12))


def _sample(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    cum = probs.cumsum(axis=1)
    return (rng.random((len(probs), 1)) > cum).sum(axis=1)


def test_temperature_fit_recovers_a_known_temperature():
    rng = np.random.default_rng(7)
    z = rng.normal(scale=3.0, size=(20000, 4))
    y = _sample(softmax(z / 2.5), rng)
    fitted = fit_temperature(z, y)
    assert fitted.temperature == pytest.approx(2.5, rel=0.05)
    # and it lowers NLL compared with the raw logits
    assert nll(fitted.apply(z), y) < nll(softmax(z), y)


def test_temperature_below_one_is_recovered_too():
    rng = np.random.default_rng(8)
    z = rng.normal(scale=0.5, size=(20000, 3))
    y = _sample(softmax(z / 0.4), rng)
    assert fit_temperature(z, y).temperature == pytest.approx(0.4, rel=0.05)


def test_temperature_ignores_a_per_row_constant():
    rng = np.random.default_rng(9)
    z = rng.normal(scale=3.0, size=(5000, 3))
    y = _sample(softmax(z / 2.0), rng)
    shifted = z - 30.0 - rng.random((5000, 1)) * 10  # like raw log-probs over a vocabulary
    assert fit_temperature(shifted, y).temperature == pytest.approx(fit_temperature(z, y).temperature, rel=1e-4)


def test_vector_scaling_recovers_temperature_and_bias():
    rng = np.random.default_rng(11)
    z = rng.normal(scale=2.0, size=(40000, 4))
    bias = np.array([0.8, -0.3, 0.0, -0.5])
    y = _sample(softmax(z / 2.0 + bias), rng)
    fitted = fit_vector(z, y, l2=0.0)
    assert fitted.temperature == pytest.approx(2.0, rel=0.06)
    assert np.allclose(fitted.bias, bias - bias.mean(), atol=0.08)


def test_labels_unrelated_to_logits_are_a_degenerate_fit():
    rng = np.random.default_rng(12)
    z = rng.normal(scale=3.0, size=(5000, 3))
    y = rng.integers(0, 3, size=5000)
    with pytest.raises(DegenerateFit, match="edge"):
        fit_temperature(z, y)


def test_scaling_apply_is_softmax_of_scaled_logits():
    s = Scaling(temperature=2.0, bias=[0.5, 0.0])
    p = s.apply(np.array([[2.0, 0.0]]))
    expected = np.exp([1.5, 0.0]) / np.exp([1.5, 0.0]).sum()
    assert np.allclose(p[0], expected)


def test_stratified_folds_partition_and_balance():
    y = np.array([0] * 23 + [1] * 11 + [2] * 6)
    folds = stratified_folds(y, 5, seed=3)
    tests = np.concatenate([test for _, test in folds])
    assert sorted(tests) == list(range(len(y)))  # every row graded exactly once
    for train, test in folds:
        assert not set(train) & set(test)
        assert len(train) + len(test) == len(y)
        for cls, n in ((0, 23), (1, 11), (2, 6)):
            assert (y[test] == cls).sum() in (n // 5, n // 5 + 1)


def test_stratified_folds_are_reproducible():
    y = np.arange(30) % 3
    a = stratified_folds(y, 3, seed=1)
    b = stratified_folds(y, 3, seed=1)
    assert all((ta == tb).all() for (_, ta), (_, tb) in zip(a, b, strict=True))
