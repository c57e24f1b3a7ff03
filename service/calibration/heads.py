"""Learned heads: a regularised multinomial logistic regression on the L2 hidden state.

Serving applies a head with numpy alone (`LinearHead.predict_proba`), so the worker never
imports scikit-learn; only fitting (`fit_head`, offline) does. A head is four arrays: the
standardisation (mean, scale) and the linear map (coef, intercept), always in the K-row
softmax form, binary questions included, so one formula serves every question.
"""

from __future__ import annotations

import warnings

import numpy as np

from service.calibration.maths import DegenerateFit, nll, softmax, stratified_folds

# Inverse regularisation strengths tried, strongest first. With ~900 features and a few
# hundred labels the useful range is strong regularisation; C = 1 is already nearly unpenalised.
DEFAULT_CS: tuple[float, ...] = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 1.0)
# The part of DEFAULT_CS that heads on 1,000+ labels choose (measured: 0.003-0.03 on 160 labels,
# weaker penalties with more labels): the nightly fit tries only these, which bounds its cost.
NARROW_CS: tuple[float, ...] = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
# Intercept given to an option never seen in training: exp(-30) ~ 1e-13, i.e. "never", but finite.
ABSENT_INTERCEPT = -30.0


class LinearHead:
    """p = softmax(((x - mean) / scale) @ coef.T + intercept) over the question's options."""

    def __init__(self, mean: np.ndarray, scale: np.ndarray, coef: np.ndarray, intercept: np.ndarray, c: float) -> None:
        self.mean = np.asarray(mean, dtype=np.float64)
        self.scale = np.asarray(scale, dtype=np.float64)
        self.coef = np.asarray(coef, dtype=np.float64)
        self.intercept = np.asarray(intercept, dtype=np.float64)
        self.c = float(c)
        d = self.mean.shape[0]
        k = self.intercept.shape[0]
        if self.mean.shape != (d,) or self.scale.shape != (d,) or self.coef.shape != (k, d):
            raise ValueError(
                f"inconsistent head shapes: mean {self.mean.shape}, scale "
                f"{self.scale.shape}, coef {self.coef.shape}, intercept ({k},)"
            )
        if not (
            np.all(np.isfinite(self.coef))
            and np.all(np.isfinite(self.intercept))
            and np.all(np.isfinite(self.mean))
            and np.all(self.scale > 0)
        ):
            raise ValueError("head holds non-finite weights or a non-positive scale")

    @property
    def dim(self) -> int:
        return int(self.mean.shape[0])

    @property
    def n_classes(self) -> int:
        return int(self.intercept.shape[0])

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        if x.shape[1] != self.dim:
            raise ValueError(f"head expects {self.dim} features, got {x.shape[1]}")
        return softmax(((x - self.mean) / self.scale) @ self.coef.T + self.intercept)


def _standardise(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    # A constant feature carries nothing; scale 1 keeps it at 0 instead of dividing by zero.
    scale = np.where(scale > 1e-8, scale, 1.0)
    return mean, scale


def _row_basis(xs: np.ndarray) -> np.ndarray:
    """Orthonormal rows spanning the row space of xs, from the small n x n Gram matrix."""
    eigval, eigvec = np.linalg.eigh(xs @ xs.T)
    keep = eigval > eigval.max() * 1e-10
    return (eigvec[:, keep].T @ xs) / np.sqrt(eigval[keep])[:, None]


def _fit_one(
    x: np.ndarray, y: np.ndarray, n_classes: int, c: float, model: object | None = None
) -> tuple[LinearHead, object]:
    from sklearn.linear_model import LogisticRegression

    present = np.unique(y)
    if len(present) < 2:
        raise DegenerateFit(f"only one class ({int(present[0])}) in the training labels")
    mean, scale = _standardise(x)
    xs = (x - mean) / scale
    # With many more features than rows (heads on every question's hidden state: 8 x 896) the
    # L2-penalised optimum lies in the row space of xs (representer theorem; the intercept is
    # unpenalised), so fitting on the n coordinates xs @ V.T and mapping back with V gives the
    # same head at a cost that no longer grows with the number of features.
    basis = _row_basis(xs) if xs.shape[1] > 2 * xs.shape[0] else None
    if basis is not None:
        xs = xs @ basis.T
    if model is None:
        model = LogisticRegression(C=c, max_iter=3000, tol=1e-5, warm_start=True)
    else:
        model.set_params(C=c)  # type: ignore[attr-defined]
    with warnings.catch_warnings():
        # A non-converged lbfgs at this tolerance still gives usable weights; CV NLL judges it.
        warnings.simplefilter("ignore")
        model.fit(xs, y)  # type: ignore[attr-defined]
    fitted = model.coef_  # type: ignore[attr-defined]
    if basis is not None:
        fitted = fitted @ basis
    coef = np.zeros((n_classes, x.shape[1]))
    intercept = np.full(n_classes, ABSENT_INTERCEPT)
    classes = model.classes_  # type: ignore[attr-defined]
    if len(classes) == 2:
        # sklearn keeps one row for binary problems: P(classes[1]) = sigmoid(w.x + b).
        intercept[classes[0]] = 0.0
        coef[classes[1]] = fitted[0]
        intercept[classes[1]] = model.intercept_[0]  # type: ignore[attr-defined]
    else:
        coef[classes] = fitted
        intercept[classes] = model.intercept_  # type: ignore[attr-defined]
    return LinearHead(mean, scale, coef, intercept, c), model


def fit_head_at(
    x: np.ndarray, y: np.ndarray, n_classes: int, c: float, warm: object | None = None
) -> tuple[LinearHead, object]:
    """One head at a given C; pass the returned estimator back as `warm` to warm-start the
    next C on the same rows."""
    return _fit_one(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.int64), n_classes, c, warm)


def choose_c(
    x: np.ndarray, y: np.ndarray, n_classes: int, cs: tuple[float, ...] = DEFAULT_CS, folds: int = 3, seed: int = 0
) -> tuple[float, dict[float, float]]:
    """The C with the lowest cross-validated NLL (standardisation refitted inside each fold)."""
    folds = max(2, min(folds, int(np.bincount(y).max())))
    scores: dict[float, list[float]] = {c: [] for c in cs}
    for train, test in stratified_folds(y, folds, seed):
        if len(np.unique(y[train])) < 2:
            continue
        model = None
        for c in sorted(cs):  # increasing C so each warm start begins from a nearby optimum
            head, model = _fit_one(x[train], y[train], n_classes, c, model)
            scores[c].append(nll(head.predict_proba(x[test]), y[test]) * len(test))
    totals = {c: float(np.sum(v)) / len(y) for c, v in scores.items() if v}
    if not totals:
        raise DegenerateFit("no fold had two classes to train on")
    best = min(totals, key=lambda c: (totals[c], c))  # ties: the stronger regularisation
    return best, totals


def fit_head(
    x: np.ndarray, y: np.ndarray, n_classes: int, cs: tuple[float, ...] = DEFAULT_CS, folds: int = 3, seed: int = 0
) -> LinearHead:
    """Choose C by inner cross-validation, then fit on every row given."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    if len(cs) == 1:
        c = cs[0]
    else:
        c, _ = choose_c(x, y, n_classes, cs, folds, seed)
    head, _ = _fit_one(x, y, n_classes, c)
    return head
