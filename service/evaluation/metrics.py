"""Evaluation metrics: pure functions over per-ticket rows (plain dicts, one per ticket).

A row holds at least `id`, `truth` and `predicted` (levels); `l1`, `l2`, `language`,
`category_truth`, `answers`, `probabilities`, `flags`, `flags_truth`, `latency_ms` and
`ood_blocked` when the run produced them (service.evaluation.run.make_row). The level summary,
the ECE and the threshold choice are calibration's (service.calibration): one definition each.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import msgspec
import numpy as np

from service.calibration.maths import ece
from service.calibration.thresholds import choose_green, choose_red, summarise
from service.labelled import LEVELS
from service.results import RED_FLAGS, Answer, max_level

LEVEL_INDEX = {level: i for i, level in enumerate(LEVELS)}
# Green thresholds of the cleared-greens / false-greens curve.
CURVE_GRID: tuple[float, ...] = tuple(round(0.5 + 0.01 * i, 2) for i in range(51))


def ood_blocked(row: dict) -> bool:
    """Did the out-of-distribution gate keep this ticket from green (L2 said P(green) enough)?"""
    return bool(row.get("ood_blocked", False))


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


# ---------------------------------------------------------------------- level summaries
def _indices(levels: list[str]) -> np.ndarray:
    return np.array([LEVEL_INDEX[level] for level in levels], dtype=np.int64)


def accuracy(truth: list[Any], predicted: list[Any]) -> float | None:
    """Share of equal pairs among those with a truth (None: nothing labelled)."""
    pairs = [(t, p) for t, p in zip(truth, predicted, strict=True) if t is not None]
    if not pairs:
        return None
    return sum(t == p for t, p in pairs) / len(pairs)


def risk_metrics(truth: list[str], predicted: list[str]) -> dict[str, Any]:
    """calibration's LevelSummary as the eval's JSON: None where a share is undefined, the
    confusion keyed by level names, and the policy's error kinds ordered by cost."""
    s = summarise(_indices(truth), _indices(predicted))
    n_red = sum(t == "red" for t in truth)
    return {
        "n": s.n,
        "accuracy": s.accuracy if s.n else None,
        "false_greens": s.false_greens,
        "missed_reds": s.missed_reds,
        "over_escalations": s.over_escalations,
        "red_recall": s.red_recall if n_red else None,
        "confusion": {t: {p: s.confusion[i][j] for j, p in enumerate(LEVELS)} for i, t in enumerate(LEVELS)},
    }


def helpdesk(rows: list[dict]) -> dict[str, Any]:
    """What a helpdesk asks of the final level: how much is answered without a person, and
    which tickets were answered that needed one."""
    n = len(rows)
    greens = [r for r in rows if r["truth"] == "green"]
    cleared = sum(r["predicted"] == "green" for r in greens)
    escalated = len(greens) - cleared
    return {
        "answered_automatically": _share(sum(r["predicted"] == "green" for r in rows), n),
        "greens_cleared": _share(cleared, len(greens)),
        "false_green_ids": sorted(r["id"] for r in rows if r["predicted"] == "green" and r["truth"] != "green"),
        "greens_escalated": escalated,
        "greens_escalated_share": _share(escalated, len(greens)),
        "blocked_by_ood": sum(ood_blocked(r) for r in rows),
    }


def layer_metrics(rows: list[dict], field: str) -> dict[str, Any] | None:
    """risk_metrics of one layer alone ("l1" or "l2"); L1's "none" counts as green."""
    present = [r for r in rows if r.get(field) is not None]
    if not present:
        return None
    pred = ["green" if r[field] == "none" else r[field] for r in present]
    return risk_metrics([r["truth"] for r in present], pred)


def group_metrics(rows: list[dict]) -> dict[str, Any]:
    """One line of a per-language or per-category table."""
    m = risk_metrics([r["truth"] for r in rows], [r["predicted"] for r in rows])
    m.pop("confusion")
    m.update(helpdesk(rows))
    m["l1_accuracy"] = (layer_metrics(rows, "l1") or {}).get("accuracy")
    m["l2_accuracy"] = (layer_metrics(rows, "l2") or {}).get("accuracy")
    return m


def per_group(rows: list[dict], key: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[r.get(key) or "?"].append(r)
    return {name: group_metrics(groups[name]) for name in sorted(groups)}


# ---------------------------------------------------------------------- probabilities
def risk_ece(rows: list[dict]) -> float | None:
    """Top-label ECE of L2's risk distribution against the true risk (logits rows only)."""
    have = [r for r in rows if (r.get("probabilities") or {}).get("risk")]
    if not have:
        return None
    probs = np.array([[r["probabilities"]["risk"].get(level, 0.0) for level in LEVELS] for r in have])
    return ece(probs, _indices([r["truth"] for r in have]))


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100)."""
    if not values:
        return None
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def auc(scores: list[float], labels: list[bool]) -> float | None:
    """Area under the ROC curve (ties count half): does the score rank positives first?"""
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    if not pos or not neg:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def signal(rows: list[dict]) -> dict[str, float | None]:
    """AUC of L2's readouts against the labels: the ranking signal, whatever the bias."""
    out: dict[str, float | None] = {}
    risky = [r for r in rows if (r.get("probabilities") or {}).get("risk")]
    out["risk_p_red_vs_rest"] = auc(
        [r["probabilities"]["risk"]["red"] for r in risky], [r["truth"] == "red" for r in risky]
    )
    out["risk_p_green_vs_rest"] = auc(
        [r["probabilities"]["risk"]["green"] for r in risky], [r["truth"] == "green" for r in risky]
    )
    for flag in RED_FLAGS:
        have = [r for r in rows if (r.get("flags") or {}).get(flag) is not None]
        out[flag] = auc([r["flags"][flag] for r in have], [bool((r.get("flags_truth") or {}).get(flag)) for r in have])
    return out


def flag_metrics(rows: list[dict]) -> dict[str, dict[str, Any]]:
    """Per red flag at P(yes) >= 0.5: counts, recall and precision against the labels."""
    out = {}
    for flag in RED_FLAGS:
        tp = fp = fn = 0
        for row in rows:
            truth = bool((row.get("flags_truth") or {}).get(flag))
            p = (row.get("flags") or {}).get(flag)
            pred = p is not None and p >= 0.5
            tp += truth and pred
            fp += pred and not truth
            fn += truth and not pred
        out[flag] = {"tp": tp, "fp": fp, "fn": fn, "recall": _share(tp, tp + fn), "precision": _share(tp, tp + fp)}
    return out


# ---------------------------------------------------------------------- the whole summary
def summarize(rows: list[dict]) -> dict[str, Any]:
    """Every metric of the eval JSON that comes from the rows alone (no model identity)."""
    out = risk_metrics([r["truth"] for r in rows], [r["predicted"] for r in rows])
    out.update(helpdesk(rows))
    out["category_accuracy"] = accuracy([r.get("category_truth") for r in rows], [r.get("category") for r in rows])
    out["ece_risk"] = risk_ece(rows)
    out["per_language"] = per_group(rows, "language")
    out["per_category"] = per_group(rows, "category_truth")
    out["l1_only"] = layer_metrics(rows, "l1")
    l2 = layer_metrics(rows, "l2")
    if l2 is not None:
        l2["category_accuracy"] = out["category_accuracy"]
        l2["ece_risk"] = out["ece_risk"]
    out["l2_only"] = l2
    latencies = [r["latency_ms"] for r in rows if r.get("latency_ms") is not None]
    out["latency_ms"] = {"p50": percentile(latencies, 50), "p95": percentile(latencies, 95)}
    out["flags"] = flag_metrics(rows)
    out["auc"] = signal(rows)
    out["methods"] = dict(Counter(r.get("method") or "none" for r in rows))
    return out


# The level figures every summary leads with.
HEADLINE = ("n", "accuracy", "false_greens", "missed_reds", "over_escalations", "red_recall")
HALF_KEYS = HEADLINE + ("category_accuracy", "answered_automatically", "greens_cleared")


def halves(rows: list[dict], key: str = "truth") -> tuple[set[str], set[str]]:
    """A stratified split by id: within each label, ids sorted and dealt tune, holdout, tune..."""
    tune: set[str] = set()
    holdout: set[str] = set()
    by_label: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        by_label[row[key]].append(row["id"])
    for ids in by_label.values():
        for i, ticket_id in enumerate(sorted(ids)):
            (tune if i % 2 == 0 else holdout).add(ticket_id)
    return tune, holdout


def summarize_halves(rows: list[dict]) -> dict[str, Any]:
    tune, holdout = halves(rows)
    out = {}
    for name, ids in (("tune", tune), ("holdout", holdout)):
        s = summarize([r for r in rows if r["id"] in ids])
        out[name] = {k: s[k] for k in HALF_KEYS}
        out[name]["l1_accuracy"] = (s["l1_only"] or {}).get("accuracy")
        out[name]["l2_accuracy"] = (s["l2_only"] or {}).get("accuracy")
    return out


# ---------------------------------------------------------------------- re-deciding rows
def relevel(rows: list[dict], thresholds: Any, variant: str | None = None) -> list[dict]:
    """The rows re-decided from their stored answers under other thresholds, optionally with
    the risk answer of one option order (`variant`, e.g. "risk" = the canonical order of a
    permuted run): what threshold studies and the permutation study need. L1's level is kept
    (max), and so is the out-of-distribution gate's veto on green."""
    from service.l2.decision import decide_level

    out = []
    for row in rows:
        answers = {k: msgspec.convert(v, Answer) for k, v in (row.get("answers") or {}).items()}
        if row.get("method") != "logits" or "risk" not in answers:
            out.append(row)
            continue
        if variant is not None:
            raw = (row.get("risk_variants") or {}).get(variant)
            if raw is None:
                out.append(row)
                continue
            answers["risk"] = msgspec.convert(raw, Answer)
        level, _, _ = decide_level(answers, thresholds, truncated=row.get("truncated", False))
        if level == "green" and ood_blocked(row):
            level = "yellow"
        new = dict(row)
        new["l2"] = level
        new["predicted"] = max_level(row["l1"] or "none", level)
        out.append(new)
    return out


def green_curve(rows: list[dict], thresholds: Any, grid: tuple[float, ...] = CURVE_GRID) -> list[dict[str, Any]]:
    """Greens cleared and false greens (final level) as the green threshold moves, every other
    threshold as served: what lowering or raising the one threshold would buy and cost."""
    out = []
    for green in grid:
        decided = relevel(rows, msgspec.structs.replace(thresholds, green=green))
        h = helpdesk(decided)
        out.append(
            {
                "green": green,
                "greens_cleared": h["greens_cleared"],
                "false_greens": len(h["false_green_ids"]),
                "answered_automatically": h["answered_automatically"],
            }
        )
    return out


def _brief(rows: list[dict]) -> dict[str, Any]:
    s = summarize(rows)
    out = {k: s[k] for k in HEADLINE + ("ece_risk", "greens_cleared")}
    out["l2_accuracy"] = (s["l2_only"] or {}).get("accuracy")
    out["l2_false_greens"] = (s["l2_only"] or {}).get("false_greens")
    return out


def permutation_study(rows: list[dict]) -> dict[str, Any] | None:
    """Risk read in the canonical option order only vs averaged over the stored orders."""
    if not any(r.get("risk_variants") for r in rows):
        return None
    from service.l2.decision import Thresholds

    canonical = relevel(rows, Thresholds(), variant="risk")
    for r in canonical:  # ECE of the single order: its own probabilities
        v = (r.get("risk_variants") or {}).get("risk")
        if v:
            r["probabilities"] = {**r.get("probabilities", {}), "risk": v["probabilities"]}
    averaged = relevel(rows, Thresholds())
    _, holdout = halves(rows)
    return {
        "orders": sorted({k for r in rows for k in (r.get("risk_variants") or {})}),
        "one_order": _brief(canonical),
        "averaged": _brief(averaged),
        "holdout_one_order": _brief([r for r in canonical if r["id"] in holdout]),
        "holdout_averaged": _brief([r for r in averaged if r["id"] in holdout]),
    }


def _level_inputs(rows: list[dict]) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """p_green, p_red, P(yes) per red flag and the true level of the rows read on logits."""
    from service.l2.decision import p_yes

    p_green, p_red, truth = [], [], []
    flags: dict[str, list[float]] = {f: [] for f in RED_FLAGS}
    for row in rows:
        answers = {k: msgspec.convert(v, Answer) for k, v in (row.get("answers") or {}).items()}
        risk = answers.get("risk")
        if risk is None or risk.probabilities is None or any(f not in answers for f in RED_FLAGS):
            continue
        p_green.append(risk.probabilities.get("green", 0.0))
        p_red.append(risk.probabilities.get("red", 0.0))
        for f in RED_FLAGS:
            flags[f].append(p_yes(answers[f]))
        truth.append(LEVEL_INDEX[row["truth"]])
    return (
        np.array(p_green),
        np.array(p_red),
        {f: np.array(v) for f, v in flags.items()},
        np.array(truth, dtype=np.int64),
    )


def threshold_study(rows: list[dict]) -> dict[str, Any]:
    """Thresholds chosen on the tune half by calibration's own choice (zero false greens, then
    red recall), graded on the holdout half: what re-choosing thresholds on these rows buys."""
    from service.calibration.fit import FitConfig
    from service.l2.decision import Thresholds

    tune_ids, holdout_ids = halves(rows)
    tune = [r for r in rows if r["id"] in tune_ids]
    holdout = [r for r in rows if r["id"] in holdout_ids]
    p_green, p_red, p_flags, truth = _level_inputs(tune)
    if not len(truth):
        return {"chosen": None, "reason": "no tune-half ticket was read on logits"}
    cfg = FitConfig()
    green = choose_green(p_green, truth, max_rate=cfg.max_false_green_rate, confidence=cfg.confidence)
    red = choose_red(p_red, p_flags, truth, target=cfg.red_target, grid=cfg.grid)
    chosen = msgspec.structs.replace(
        Thresholds(), green=green.threshold, red=red.red, flags={**Thresholds().flags, **red.flags}
    )

    def graded(subset: list[dict]) -> dict[str, Any]:
        decided = relevel(subset, chosen)
        m = risk_metrics([r["truth"] for r in decided], [r["predicted"] for r in decided])
        m.update(helpdesk(decided))
        return m

    tune_m = graded(tune)
    tune_m.pop("confusion")
    return {
        "chosen": msgspec.to_builtins(chosen),
        "green_reason": green.reason,
        "tune": tune_m,
        "holdout": graded(holdout),
        "default_holdout": _brief(relevel(holdout, Thresholds())),
    }


def analysis(rows: list[dict]) -> dict[str, Any]:
    return {"permutations": permutation_study(rows), "thresholds": threshold_study(rows)}
