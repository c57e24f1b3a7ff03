"""Learned heads: numpy serving agrees with scikit-learn, binary and absent classes, C choice."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from service.calibration.heads import LinearHead, _fit_one, choose_c, fit_head
from service.calibration.maths import DegenerateFit, accuracy, nll


def _blobs(n=300, d=12, k=3, seed=0, sep=2.0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, size=n)
    centres = rng.normal(size=(k, d)) * sep
    x = centres[y] + rng.normal(size=(n, d)) + 5.0  # offset: standardisation must handle it
    return x, y


def test_numpy_head_equals_sklearn_on_standardised_features():
    x, y = _blobs()
    head, _ = _fit_one(x, y, 3, c=0.1)
    xs = (x - x.mean(axis=0)) / x.std(axis=0)
    reference = LogisticRegression(C=0.1, max_iter=5000, tol=1e-10).fit(xs, y)
    assert np.allclose(head.predict_proba(x), reference.predict_proba(xs), atol=1e-4)


def test_binary_head_is_a_two_row_softmax_of_the_sigmoid():
    x, y = _blobs(k=2, seed=1)
    head, _ = _fit_one(x, y, 2, c=1.0)
    assert head.coef.shape == (2, x.shape[1])
    xs = (x - x.mean(axis=0)) / x.std(axis=0)
    reference = LogisticRegression(C=1.0, max_iter=5000, tol=1e-10).fit(xs, y)
    assert np.allclose(head.predict_proba(x), reference.predict_proba(xs), atol=1e-4)


def test_an_option_absent_from_training_gets_almost_no_mass():
    x, y = _blobs(k=3, seed=2)
    keep = y != 1
    head, _ = _fit_one(x[keep], y[keep], 3, c=1.0)
    p = head.predict_proba(x)
    assert p.shape == (len(x), 3)
    assert p[:, 1].max() < 1e-10
    assert np.allclose(p.sum(axis=1), 1.0)


def test_one_class_only_is_degenerate():
    x, _ = _blobs()
    with pytest.raises(DegenerateFit):
        _fit_one(x, np.zeros(len(x), dtype=int), 3, c=1.0)


def test_head_learns_a_linear_signal_out_of_sample():
    x, y = _blobs(n=400, seed=3)
    head = fit_head(x[:300], y[:300], 3)
    assert accuracy(head.predict_proba(x[300:]), y[300:]) > 0.9


def test_choose_c_returns_the_lowest_cross_validated_nll():
    x, y = _blobs(n=200, seed=4, sep=0.3)
    best, scores = choose_c(x, y, 3, cs=(1e-3, 1e-1, 10.0), folds=3)
    assert best == min(scores, key=scores.get)
    # weak signal and 12 noisy dimensions: the nearly unpenalised fit overfits
    assert scores[10.0] > scores[best]


def test_a_constant_feature_does_not_divide_by_zero():
    x, y = _blobs(seed=5)
    x[:, 0] = 3.0
    head = fit_head(x, y, 3, cs=(1.0,))
    assert np.all(np.isfinite(head.predict_proba(x)))
    assert nll(head.predict_proba(x), y) < 1.0


def test_inconsistent_shapes_are_refused():
    with pytest.raises(ValueError, match="inconsistent"):
        LinearHead(np.zeros(3), np.ones(3), np.zeros((2, 4)), np.zeros(2), c=1.0)
    with pytest.raises(ValueError, match="non-finite"):
        LinearHead(np.zeros(3), np.ones(3), np.full((2, 3), np.nan), np.zeros(2), c=1.0)


def test_wide_features_use_the_row_space_and_give_the_same_head():
    # 40 rows, 500 features: the fit runs on 40 coordinates and must match the direct fit
    rng = np.random.default_rng(6)
    y = rng.integers(0, 3, size=40)
    x = rng.normal(size=(3, 500))[y] * 0.3 + rng.normal(size=(40, 500))
    head, _ = _fit_one(x, y, 3, c=0.05)
    assert head.coef.shape == (3, 500)
    xs = (x - x.mean(axis=0)) / x.std(axis=0)
    reference = LogisticRegression(C=0.05, max_iter=10000, tol=1e-10).fit(xs, y)
    assert np.allclose(head.predict_proba(x), reference.predict_proba(xs), atol=1e-4)
    fresh = rng.normal(size=(5, 500))
    fresh_s = (fresh - x.mean(axis=0)) / x.std(axis=0)
    assert np.allclose(head.predict_proba(fresh), reference.predict_proba(fresh_s), atol=1e-4)
