"""Calibration maths: softmax, NLL, ECE, reliability bins, temperature and vector scaling, folds.

Pure functions on numpy arrays, no I/O, so every figure the recalibration job reports can be
checked on a hand-computed example. Conventions used throughout:

- `logits` is an (n, K) array of unnormalised log-scores per option (any additive constant per
  row is irrelevant: softmax removes it), `y` an (n,) array of class indices into the K options.
- ECE is the top-label expected calibration error (Guo et al. 2017) over equal-width bins on
  [0, 1]: bin b holds the rows whose confidence c = max_k p_k lies in (b/B, (b+1)/B], the first
  bin also takes c = 0. ECE = sum_b (n_b / n) * |accuracy_b - mean confidence_b|.
"""

from __future__ import annotations

import msgspec
import numpy as np

from service.errors import DegenerateFit
from service.l2.answers import log_softmax  # one definition: serving's

N_BINS = 15
# Probabilities are clipped here before taking logs, so one confident mistake costs at most
# -log(1e-12) ~ 27.6 nats instead of infinity: NLL stays comparable between candidates.
EPS = 1e-12
# Temperature search range. Outside it the fit is degenerate (T -> 0: one-hot; T -> inf: uniform)
# and the caller refuses it rather than ship a calibrator that erases the model's signal.
T_MIN, T_MAX = 0.02, 50.0


def softmax(z: np.ndarray) -> np.ndarray:
    return np.exp(log_softmax(z))


def logits_from_probs(p: np.ndarray) -> np.ndarray:
    """Log-probabilities, clipped: the inverse of softmax up to a per-row constant."""
    return np.log(np.clip(np.asarray(p, dtype=np.float64), EPS, 1.0))


def nll(probs: np.ndarray, y: np.ndarray) -> float:
    """Mean negative log-likelihood of the true classes, in nats."""
    probs = np.asarray(probs, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    if len(y) == 0:
        raise ValueError("nll of an empty set")
    picked = probs[np.arange(len(y)), y]
    return float(-np.log(np.clip(picked, EPS, 1.0)).mean())


def accuracy(probs: np.ndarray, y: np.ndarray) -> float:
    return float((np.asarray(probs).argmax(axis=1) == np.asarray(y)).mean())


class Reliability(msgspec.Struct, frozen=True):
    """Per-bin counts, mean confidence and accuracy: the data behind a reliability diagram."""

    edges: list[float]
    counts: list[int]
    confidence: list[float]  # mean confidence of the bin (0 when empty)
    accuracy: list[float]  # fraction correct in the bin (0 when empty)
    ece: float


def bin_index(confidence: np.ndarray, n_bins: int = N_BINS) -> np.ndarray:
    """Bin of each confidence: (b/B, (b+1)/B] is bin b; 0 goes to bin 0."""
    c = np.asarray(confidence, dtype=np.float64)
    return np.clip(np.ceil(c * n_bins).astype(np.int64) - 1, 0, n_bins - 1)


def reliability(probs: np.ndarray, y: np.ndarray, n_bins: int = N_BINS) -> Reliability:
    probs = np.asarray(probs, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    if len(y) == 0:
        raise ValueError("reliability of an empty set")
    conf = probs.max(axis=1)
    correct = (probs.argmax(axis=1) == y).astype(np.float64)
    bins = bin_index(conf, n_bins)
    counts = np.bincount(bins, minlength=n_bins)
    conf_sum = np.bincount(bins, weights=conf, minlength=n_bins)
    acc_sum = np.bincount(bins, weights=correct, minlength=n_bins)
    safe = np.maximum(counts, 1)
    mean_conf = np.where(counts > 0, conf_sum / safe, 0.0)
    mean_acc = np.where(counts > 0, acc_sum / safe, 0.0)
    ece_value = float((counts / len(y) * np.abs(mean_acc - mean_conf)).sum())
    return Reliability(
        edges=[b / n_bins for b in range(n_bins + 1)],
        counts=[int(c) for c in counts],
        confidence=[float(c) for c in mean_conf],
        accuracy=[float(a) for a in mean_acc],
        ece=ece_value,
    )


def ece(probs: np.ndarray, y: np.ndarray, n_bins: int = N_BINS) -> float:
    return reliability(probs, y, n_bins).ece


# --- temperature and vector scaling -------------------------------------------------------------


class Scaling(msgspec.Struct, frozen=True):
    """p = softmax(logits / temperature + bias); bias all zeros for plain temperature scaling."""

    temperature: float
    bias: list[float]

    def apply(self, logits: np.ndarray) -> np.ndarray:
        z = np.asarray(logits, dtype=np.float64)
        return softmax(z / self.temperature + np.asarray(self.bias, dtype=np.float64))


def _centre(z: np.ndarray) -> np.ndarray:
    # Per-row centring keeps exp() in range for raw log-probs around -30 without changing softmax.
    z = np.asarray(z, dtype=np.float64)
    return z - z.max(axis=1, keepdims=True)


def fit_temperature(logits: np.ndarray, y: np.ndarray) -> Scaling:
    """The temperature T minimising NLL of softmax(logits / T); searched over log T."""
    from scipy.optimize import minimize_scalar  # offline only: serving never fits

    z = _centre(logits)
    y = np.asarray(y, dtype=np.int64)
    rows = np.arange(len(y))

    def objective(log_t: float) -> float:
        lp = log_softmax(z / np.exp(log_t))
        return float(-lp[rows, y].mean())

    lo, hi = np.log(T_MIN), np.log(T_MAX)
    res = minimize_scalar(objective, bounds=(lo, hi), method="bounded", options={"xatol": 1e-6})
    if not res.success:
        raise DegenerateFit(f"temperature search failed: {res.message}")
    # An optimum pinned to the edge means NLL keeps falling towards one-hot or uniform output.
    if res.x - lo < 1e-3 or hi - res.x < 1e-3:
        raise DegenerateFit(f"temperature ran to the edge of [{T_MIN}, {T_MAX}]: T = {float(np.exp(res.x)):.4g}")
    return Scaling(temperature=float(np.exp(res.x)), bias=[0.0] * z.shape[1])


def fit_vector(logits: np.ndarray, y: np.ndarray, l2: float = 1e-2) -> Scaling:
    """Temperature plus a per-option bias, NLL with a small L2 penalty on the bias.

    The penalty fixes the bias's free additive constant (softmax ignores it) and keeps a
    bias for an option seen a handful of times from running off to infinity.
    """
    from scipy.optimize import minimize  # offline only: serving never fits

    z = _centre(logits)
    y = np.asarray(y, dtype=np.int64)
    n, k = z.shape
    onehot = np.zeros((n, k))
    onehot[np.arange(n), y] = 1.0
    start = fit_temperature(z, y)

    def objective(params: np.ndarray) -> tuple[float, np.ndarray]:
        log_t, bias = params[0], params[1:]
        inv_t = np.exp(-log_t)
        s = z * inv_t + bias
        lp = log_softmax(s)
        p = np.exp(lp)
        loss = -(lp * onehot).sum() / n + l2 * float(bias @ bias)
        d_s = (p - onehot) / n  # dloss/ds
        g_bias = d_s.sum(axis=0) + 2 * l2 * bias
        g_log_t = float((d_s * (-z * inv_t)).sum())
        return float(loss), np.concatenate([[g_log_t], g_bias])

    x0 = np.concatenate([[np.log(start.temperature)], np.zeros(k)])
    bounds = [(np.log(T_MIN), np.log(T_MAX))] + [(-20.0, 20.0)] * k
    res = minimize(objective, x0, jac=True, method="L-BFGS-B", bounds=bounds)
    if not np.all(np.isfinite(res.x)):
        raise DegenerateFit("vector scaling diverged")
    bias = res.x[1:] - res.x[1:].mean()
    return Scaling(temperature=float(np.exp(res.x[0])), bias=[float(b) for b in bias])


# --- folds --------------------------------------------------------------------------------------


def stratified_folds(y: np.ndarray, k: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """k (train, test) index pairs; each class is dealt round-robin over the folds after a shuffle.

    Every test fold then holds about n_c / k rows of each class c, and no row is ever in the
    train and test half of the same pair.
    """
    y = np.asarray(y, dtype=np.int64)
    if k < 2:
        raise ValueError("need at least 2 folds")
    if len(y) < k:
        raise ValueError(f"{len(y)} rows cannot make {k} folds")
    rng = np.random.default_rng(seed)
    fold_of = np.empty(len(y), dtype=np.int64)
    offset = 0
    for cls in np.unique(y):
        idx = np.flatnonzero(y == cls)
        rng.shuffle(idx)
        # Continue the round-robin where the previous class stopped so fold sizes stay even.
        fold_of[idx] = (np.arange(len(idx)) + offset) % k
        offset += len(idx)
    everything = np.arange(len(y))
    return [(everything[fold_of != f], everything[fold_of == f]) for f in range(k)]
