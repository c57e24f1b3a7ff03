"""The green gate: green only for tickets whose hidden state is like the labelled greens.

A head trained on one style of ticket can be confidently wrong on another: tickets written
unlike anything it saw land where it has seen only greens. The policy asks for positive evidence
before green, so a ticket far from every labelled green is not green, whatever P(green) says.

The distance is measured in a whitened principal subspace of the gate's input vectors (a
Mahalanobis distance restricted to the directions the labelled tickets vary in): the mean
distance to the k nearest labelled greens. The threshold is a quantile of the same statistic
over the labelled greens themselves (each left out of its own neighbours), so its cost in
distribution is known in advance: about 1 - quantile of the greens are held back.

Serving applies a gate with numpy alone; `fit_gate` is offline and pure.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec
import numpy as np


class GateInfo(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The gate as artifact.json records it; its arrays live in heads.npz under "gate.*"."""

    inputs: list[str]  # feature names concatenated, as service.l2.decide names them
    dims: int  # principal components kept
    k: int  # neighbours averaged
    quantile: float  # of the labelled greens' own distances: the threshold
    threshold: float
    n_references: int  # labelled greens the distances are measured to
    greens_blocked: float  # share of labelled greens over the threshold (left out of their own)


GATE_ARRAYS = ("mean", "scale", "basis", "references")


class GreenGate:
    """distance(x) = mean of the k smallest whitened distances to the reference greens."""

    def __init__(
        self, info: GateInfo, mean: np.ndarray, scale: np.ndarray, basis: np.ndarray, references: np.ndarray
    ) -> None:
        self.info = info
        self.mean = np.asarray(mean, dtype=np.float64)
        self.scale = np.asarray(scale, dtype=np.float64)
        self.basis = np.asarray(basis, dtype=np.float64)  # (dims, d), whitening folded in
        self.references = np.asarray(references, dtype=np.float64)  # (n_ref, dims)
        d = self.mean.shape[0]
        if (
            self.scale.shape != (d,)
            or self.basis.shape != (info.dims, d)
            or self.references.shape != (info.n_references, info.dims)
        ):
            raise ValueError(
                f"inconsistent gate shapes: mean {self.mean.shape}, basis "
                f"{self.basis.shape}, references {self.references.shape}"
            )
        if not (np.all(np.isfinite(self.basis)) and np.all(np.isfinite(self.references)) and np.all(self.scale > 0)):
            raise ValueError("gate holds non-finite values or a non-positive scale")

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        return dict(zip(GATE_ARRAYS, (self.mean, self.scale, self.basis, self.references), strict=True))

    def project(self, x: np.ndarray) -> np.ndarray:
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        return ((x - self.mean) / self.scale) @ self.basis.T

    def distances(self, x: np.ndarray) -> np.ndarray:
        """(n,) gate statistic of each row of x."""
        return mean_nearest(self.project(x), self.references, self.info.k)

    def vector(self, features: Mapping[str, np.ndarray]) -> np.ndarray | None:
        """The gate's input for one ticket, or None when a feature is missing or misshapen."""
        parts = []
        for name in self.info.inputs:
            v = features.get(name)
            if v is None:
                return None
            parts.append(np.asarray(v, dtype=np.float64).ravel())
        x = np.concatenate(parts)
        return x if x.shape == self.mean.shape else None

    def check(self, features: Mapping[str, np.ndarray]) -> tuple[bool, float | None]:
        """(green allowed, distance). A ticket the gate cannot measure is not allowed."""
        x = self.vector(features)
        if x is None:
            return False, None
        distance = float(self.distances(x)[0])
        return bool(distance <= self.info.threshold), distance


def mean_nearest(z: np.ndarray, references: np.ndarray, k: int) -> np.ndarray:
    """(n,) each row of z's mean distance to its k nearest rows of `references`."""
    d2 = np.sum(z * z, axis=1)[:, None] + np.sum(references**2, axis=1)[None, :] - 2.0 * z @ references.T
    dist = np.sqrt(np.maximum(d2, 0.0))
    k = min(k, dist.shape[1])
    return np.sort(dist, axis=1)[:, :k].mean(axis=1)


def loo_distances(z: np.ndarray, k: int) -> np.ndarray:
    """Each row's mean distance to its k nearest other rows."""
    d2 = np.sum(z * z, axis=1)[:, None] + np.sum(z * z, axis=1)[None, :] - 2.0 * z @ z.T
    dist = np.sqrt(np.maximum(d2, 0.0))
    np.fill_diagonal(dist, np.inf)
    k = min(k, len(z) - 1)
    return np.sort(dist, axis=1)[:, :k].mean(axis=1)


def fit_gate(
    x: np.ndarray, green: np.ndarray, inputs: list[str], *, dims: int = 32, k: int = 5, quantile: float = 0.95
) -> GreenGate:
    """A gate from every labelled ticket's input vector `x` (n, d) and which are green.

    The subspace is fitted on all tickets (it only needs to span how tickets vary); the
    references and the threshold come from the greens alone.
    """
    x = np.asarray(x, dtype=np.float64)
    green = np.asarray(green, dtype=bool)
    if green.sum() < max(k + 1, 10):
        raise ValueError(f"{int(green.sum())} labelled greens are too few for a gate")
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale = np.where(scale > 1e-8, scale, 1.0)
    xs = (x - mean) / scale
    _u, sv, vt = np.linalg.svd(xs, full_matrices=False)
    dims = int(min(dims, len(sv)))
    # Whitening: each component divided by its standard deviation over the tickets.
    std = sv[:dims] / np.sqrt(max(len(x) - 1, 1))
    basis = vt[:dims] / np.where(std > 1e-12, std, 1.0)[:, None]
    references = xs[green] @ basis.T
    own = loo_distances(references, k)
    threshold = float(np.quantile(own, quantile))
    info = GateInfo(
        inputs=list(inputs),
        dims=dims,
        k=k,
        quantile=quantile,
        threshold=threshold,
        n_references=int(green.sum()),
        greens_blocked=float((own > threshold).mean()),
    )
    return GreenGate(info, mean, scale, basis, references)


def fitted_distances(gate: GreenGate, x: np.ndarray, green: np.ndarray) -> np.ndarray:
    """The gate statistic of the tickets it was fitted on, each green left out of its own
    references (else every green would be its own nearest neighbour, at distance 0)."""
    z = gate.project(x)
    refs = gate.references
    d2 = np.sum(z * z, axis=1)[:, None] + np.sum(refs**2, axis=1)[None, :] - 2.0 * z @ refs.T
    dist = np.sqrt(np.maximum(d2, 0.0))
    green_rows = np.flatnonzero(np.asarray(green, dtype=bool))
    dist[green_rows, np.arange(len(green_rows))] = np.inf  # references are the greens, in order
    k = min(gate.info.k, refs.shape[0] - 1)
    return np.sort(dist, axis=1)[:, :k].mean(axis=1)
