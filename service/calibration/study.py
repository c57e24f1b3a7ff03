"""The measurements behind the calibration's choices: which hidden-state features the risk head
reads, what the green gate costs and catches, how the service does on a source it was not
tuned on, and how many labels automation takes (the learning curve).

Each figure grades tickets the head, its threshold and its gate were not fitted on: thresholds
come from out-of-fold probabilities on the training tickets, and the graded tickets belong to
another source (or, for the learning curve, to a set never sampled for training). Offline only
(scikit-learn through the heads); every input is a cached replay, so no model runs here.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from service.calibration.heads import NARROW_CS, fit_head
from service.calibration.maths import stratified_folds
from service.calibration.ood import fit_gate, fitted_distances, loo_distances, mean_nearest
from service.calibration.replay import Example, feature_names
from service.calibration.thresholds import GREEN, GreenChoice, choose_green

RISK = ("green", "yellow", "red")
CASCADE_BAND_FROM = 0.9  # P(green) from which a ticket under the green threshold counts as "just under"
STUDY_CS: tuple[float, ...] = NARROW_CS


@dataclass
class Arrays:
    ids: list[str]
    x: np.ndarray
    y: np.ndarray  # risk index
    gate_x: np.ndarray | None
    language: list[str]
    source: list[str]


def arrays(examples: Iterable[Example], names: tuple[str, ...], gate_names: tuple[str, ...] = ()) -> Arrays:
    """Rows of the examples that carry a risk label and every named vector."""
    ids, xs, ys, gs, langs, sources = [], [], [], [], [], []
    for e in examples:
        risk = e.labels.get("risk")
        if risk not in RISK or not all(n in e.features for n in names + gate_names):
            continue
        ids.append(e.id)
        xs.append(np.concatenate([e.features[n] for n in names]))
        if gate_names:
            gs.append(np.concatenate([e.features[n] for n in gate_names]))
        ys.append(RISK.index(risk))
        langs.append(e.language)
        sources.append(e.source)
    return Arrays(
        ids,
        np.asarray(xs, dtype=np.float64),
        np.asarray(ys, dtype=np.int64),
        np.asarray(gs, dtype=np.float64) if gate_names else None,
        langs,
        sources,
    )


def auc(scores: np.ndarray, positive: np.ndarray) -> float | None:
    """Area under the ROC curve (Mann-Whitney), None without both classes."""
    from scipy.stats import rankdata

    pos = np.asarray(positive, dtype=bool)
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if not n_pos or not n_neg:
        return None
    ranks = rankdata(scores)
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


@dataclass
class Fitted:
    head: object
    threshold: float
    gate: object | None
    green_choice: object
    fit_s: float
    train_gate_blocked: float  # share of training greens the gate holds back
    oof: np.ndarray | None = None  # out-of-fold P(green) of the training rows
    blocked: np.ndarray | None = None  # training rows the gate holds back


class MlpHead:
    """A small non-linear risk head (one hidden layer), for the study only: it is shipped only
    if it beats the linear head on tickets it was not fitted on."""

    def __init__(self, x: np.ndarray, y: np.ndarray, seed: int) -> None:
        from sklearn.neural_network import MLPClassifier

        self.mean = x.mean(axis=0)
        self.scale = np.where(x.std(axis=0) > 1e-8, x.std(axis=0), 1.0)
        self.model = MLPClassifier(
            hidden_layer_sizes=(64,), alpha=1e-2, max_iter=400, early_stopping=True, random_state=seed
        )
        self.model.fit((x - self.mean) / self.scale, y)

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        p = self.model.predict_proba((np.atleast_2d(x) - self.mean) / self.scale)
        out = np.zeros((len(p), 3))
        out[:, self.model.classes_] = p
        return out


class BaggedHead:
    """Linear heads on bootstrap resamples of the training rows; P(green) is the lowest any of
    them gives (green only when every resample's head agrees), the other options their mean,
    rescaled to the rest. The issue's "independently fitted heads disagree" test, for the study
    only: it is shipped only if it clears more greens without false greens on other sources."""

    def __init__(self, x: np.ndarray, y: np.ndarray, cs: tuple[float, ...], seed: int, heads: int = 8) -> None:
        rng = np.random.default_rng(seed)
        c = (cs[0],) if len(cs) == 1 else (fit_head(x, y, 3, cs, 3, seed).c,)  # one C, chosen once
        self.heads = []
        while len(self.heads) < heads:
            rows = rng.choice(len(y), size=len(y), replace=True)
            if len(np.unique(y[rows])) == 3:  # a resample without a class fits another question
                self.heads.append(fit_head(x[rows], y[rows], 3, c, 3, seed))

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        each = np.stack([head.predict_proba(x) for head in self.heads])
        green = each[:, :, GREEN].min(axis=0)
        rest = np.delete(each.mean(axis=0), GREEN, axis=1)
        rest *= ((1.0 - green) / np.maximum(rest.sum(axis=1), 1e-12))[:, None]
        return np.insert(rest, GREEN, green, axis=1)


HEAD_KINDS = ("linear", "mlp", "bagged")


def _head(x: np.ndarray, y: np.ndarray, cs: tuple[float, ...], seed: int, kind: str):
    if kind == "mlp":
        return MlpHead(x, y, seed)
    if kind == "bagged":
        return BaggedHead(x, y, cs, seed)
    return fit_head(x, y, 3, cs, 3, seed)


def fit_green(
    train: Arrays,
    *,
    folds: int = 5,
    seed: int = 0,
    cs: tuple[float, ...] = STUDY_CS,
    max_rate: float = 0.01,
    gate_quantile: float | None = 0.95,
    head: str = "linear",
) -> Fitted:
    """Risk head on every training row, its green threshold from out-of-fold P(green) (each
    fold's head choosing C by its own inner folds), and the green gate."""
    started = time.perf_counter()
    oof = np.full(len(train.y), np.nan)
    for tr, te in stratified_folds(train.y, folds, seed):
        model = _head(train.x[tr], train.y[tr], cs, seed, head)
        oof[te] = model.predict_proba(train.x[te])[:, GREEN]
    head_model = _head(train.x, train.y, cs, seed, head)
    gate, blocked = None, np.zeros(len(train.y), dtype=bool)
    if gate_quantile is not None and train.gate_x is not None:
        green = train.y == GREEN
        gate = fit_gate(train.gate_x, green, [], quantile=gate_quantile)
        blocked = fitted_distances(gate, train.gate_x, green) > gate.info.threshold
    choice = choose_green(oof[~blocked], train.y[~blocked], max_rate=max_rate)
    green = train.y == GREEN
    return Fitted(
        head=head_model,
        threshold=choice.threshold,
        gate=gate,
        green_choice=choice,
        fit_s=time.perf_counter() - started,
        train_gate_blocked=float(blocked[green].mean()) if green.any() else 0.0,
        oof=oof,
        blocked=blocked,
    )


def grade(fitted: Fitted, graded: Arrays, thresholds: np.ndarray | None = None) -> dict:
    """Risk-only green decisions on tickets the fit never saw: what a helpdesk gains and risks.
    `thresholds`: one green threshold per graded ticket (source_thresholds) instead of the fit's."""
    p = fitted.head.predict_proba(graded.x)[:, GREEN]  # type: ignore[attr-defined]
    green = graded.y == GREEN
    over = p >= (fitted.threshold if thresholds is None else thresholds)
    blocked = np.zeros(len(p), dtype=bool)
    if fitted.gate is not None and graded.gate_x is not None:
        blocked = fitted.gate.distances(graded.gate_x) > fitted.gate.info.threshold  # type: ignore[attr-defined]
    auto = over & ~blocked
    # What a second opinion (the cascade to a larger model) could at most gain: the tickets the
    # gate lets through that land just under the threshold.
    band = (p >= CASCADE_BAND_FROM) & ~over & ~blocked
    return {
        "n": len(p),
        "greens": int(green.sum()),
        "auc_green": auc(p, green),
        "greens_cleared": float(auto[green].mean()) if green.any() else None,
        "answered_automatically": float(auto.mean()) if len(p) else None,
        "false_greens": int((auto & ~green).sum()),
        "false_green_ids": [i for i, a, g in zip(graded.ids, auto, green, strict=True) if a and not g],
        "false_greens_without_gate": int((over & ~green).sum()),
        "blocked_by_gate": int((over & blocked).sum()),
        "non_greens_blocked_by_gate": int((over & blocked & ~green).sum()),
        "greens_blocked_by_gate": int((over & blocked & green).sum()),
        "under_threshold_band": {
            "from": CASCADE_BAND_FROM,
            "greens": int((band & green).sum()),
            "non_greens": int((band & ~green).sum()),
        },
    }


# A source's own green threshold needs this many labels: with fewer, its few non-greens make a
# zero-false-green threshold that only looks safe (dev's 160 labels, allowed with a minimum of
# 100: docs/results/study-sources-local-min100.json).
SOURCE_MIN_LABELS = 300


@dataclass
class SourceThreshold:
    """One fitted source's own green threshold, and where its greens lie in the gate's space."""

    source: str
    n: int
    threshold: float
    references: np.ndarray  # its greens, projected as the gate projects
    radius: float  # the quantile of its greens' own mean distances to their k nearest others
    choice: GreenChoice  # how the threshold was chosen: its rule, bound and counts


def source_thresholds(
    fitted: Fitted,
    train: Arrays,
    quantile: float,
    *,
    k: int = 5,
    min_labels: int = SOURCE_MIN_LABELS,
    max_rate: float = 0.01,
) -> list[SourceThreshold]:
    """Per fitted source with enough labels: the green threshold chosen as the fit's is, on that
    source's own out-of-fold P(green), and the neighbourhood of its greens.

    One threshold for all sources sits above every source's most confident non-green, so a
    source whose non-greens look like greens (public-style's vendor-voice yellows) sets it for
    tickets that resemble none of them. A ticket as near a source's greens as `quantile` of
    them are to each other is held to that source's threshold instead (ticket_thresholds)."""
    if fitted.gate is None or train.gate_x is None or fitted.oof is None or fitted.blocked is None:
        return []
    z = fitted.gate.project(train.gate_x)  # type: ignore[attr-defined]
    source = np.asarray(train.source)
    out = []
    for name in sorted(set(train.source)):
        rows = source == name
        references = z[rows & (train.y == GREEN)]
        if rows.sum() < min_labels or len(references) <= k:
            continue
        keep = rows & ~fitted.blocked
        choice = choose_green(fitted.oof[keep], train.y[keep], max_rate=max_rate)
        radius = float(np.quantile(loo_distances(references, k), quantile))
        out.append(SourceThreshold(name, int(rows.sum()), float(choice.threshold), references, radius, choice))
    return out


def ticket_thresholds(fitted: Fitted, local: list[SourceThreshold], graded: Arrays, *, k: int = 5) -> np.ndarray:
    """Each graded ticket's green threshold: the fit's, unless it lies within the neighbourhood
    of some sources' greens; then the highest of those sources' own thresholds."""
    thresholds = np.full(len(graded.y), fitted.threshold)
    if not local or fitted.gate is None or graded.gate_x is None:
        return thresholds
    z = fitted.gate.project(graded.gate_x)  # type: ignore[attr-defined]
    near = np.stack([mean_nearest(z, s.references, k) <= s.radius for s in local])
    own = np.array([s.threshold for s in local])[:, None]
    return np.where(near.any(axis=0), np.where(near, own, -np.inf).max(axis=0), thresholds)


def feature_study(
    sources: dict[str, list[Example]],
    train: str,
    graded: list[str],
    specs: list[str],
    questions: list[str],
    n_layer: int,
    gate_spec: str | None,
    head: str = "linear",
) -> dict:
    """Per feature set: fitted on `train`, graded on each of `graded` (no gate, then gated)."""
    out: dict = {"train": train, "graded": graded, "gate": gate_spec, "head": head, "sets": {}}
    gate_names = feature_names(gate_spec, questions, n_layer) if gate_spec else ()
    for spec in specs:
        names = feature_names(spec, questions, n_layer)
        tr = arrays(sources[train], names, gate_names)
        fitted = fit_green(tr, gate_quantile=0.95 if gate_spec else None, head=head)
        row = {
            "dims": int(tr.x.shape[1]),
            "n_train": len(tr.y),
            "fit_s": round(fitted.fit_s, 1),
            "threshold": fitted.threshold,
            "rule": fitted.green_choice.rule,
            "train_greens_cleared_oof": fitted.green_choice.greens_cleared,
            "train_gate_blocked": fitted.train_gate_blocked,
            "graded": {},
        }
        for name in graded:
            row["graded"][name] = grade(fitted, arrays(sources[name], names, gate_names))
        out["sets"][spec] = row
    return out


def cross_source(
    sources: dict[str, list[Example]],
    spec: str,
    gate_spec: str | None,
    questions: list[str],
    n_layer: int,
    head: str = "linear",
    source_quantiles: tuple[float, ...] = (),
    source_min_labels: int = SOURCE_MIN_LABELS,
) -> dict:
    """Each source graded by a fit on all the others: the service on a style it was not tuned on.
    With `source_quantiles`, also graded with per-source thresholds (source_thresholds), one
    neighbourhood quantile at a time."""
    names = feature_names(spec, questions, n_layer)
    gate_names = feature_names(gate_spec, questions, n_layer) if gate_spec else ()
    out: dict = {"features": spec, "gate": gate_spec, "head": head, "held_out": {}}
    if source_quantiles:
        out["source_min_labels"] = source_min_labels
    for held in sources:
        pool = arrays([e for s, ex in sources.items() if s != held for e in ex], names, gate_names)
        fitted = fit_green(pool, gate_quantile=0.95 if gate_spec else None, head=head)
        graded = arrays(sources[held], names, gate_names)
        result = grade(fitted, graded)
        result.update(
            threshold=fitted.threshold, rule=fitted.green_choice.rule, trained_on=[s for s in sources if s != held]
        )
        if source_quantiles:
            result["per_source_thresholds"] = {}
            for q in source_quantiles:
                local = source_thresholds(fitted, pool, q, min_labels=source_min_labels)
                graded_q = grade(fitted, graded, ticket_thresholds(fitted, local, graded))
                graded_q["sources"] = [
                    {
                        "source": s.source,
                        "n": s.n,
                        "threshold": s.threshold,
                        "radius": s.radius,
                        "rule": s.choice.rule,
                        "n_chosen_on": s.choice.n,
                        "n_auto": s.choice.n_auto,
                        "upper_bound": s.choice.upper_bound,
                        "max_rate": s.choice.max_rate,
                    }
                    for s in local
                ]
                result["per_source_thresholds"][str(q)] = graded_q
        out["held_out"][held] = result
    return out


def learning_curve(
    pool: list[Example],
    graded: dict[str, list[Example]],
    spec: str,
    gate_spec: str | None,
    questions: list[str],
    n_layer: int,
    sizes: tuple[int, ...] = (50, 100, 200, 400, 800),
    repeats: int = 3,
    seed: int = 0,
) -> dict:
    """Refit on random subsets of the pool (stratified by risk) and grade the other sets."""
    names = feature_names(spec, questions, n_layer)
    gate_names = feature_names(gate_spec, questions, n_layer) if gate_spec else ()
    full = arrays(pool, names, gate_names)
    graded_arrays = {k: arrays(v, names, gate_names) for k, v in graded.items()}
    rng = np.random.default_rng(seed)
    points = []
    for size in [s for s in sizes if s < len(full.y)] + [len(full.y)]:
        for r in range(repeats if size < len(full.y) else 1):
            idx = _stratified_sample(full.y, size, rng)
            sub = Arrays(
                [full.ids[i] for i in idx],
                full.x[idx],
                full.y[idx],
                None if full.gate_x is None else full.gate_x[idx],
                [full.language[i] for i in idx],
                [full.source[i] for i in idx],
            )
            fitted = fit_green(
                sub, folds=3 if size < 200 else 5, seed=seed + r, gate_quantile=0.95 if gate_spec else None
            )
            point = {
                "labels": size,
                "repeat": r,
                "fit_s": round(fitted.fit_s, 2),
                "threshold": fitted.threshold,
                "rule": fitted.green_choice.rule,
            }
            for name, arr in graded_arrays.items():
                g = grade(fitted, arr)
                point[name] = {k: g[k] for k in ("greens_cleared", "false_greens", "answered_automatically")}
            points.append(point)
    return {"features": spec, "gate": gate_spec, "pool": len(full.y), "points": points}


def _stratified_sample(y: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    if size >= len(y):
        return np.arange(len(y))
    picked = []
    for c in np.unique(y):
        rows = np.flatnonzero(y == c)
        take = max(2, round(size * len(rows) / len(y)))
        picked.extend(rng.choice(rows, size=min(take, len(rows)), replace=False))
    return np.asarray(sorted(picked))


def plot_curve(report: dict, path: str) -> None:
    """Greens cleared and false greens against the number of labels, one line per graded set."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = report["points"]
    graded = [k for k in points[0] if isinstance(points[0][k], dict)]
    sizes = sorted({p["labels"] for p in points})
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for name in graded:
        cleared = [np.mean([p[name]["greens_cleared"] or 0 for p in points if p["labels"] == s]) for s in sizes]
        false = [np.mean([p[name]["false_greens"] for p in points if p["labels"] == s]) for s in sizes]
        ax1.plot(sizes, cleared, marker="o", label=name)
        ax2.plot(sizes, false, marker="o", label=name)
    for ax, title in ((ax1, "greens cleared (share)"), (ax2, "false greens (count)")):
        ax.set_xscale("log")
        ax.set_xlabel("labelled tickets the heads were fitted on")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend()
    ax1.set_ylim(0, 1)
    fig.suptitle(f"Learning curve: features {report['features']}, gate {report['gate']}")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
