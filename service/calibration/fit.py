"""Fitting a calibration from labelled tickets: choose a map per question, then thresholds.

Offline only (imports scikit-learn through heads.fit_head). Pure: arrays in, Structs out.

Per question, the candidates (raw softmax, temperature, vector scaling, learned head) are
compared by k-fold cross-validated NLL on the same tickets; the lowest wins (vector scaling is
thus kept only where its cross-validated NLL beats temperature's). Thresholds are chosen on the
out-of-fold probabilities of the winners. `calibrate` then repeats the whole procedure inside an
outer k-fold (nested cross-validation), so every reported figure -- ECE after, NLL after,
accuracy, the confusion matrix at the chosen thresholds -- grades tickets that neither the maps
nor the thresholds saw.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import msgspec
import numpy as np

from service.calibration.artifact import Candidate
from service.calibration.calibrator import HEADS, Method, QuestionModel
from service.calibration.heads import DEFAULT_CS, fit_head, fit_head_at
from service.calibration.maths import (
    DegenerateFit,
    accuracy,
    ece,
    fit_temperature,
    fit_vector,
    nll,
    softmax,
    stratified_folds,
)
from service.calibration.ood import GreenGate, fit_gate, fitted_distances
from service.calibration.thresholds import (
    DEFAULT_GRID,
    RED,
    GreenChoice,
    LevelSummary,
    RedChoice,
    YellowFlagChoice,
    above_all,
    choose_green,
    choose_red,
    choose_yellow_flag,
    levels,
    summarise,
)
from service.errors import Refused
from service.l2.decision import Thresholds
from service.results import RED_FLAGS

CALIBRATED: tuple[str, ...] = ("risk", *RED_FLAGS, "category", "urgency")
# Questions the thresholds depend on: too few labels here refuses the whole run.
REQUIRED: tuple[str, ...] = ("risk", *RED_FLAGS)
RISK_OPTIONS = ("green", "yellow", "red")


class FitConfig(msgspec.Struct, frozen=True, kw_only=True):
    folds: int = 5
    seed: int = 0
    min_per_class: int = 15
    # vector scaling and the per-question head never won on the 1,631 labels they were measured
    # on (train, dev, public-style's first part; that artifact's report listed every candidate's
    # CV NLL): they are not fitted by default, which
    # keeps the nightly fit's cost down. temperature stays: cheap, and the map when no hidden
    # states came with the labels.
    methods: tuple[Method, ...] = ("raw", "temperature", "head_all")
    cs: tuple[float, ...] = DEFAULT_CS
    head_folds: int = 3  # inner folds choosing C when a head is fitted alone (fit_head)
    green_floor: float = 0.8  # the conservative green threshold when no rate can be bounded
    green_margin: float = 0.02
    max_false_green_rate: float = 0.01  # the bound the green threshold must certify
    confidence: float = 0.95
    red_target: float = 0.9
    grid: tuple[float, ...] = DEFAULT_GRID
    yellow_flags: dict[str, float] = msgspec.field(default_factory=lambda: dict(Thresholds().yellow_flags))
    # The green gate (service.calibration.ood): off when the dataset carries no gate inputs.
    gate_dims: int = 32
    gate_k: int = 5
    gate_quantile: float = 0.95
    # Choose the green threshold only on tickets the rule pack leaves at "none": as served,
    # max(L1, L2) keeps every other ticket from green whatever P(green) says. It lowers the
    # threshold by as much as the rules catch of the confident non-greens, so it holds only
    # with the rule pack it was fitted with (ArtifactMeta.rules_sha) and only as far as the
    # rules generalise; off by default (docs/calibration.md, "Green threshold after L1").
    green_after_l1: bool = False


@dataclass
class QuestionData:
    """One question over the dataset's tickets (rows aligned with Dataset.ids)."""

    kind: str
    options: tuple[str, ...]
    logits: np.ndarray  # (n, K) raw option log-probs; NaN rows where the answer had none
    labels: np.ndarray  # (n,) option index, -1 when the ticket has no label for this question
    features: np.ndarray | None = None  # (n, d) hidden states; NaN rows where missing
    # (n, d * len(shared_inputs)): every question's hidden state side by side (head_all); the
    # same array object for every question of a Dataset
    shared: np.ndarray | None = None
    shared_inputs: tuple[str, ...] = ()

    def has_logits(self) -> np.ndarray:
        return np.all(np.isfinite(self.logits), axis=1)

    def has_features(self) -> np.ndarray:
        if self.features is None:
            return np.zeros(len(self.labels), dtype=bool)
        return np.all(np.isfinite(self.features), axis=1)

    def has_shared(self) -> np.ndarray:
        if self.shared is None:
            return np.zeros(len(self.labels), dtype=bool)
        return np.all(np.isfinite(self.shared), axis=1)

    def inputs_for(self, method: str) -> np.ndarray | None:
        return self.shared if method == "head_all" else self.features

    def usable(self) -> np.ndarray:
        """Rows every candidate can be fit and graded on: labelled, log-probs (and features)."""
        ok = (self.labels >= 0) & self.has_logits()
        if self.features is not None:
            ok &= self.has_features()
        if self.shared is not None:
            ok &= self.has_shared()
        return ok

    def subset(self, idx: np.ndarray, shared: np.ndarray | None = None) -> QuestionData:
        return QuestionData(
            self.kind,
            self.options,
            self.logits[idx],
            self.labels[idx],
            None if self.features is None else self.features[idx],
            shared,
            self.shared_inputs if shared is not None else (),
        )

    def counts(self) -> dict[str, int]:
        y = self.labels[self.usable()]
        return {o: int((y == i).sum()) for i, o in enumerate(self.options)}


@dataclass
class Dataset:
    ids: list[str]
    questions: dict[str, QuestionData]
    # Risk answered by constrained generation (no log-probs): index of the generated option
    # (yellow when the output was malformed), else -1. Serving never calibrates these.
    risk_generated: np.ndarray
    blocked: np.ndarray  # (n,) something other than the risk thresholds forbids green
    gate_x: np.ndarray | None = None  # (n, d) the green gate's inputs; NaN rows where missing
    gate_inputs: tuple[str, ...] = ()
    l1_raised: np.ndarray | None = None  # (n,) the rule pack raised the ticket to yellow or red

    def __len__(self) -> int:
        return len(self.ids)

    def subset(self, idx: np.ndarray) -> Dataset:
        shared = next((d.shared for d in self.questions.values() if d.shared is not None), None)
        sub = None if shared is None else shared[idx]  # one copy, shared by every question
        return Dataset(
            [self.ids[i] for i in idx],
            {q: d.subset(idx, sub if d.shared is not None else None) for q, d in self.questions.items()},
            self.risk_generated[idx],
            self.blocked[idx],
            None if self.gate_x is None else self.gate_x[idx],
            self.gate_inputs,
            None if self.l1_raised is None else self.l1_raised[idx],
        )

    def strata(self) -> np.ndarray:
        """Fold stratification key: the risk label and the first red flag, so that the rare
        flag positives spread over the folds too."""
        key = self.questions["risk"].labels.astype(np.int64) + 1
        for i, flag in enumerate(RED_FLAGS, start=1):
            if flag in self.questions:
                yes = self.questions[flag].labels == 0  # options (yes, no): index 0 is yes
                key = np.where(yes & (key < 4), key + 4 * i, key)
        return key


@dataclass
class QuestionFit:
    model: QuestionModel
    candidates: list[Candidate]
    oof: np.ndarray  # (n, K) out-of-fold probabilities of the chosen map; NaN if unpredictable
    counts: dict[str, int]


@dataclass
class FitResult:
    questions: dict[str, QuestionFit]
    skipped: dict[str, str]
    thresholds: Thresholds
    green: GreenChoice
    red: RedChoice
    yellow: dict[str, YellowFlagChoice]
    selection: LevelSummary  # on the out-of-fold probabilities the thresholds were chosen on
    probs: dict[str, np.ndarray]  # out-of-fold probabilities as served (raw when skipped)
    gate: GreenGate | None = None
    gate_blocked: np.ndarray | None = None  # (n,) the gate holds the ticket back from green


def _fit_method(method: Method, d: QuestionData, rows: np.ndarray, cfg: FitConfig, seed: int) -> QuestionModel:
    y = d.labels[rows]
    k = len(d.options)
    if method == "raw":
        return QuestionModel("raw", d.options, d.kind)
    if len(np.unique(y)) < 2:
        raise DegenerateFit("only one class among the training labels")
    if method == "temperature":
        return QuestionModel(method, d.options, d.kind, scaling=fit_temperature(d.logits[rows], y))
    if method == "vector":
        return QuestionModel(method, d.options, d.kind, scaling=fit_vector(d.logits[rows], y))
    x = d.inputs_for(method)
    if x is None:
        raise DegenerateFit("no hidden states for this question")
    head = fit_head(x[rows], y, k, cfg.cs, cfg.head_folds, seed)
    return QuestionModel(method, d.options, d.kind, head=head, inputs=d.shared_inputs if method == "head_all" else ())


@contextmanager
def single_thread_blas() -> Iterator[None]:
    """Many small BLAS calls: with threads, OpenBLAS spins on a busy 2-core machine and every
    fit takes 5-30x longer (measured). The limit only reaches libraries already loaded, so
    scipy's and scikit-learn's BLAS are loaded first."""
    import scipy.optimize  # noqa: F401
    import sklearn.linear_model  # noqa: F401
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


def _predict(model: QuestionModel, d: QuestionData, rows: np.ndarray) -> np.ndarray:
    """Probabilities for `rows`; NaN for rows the model cannot map (no log-probs/features)."""
    out = np.full((len(rows), len(d.options)), np.nan)
    ok = d.has_logits()[rows]
    if model.method == "head":
        ok &= d.has_features()[rows]
    elif model.method == "head_all":
        ok &= d.has_shared()[rows]
    if ok.any():
        r = rows[ok]
        x = d.inputs_for(model.method)
        feats = x[r] if model.needs_features and x is not None else None
        out[ok] = model.predict(d.logits[r], feats)
    return out


def raw_probs(d: QuestionData) -> np.ndarray:
    out = np.full(d.logits.shape, np.nan)
    ok = d.has_logits()
    out[ok] = softmax(d.logits[ok])
    return out


def _degenerate(p: np.ndarray) -> bool:
    """A map that gives every ticket the same distribution has no signal left to calibrate."""
    return bool(np.max(np.std(p, axis=0)) < 1e-6)


def _cv_head(
    method: Method, d: QuestionData, folds: list[tuple[np.ndarray, np.ndarray]], usable: np.ndarray, cfg: FitConfig
) -> tuple[np.ndarray, float, float]:
    """Out-of-fold head probabilities over the C grid; (oof at the best C, its NLL, C).

    C is chosen on the same folds that score the head against the other candidates, so the
    head's cross-validated NLL is the best of |C grid| tries: slightly optimistic, which is one
    reason the whole procedure is graded again by the outer (nested) cross-validation.
    """
    x = d.inputs_for(method)
    if x is None:
        raise DegenerateFit("no hidden states for this question")
    y = d.labels
    k = len(d.options)
    inputs = d.shared_inputs if method == "head_all" else ()
    oofs = {c: np.full((len(y), k), np.nan) for c in cfg.cs}
    for train, test in folds:
        rows = train[usable[train]]
        if len(np.unique(y[rows])) < 2:
            raise DegenerateFit("only one class among the training labels")
        model = None
        for c in sorted(cfg.cs):  # increasing C: each fit warm-starts from the previous one
            head, model = fit_head_at(x[rows], y[rows], k, c, model)
            oofs[c][test] = _predict(QuestionModel(method, d.options, d.kind, head=head, inputs=inputs), d, test)
    scores = {c: nll(oofs[c][usable], y[usable]) for c in cfg.cs}
    best = min(scores, key=lambda c: (round(scores[c], 9), c))  # ties: stronger penalty
    return oofs[best], scores[best], best


def fit_question(
    d: QuestionData, folds: list[tuple[np.ndarray, np.ndarray]], cfg: FitConfig, methods: tuple[Method, ...]
) -> QuestionFit:
    """Cross-validate every method on the usable rows, keep the lowest NLL, refit on all."""
    usable = d.usable()
    y = d.labels
    candidates: list[Candidate] = []
    oofs: dict[Method, np.ndarray] = {}
    head_c: dict[Method, float] = {}
    for method in methods:
        if method in HEADS and d.inputs_for(method) is None:
            candidates.append(Candidate(method=method, cv_nll=None, error="no hidden states"))
            continue
        try:
            if method in HEADS:
                oof, score, head_c[method] = _cv_head(method, d, folds, usable, cfg)
            else:
                oof = np.full((len(y), len(d.options)), np.nan)
                for f, (train, test) in enumerate(folds):
                    model = _fit_method(method, d, train[usable[train]], cfg, cfg.seed + f)
                    oof[test] = _predict(model, d, test)
                score = nll(oof[usable], y[usable])
        except DegenerateFit as exc:
            candidates.append(Candidate(method=method, cv_nll=None, error=str(exc)))
            continue
        candidates.append(Candidate(method=method, cv_nll=score))
        oofs[method] = oof
    scored = [c for c in candidates if c.cv_nll is not None]
    # Ties (to 1e-9) go to the simpler map: candidates are listed simplest first.
    best = min(scored, key=lambda c: round(c.cv_nll, 9))  # type: ignore[arg-type]
    rows = np.flatnonzero(usable)
    if best.method in HEADS:
        x = d.inputs_for(best.method)
        head, _ = fit_head_at(
            x[rows],
            y[rows],
            len(d.options),  # type: ignore[index]
            head_c[best.method],
        )
        model = QuestionModel(
            best.method, d.options, d.kind, head=head, inputs=d.shared_inputs if best.method == "head_all" else ()
        )
    else:
        model = _fit_method(best.method, d, rows, cfg, cfg.seed)
    if _degenerate(_predict(model, d, rows)):
        raise DegenerateFit(f"{best.method} gives every ticket the same probabilities")
    return QuestionFit(model=model, candidates=candidates, oof=oofs[best.method], counts=d.counts())


def check_counts(data: Dataset, min_per_class: int) -> tuple[list[str], dict[str, str]]:
    """Questions with enough labels per option; refuse when a required one falls short."""
    eligible: list[str] = []
    skipped: dict[str, str] = {}
    for q in CALIBRATED:
        if q not in data.questions:
            if q in REQUIRED:
                raise Refused(f"{q}: the answers carry no such question")
            skipped[q] = "not asked"
            continue
        counts = data.questions[q].counts()
        short = {o: c for o, c in counts.items() if c < min_per_class}
        if short:
            why = f"{q}: too few labels per class (need {min_per_class}): " + ", ".join(
                f"{o} {c}" for o, c in short.items()
            )
            if q in REQUIRED:
                raise Refused(why)
            skipped[q] = why
        else:
            eligible.append(q)
    return eligible, skipped


def served_probs(data: Dataset, fits: dict[str, QuestionFit]) -> dict[str, np.ndarray]:
    """Out-of-fold probabilities as serving would see them: the fit's, else raw."""
    return {q: (fits[q].oof if q in fits else raw_probs(d)) for q, d in data.questions.items()}


# Below this many labelled greens no gate is fitted, and with a gate asked for, nothing is green.
MIN_GATE_GREENS = 10


def fit_green_gate(data: Dataset, cfg: FitConfig) -> tuple[GreenGate | None, np.ndarray]:
    """The gate on the labelled tickets with gate inputs, and which of them it holds back
    (greens measured without themselves). No gate inputs: no gate, nothing held back."""
    n = len(data)
    if data.gate_x is None:
        return None, np.zeros(n, dtype=bool)
    truth = data.questions["risk"].labels
    ok = np.all(np.isfinite(data.gate_x), axis=1) & (truth >= 0)
    green = truth[ok] == 0
    blocked = np.ones(n, dtype=bool)  # a ticket the gate cannot measure is never green
    if green.sum() < MIN_GATE_GREENS:
        return None, blocked  # too few greens to say what one looks like: nothing is green
    gate = fit_gate(
        data.gate_x[ok], green, list(data.gate_inputs), dims=cfg.gate_dims, k=cfg.gate_k, quantile=cfg.gate_quantile
    )
    blocked[ok] = fitted_distances(gate, data.gate_x[ok], green) > gate.info.threshold
    return gate, blocked


def gate_blocks(gate: GreenGate | None, data: Dataset) -> np.ndarray:
    """Which tickets of `data` (not fitted on) the gate holds back from green."""
    n = len(data)
    if gate is None or data.gate_x is None:
        return np.zeros(n, dtype=bool)
    blocked = np.ones(n, dtype=bool)
    ok = np.all(np.isfinite(data.gate_x), axis=1)
    if ok.any():
        blocked[ok] = gate.distances(data.gate_x[ok]) > gate.info.threshold
    return blocked


def level_inputs(
    data: Dataset, probs: dict[str, np.ndarray], yellow_flags: dict[str, float], gate_blocked: np.ndarray | None = None
) -> tuple[np.ndarray, ...]:
    """p_green, p_red, p_flags, blocked and a validity mask, with generated risk folded in the
    way service.l2.decision treats it (red believed, anything else yellow, never green)."""
    risk = probs["risk"]
    gen = data.risk_generated
    p_green = np.where(gen >= 0, 0.0, risk[:, 0])
    p_red = np.where(gen >= 0, (gen == 2).astype(float), risk[:, 2])
    p_flags = {f: probs[f][:, 0] for f in RED_FLAGS if f in probs}  # options (yes, no)
    blocked = data.blocked | (gen >= 0)
    if gate_blocked is not None:
        blocked = blocked | gate_blocked
    for f in yellow_flags:
        if f in probs:
            blocked = blocked | (np.nan_to_num(probs[f][:, 0], nan=1.0) >= yellow_flags[f])
    valid = np.isfinite(p_green) & np.isfinite(p_red)
    for p in p_flags.values():
        valid &= np.isfinite(p)
    return p_green, p_red, p_flags, blocked, valid


Step = Callable[[str], None]  # told "<question>" before each question's fit: progress


def fit_all(data: Dataset, cfg: FitConfig, eligible: list[str] | None = None, step: Step | None = None) -> FitResult:
    """Maps and thresholds from `data`; `eligible` skips the label-count check (nested runs)."""
    with single_thread_blas():
        return _fit_all(data, cfg, eligible, step)


def _fit_all(data: Dataset, cfg: FitConfig, eligible: list[str] | None, step: Step | None = None) -> FitResult:
    skipped: dict[str, str] = {}
    # Nested runs (eligible given) grade the procedure: a fold too thin to fit a question
    # serves it raw there instead of aborting the whole evaluation.
    strict = eligible is None
    if eligible is None:
        eligible, skipped = check_counts(data, cfg.min_per_class)
    folds = stratified_folds(data.strata(), cfg.folds, cfg.seed)
    fits: dict[str, QuestionFit] = {}
    for q in eligible:
        if step is not None:
            step(q)
        try:
            fits[q] = fit_question(data.questions[q], folds, cfg, cfg.methods)
        except DegenerateFit as exc:
            if q in REQUIRED and strict:
                raise Refused(f"{q}: degenerate fit: {exc}") from None
            skipped[q] = f"degenerate fit: {exc}"
    for q in REQUIRED if strict else ():
        fitted = [c for c in fits[q].candidates if c.method != "raw"] if q in fits else []
        if fitted and all(c.cv_nll is None for c in fitted):
            raise Refused(
                f"{q}: no calibration method could be fit: " + "; ".join(f"{c.method}: {c.error}" for c in fitted)
            )
    probs = served_probs(data, fits)
    truth = data.questions["risk"].labels
    logits_path = (truth >= 0) & (data.risk_generated < 0)
    yellow: dict[str, YellowFlagChoice] = {}
    for f, default in cfg.yellow_flags.items():
        if f in probs:
            ok = logits_path & np.isfinite(probs[f][:, 0])
            yellow[f] = choose_yellow_flag(probs[f][ok, 0], truth[ok], default=default, margin=cfg.green_margin)
    yellow_flags = {**cfg.yellow_flags, **{f: c.threshold for f, c in yellow.items()}}
    gate, gate_blocked = fit_green_gate(data, cfg)
    p_green, p_red, p_flags, blocked, valid = level_inputs(data, probs, yellow_flags, gate_blocked)
    # Thresholds are chosen on tickets whose risk came from the logits path with a label; the
    # green threshold only on those nothing else holds back (they cannot be false greens).
    rows = valid & logits_path
    flag_labels = {
        f: np.where(data.questions[f].labels[rows] >= 0, (data.questions[f].labels[rows] == 0).astype(int), -1)
        for f in p_flags
    }
    open_rows = rows & ~blocked
    if cfg.green_after_l1 and data.l1_raised is not None:
        open_rows &= ~data.l1_raised
    green = choose_green(
        p_green[open_rows],
        truth[open_rows],
        max_rate=cfg.max_false_green_rate,
        confidence=cfg.confidence,
        floor=cfg.green_floor,
        margin=cfg.green_margin,
    )
    if data.gate_x is not None and gate is None:
        green = msgspec.structs.replace(
            green,
            threshold=above_all(np.array([1.0])),
            rule="no_gate",
            reason=f"a green gate was asked for but fewer than {MIN_GATE_GREENS} labelled greens "
            "can say what a green looks like: no ticket is green with this artifact",
        )
    red = choose_red(
        p_red[rows],
        {f: p[rows] for f, p in p_flags.items()},
        truth[rows],
        flag_labels,
        target=cfg.red_target,
        grid=cfg.grid,
    )
    thresholds = msgspec.structs.replace(
        Thresholds(),
        green=green.threshold,
        red=red.red,
        flags={**Thresholds().flags, **red.flags},
        yellow_flags=yellow_flags,
    )
    graded = valid & (truth >= 0)
    predicted = levels(p_green, p_red, p_flags, thresholds.green, thresholds.red, thresholds.flags, blocked)
    return FitResult(
        questions=fits,
        skipped=skipped,
        thresholds=thresholds,
        green=green,
        red=red,
        yellow=yellow,
        selection=summarise(truth[graded], predicted[graded]),
        probs=probs,
        gate=gate,
        gate_blocked=gate_blocked,
    )


class QuestionReport(msgspec.Struct, frozen=True):
    n: int
    ece_before: float
    ece_after: float
    nll_before: float
    nll_after: float
    accuracy_before: float
    accuracy_after: float


@dataclass
class Calibration:
    """The final fit plus its nested cross-validated evaluation."""

    final: FitResult
    reports: dict[str, QuestionReport]
    nested: LevelSummary
    raw_default: LevelSummary
    nested_probs: dict[str, np.ndarray]  # graded probabilities (for reliability diagrams)
    raw: dict[str, np.ndarray]
    nested_thresholds: list[Thresholds] = field(default_factory=list)


def nested_evaluate(
    data: Dataset, cfg: FitConfig, eligible: list[str], step: Callable[[int, str], None] | None = None
) -> tuple[dict[str, np.ndarray], np.ndarray, list[Thresholds]]:
    """Outer k-fold: fit maps and thresholds without the fold, predict the fold."""
    n = len(data)
    probs = {q: np.full((n, len(d.options)), np.nan) for q, d in data.questions.items()}
    predicted = np.full(n, -1, dtype=np.int64)
    chosen: list[Thresholds] = []
    outer = stratified_folds(data.strata(), cfg.folds, cfg.seed + 1000)
    for k, (train, test) in enumerate(outer, start=1):
        inner = fit_all(data.subset(train), cfg, eligible, None if step is None else (lambda q, k=k: step(k, q)))
        chosen.append(inner.thresholds)
        for q, d in data.questions.items():
            if q in inner.questions:
                probs[q][test] = _predict(inner.questions[q].model, d, test)
            else:
                probs[q][test] = raw_probs(d)[test]
        sub = data.subset(test)
        fold_probs = {q: p[test] for q, p in probs.items()}
        t = inner.thresholds
        p_green, p_red, p_flags, blocked, valid = level_inputs(
            sub, fold_probs, t.yellow_flags, gate_blocks(inner.gate, sub)
        )
        lv = levels(p_green, p_red, p_flags, t.green, t.red, t.flags, blocked)
        predicted[test] = np.where(valid, lv, -1)
    return probs, predicted, chosen


def calibrate(data: Dataset, cfg: FitConfig, step: Callable[[str, int, int, str], None] | None = None) -> Calibration:
    """Fit on everything (the artifact) and grade the procedure by nested cross-validation.

    `step(stage, fold, folds, question)` is told before each question's fit: stage "final"
    (fold 0) then "nested" with the outer fold, for progress."""
    with single_thread_blas():
        final = fit_all(data, cfg, step=None if step is None else (lambda q: step("final", 0, cfg.folds, q)))
        eligible = list(final.questions)
        nested, predicted, chosen = nested_evaluate(
            data, cfg, eligible, None if step is None else (lambda k, q: step("nested", k, cfg.folds, q))
        )
    reports: dict[str, QuestionReport] = {}
    raw = {q: raw_probs(d) for q, d in data.questions.items()}
    for q in eligible:
        d = data.questions[q]
        rows = d.usable() & np.all(np.isfinite(nested[q]), axis=1)
        y = d.labels[rows]
        reports[q] = QuestionReport(
            n=int(rows.sum()),
            ece_before=ece(raw[q][rows], y),
            ece_after=ece(nested[q][rows], y),
            nll_before=nll(raw[q][rows], y),
            nll_after=nll(nested[q][rows], y),
            accuracy_before=accuracy(raw[q][rows], y),
            accuracy_after=accuracy(nested[q][rows], y),
        )
    truth = data.questions["risk"].labels
    graded = (truth >= 0) & (predicted >= 0)
    p_green, p_red, p_flags, blocked, valid = level_inputs(data, raw, cfg.yellow_flags)
    default = Thresholds()
    raw_lv = levels(p_green, p_red, p_flags, default.green, default.red, default.flags, blocked)
    raw_rows = (truth >= 0) & valid
    return Calibration(
        final=final,
        reports=reports,
        nested=summarise(truth[graded], predicted[graded]),
        raw_default=summarise(truth[raw_rows], raw_lv[raw_rows]),
        nested_probs=nested,
        raw=raw,
        nested_thresholds=chosen,
    )


def label_index(options: tuple[str, ...], value: object) -> int:
    """Option index of a label value (bool -> yes/no, int -> its digit), -1 when unknown."""
    if value is None:
        return -1
    if isinstance(value, bool):
        value = "yes" if value else "no"
    elif isinstance(value, int | float) and not (isinstance(value, float) and math.isnan(value)):
        value = str(int(value))
    try:
        return options.index(str(value))
    except ValueError:
        return -1


__all__ = [
    "CALIBRATED",
    "REQUIRED",
    "RED",
    "Calibration",
    "Dataset",
    "FitConfig",
    "FitResult",
    "QuestionData",
    "QuestionFit",
    "Refused",
    "calibrate",
    "fit_all",
    "label_index",
]
