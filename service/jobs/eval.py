"""`triage eval`: the whole pipeline (L1 + L2 + max) offline over a labelled JSONL, with metrics.

The metric maths (accuracy, confusion, false greens, ECE with 15 equal-width bins, percentiles,
stratified halves) are pure functions over plain rows, so they are tested without a model and
re-run on a stored ROWS file (`summarize`). Only `run_eval` touches L1 and the model.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgspec

from service.labelled import LEVELS, LabelledFileError, LabelledTicket, read_labelled
from service.results import LEVEL_ORDER, RED_FLAGS, Answer, max_level, ticket_text

N_BINS = 15


# ---------------------------------------------------------------------- pure metric maths
def confusion(truth: list[str], predicted: list[str]) -> dict[str, dict[str, int]]:
    """truth -> predicted -> count, every level present."""
    table = {t: {p: 0 for p in LEVELS} for t in LEVELS}
    for t, p in zip(truth, predicted, strict=True):
        table[t][p] += 1
    return table


def accuracy(truth: list[Any], predicted: list[Any]) -> float | None:
    pairs = [(t, p) for t, p in zip(truth, predicted, strict=True) if t is not None]
    if not pairs:
        return None
    return sum(t == p for t, p in pairs) / len(pairs)


def risk_metrics(truth: list[str], predicted: list[str]) -> dict[str, Any]:
    """Accuracy and the policy's three error kinds, ordered by cost."""
    n = len(truth)
    false_greens = sum(p == "green" and t != "green" for t, p in zip(truth, predicted, strict=True))
    reds = sum(t == "red" for t in truth)
    caught = sum(t == "red" and p == "red" for t, p in zip(truth, predicted, strict=True))
    over = sum(LEVEL_ORDER[p] > LEVEL_ORDER[t] for t, p in zip(truth, predicted, strict=True))
    return {
        "n": n,
        "accuracy": accuracy(truth, predicted) if n else None,
        "false_greens": false_greens,
        "missed_reds": reds - caught,
        "over_escalations": over,
        "red_recall": caught / reds if reds else None,
        "confusion": confusion(truth, predicted),
    }


def ece(confidences: list[float], correct: list[bool], n_bins: int = N_BINS) -> float | None:
    """Expected calibration error: sum over equal-width bins of |accuracy - confidence| * share."""
    if not confidences:
        return None
    bins: dict[int, list[tuple[float, bool]]] = defaultdict(list)
    for c, ok in zip(confidences, correct, strict=True):
        bins[min(int(c * n_bins), n_bins - 1)].append((c, ok))
    total = len(confidences)
    return sum(abs(sum(ok for _, ok in items) / len(items) - sum(c for c, _ in items) / len(items))
               * len(items) / total for items in bins.values())


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100)."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


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


def write_halves(path: str | Path, out_dir: str | Path) -> tuple[Path, Path]:
    """Split a labelled JSONL into <stem>-tune.jsonl and <stem>-holdout.jsonl with `halves`
    (lines copied byte for byte), so a calibration can be trained on one half and graded on the
    other. Returns the two paths."""
    path, out = Path(path), Path(out_dir)
    records = read_labelled(path)
    tune, _ = halves([{"id": r.id, "truth": r.risk} for r in records])
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, keep in (("tune", True), ("holdout", False)):
        target = out / f"{path.stem}-{name}.jsonl"
        target.write_text("".join(line + "\n" for line, r in zip(lines, records, strict=True)
                                  if (r.id in tune) == keep), encoding="utf-8")
        written.append(target)
    return written[0], written[1]


def risk_ece(rows: list[dict]) -> float | None:
    """Top-label ECE of L2's risk distribution against the true risk (logits rows only)."""
    conf, ok = [], []
    for row in rows:
        probs = (row.get("probabilities") or {}).get("risk")
        if probs:
            top = max(probs, key=probs.get)
            conf.append(probs[top])
            ok.append(top == row["truth"])
    return ece(conf, ok)


def auc(scores: list[float], labels: list[bool]) -> float | None:
    """Area under the ROC curve (ties count half): does the score rank positives first?"""
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    if not pos or not neg:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def signal(rows: list[dict]) -> dict[str, float | None]:
    """AUC of L2's raw readouts against the labels: the ranking signal, whatever the bias."""
    out: dict[str, float | None] = {}
    risky = [r for r in rows if (r.get("probabilities") or {}).get("risk")]
    out["risk_p_red_vs_rest"] = auc([r["probabilities"]["risk"]["red"] for r in risky],
                                    [r["truth"] == "red" for r in risky])
    out["risk_p_green_vs_rest"] = auc([r["probabilities"]["risk"]["green"] for r in risky],
                                      [r["truth"] == "green" for r in risky])
    for flag in RED_FLAGS:
        have = [r for r in rows if (r.get("flags") or {}).get(flag) is not None]
        out[flag] = auc([r["flags"][flag] for r in have],
                        [bool((r.get("flags_truth") or {}).get(flag)) for r in have])
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
        out[flag] = {"tp": tp, "fp": fp, "fn": fn,
                     "recall": tp / (tp + fn) if tp + fn else None,
                     "precision": tp / (tp + fp) if tp + fp else None}
    return out


def layer_metrics(rows: list[dict], field: str) -> dict[str, Any] | None:
    present = [r for r in rows if r.get(field) is not None]
    if not present:
        return None
    pred = ["green" if r[field] == "none" else r[field] for r in present]
    return risk_metrics([r["truth"] for r in present], pred)


def summarize(rows: list[dict]) -> dict[str, Any]:
    """Every metric of OUT.json that comes from the rows alone (no model identity)."""
    truth = [r["truth"] for r in rows]
    out = risk_metrics(truth, [r["predicted"] for r in rows])
    out["category_accuracy"] = accuracy([r.get("category_truth") for r in rows],
                                        [r.get("category") for r in rows])
    out["ece_risk"] = risk_ece(rows)
    languages = sorted({r.get("language") or "?" for r in rows})
    out["per_language"] = {}
    for lang in languages:
        subset = [r for r in rows if (r.get("language") or "?") == lang]
        m = risk_metrics([r["truth"] for r in subset], [r["predicted"] for r in subset])
        m.pop("confusion")
        m["l1_accuracy"] = (layer_metrics(subset, "l1") or {}).get("accuracy")
        m["l2_accuracy"] = (layer_metrics(subset, "l2") or {}).get("accuracy")
        out["per_language"][lang] = m
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


def summarize_halves(rows: list[dict]) -> dict[str, Any]:
    tune, holdout = halves(rows)
    out = {}
    for name, ids in (("tune", tune), ("holdout", holdout)):
        subset = [r for r in rows if r["id"] in ids]
        s = summarize(subset)
        out[name] = {k: s[k] for k in ("n", "accuracy", "false_greens", "missed_reds",
                                       "over_escalations", "red_recall", "category_accuracy")}
        out[name]["l1_accuracy"] = (s["l1_only"] or {}).get("accuracy")
        out[name]["l2_accuracy"] = (s["l2_only"] or {}).get("accuracy")
    return out


def relevel(rows: list[dict], thresholds: Any, variant: str | None = None) -> list[dict]:
    """The rows re-decided from their stored answers under other thresholds, optionally with
    the risk answer of one option order (`variant`, e.g. "risk" = the canonical order of a
    permuted run): what threshold tuning and the permutation study need."""
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
        new = dict(row)
        new["l2"] = level
        new["predicted"] = max_level(row["l1"] or "none", level)
        out.append(new)
    return out


def _brief(rows: list[dict]) -> dict[str, Any]:
    s = summarize(rows)
    out = {k: s[k] for k in ("n", "accuracy", "false_greens", "missed_reds", "over_escalations",
                             "red_recall", "ece_risk")}
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
    tune, holdout = halves(rows)
    return {
        "orders": sorted({k for r in rows for k in (r.get("risk_variants") or {})}),
        "one_order": _brief(canonical),
        "averaged": _brief(averaged),
        "holdout_one_order": _brief([r for r in canonical if r["id"] in holdout]),
        "holdout_averaged": _brief([r for r in averaged if r["id"] in holdout]),
    }


GREEN_GRID = (0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
RED_GRID = (0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6)
FLAG_GRID = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8)


def sweep_thresholds(rows: list[dict]) -> dict[str, Any]:
    """Tune thresholds on the tune half, report the holdout half.

    Choice order follows the policy: zero false greens on tune (final level), then red recall
    >= 0.9 if reachable, then the highest accuracy; ties go to the most conservative setting
    (higher green, lower red and flag thresholds)."""
    from service.l2.decision import Thresholds

    tune_ids, holdout_ids = halves(rows)
    tune = [r for r in rows if r["id"] in tune_ids]
    holdout = [r for r in rows if r["id"] in holdout_ids]
    best: tuple | None = None
    for green in GREEN_GRID:
        for red in RED_GRID:
            for flag in FLAG_GRID:
                t = Thresholds(green=green, red=red, flags={f: flag for f in RED_FLAGS})
                m = risk_metrics([r["truth"] for r in tune],
                                 [r["predicted"] for r in relevel(tune, t)])
                if m["false_greens"]:
                    continue
                recall_ok = (m["red_recall"] or 0.0) >= 0.9
                key = (recall_ok, m["accuracy"], green, -red, -flag)
                if best is None or key > best[0]:
                    best = (key, t, m)
    if best is None:
        return {"chosen": None, "reason": "no threshold setting gives zero false greens on tune"}
    _, chosen, tune_m = best
    hold_m = risk_metrics([r["truth"] for r in holdout],
                          [r["predicted"] for r in relevel(holdout, chosen)])
    tune_m.pop("confusion")
    return {"chosen": msgspec.to_builtins(chosen), "tune": tune_m, "holdout": hold_m,
            "default_holdout": _brief(relevel(holdout, Thresholds()))}


# ---------------------------------------------------------------------- the run
def _load_l1(rules_dir: str) -> tuple[Callable[[str], Any] | None, str]:
    """L1's evaluate bound to the pack, or None while service.l1 does not offer it yet."""
    try:
        from service.l1 import evaluate, load_pack  # type: ignore[attr-defined]
    except ImportError:
        return None, ""
    pack = load_pack(rules_dir)
    sha = getattr(pack, "sha", "") or getattr(pack, "rules_sha", "") or ""
    return (lambda text: evaluate(pack, text)), sha


def run_eval(settings: Any, records: list[LabelledTicket], classifier: Any = None,
             progress: Callable[[int, dict], None] | None = None,
             features: dict[str, list] | None = None) -> tuple[dict, list[dict]]:
    """Run L1 + L2 + max over the records: (report, rows). When `features` is a dict, the hidden
    states are appended to it per question (with "ids"), exactly as serving computed them."""
    from service.l2 import Classifier

    l1, rules_sha = _load_l1(settings.rules_dir)
    classifier = classifier or Classifier.from_settings(settings)
    rows = []
    for i, record in enumerate(records):
        text = ticket_text(record.subject, record.body)
        started = time.perf_counter()
        l1_result = l1(text) if l1 is not None else None
        out = classifier.classify(text)
        latency = (time.perf_counter() - started) * 1000
        if l1_result is not None and not rules_sha:
            rules_sha = l1_result.rules_sha
        rows.append(make_row(record, l1_result, out, latency))
        if features is not None and out.features:
            features.setdefault("ids", []).append(record.id)
            for name, vector in out.features.items():
                features.setdefault(name, []).append(vector)
        if progress is not None:
            progress(i, rows[-1])
    report = summarize(rows)
    report["halves"] = summarize_halves(rows)
    report["model"] = msgspec.to_builtins(classifier.model_info)
    report["prompt_sha"] = classifier.prompt_sha
    report["rules_sha"] = rules_sha
    report["calibrated"] = bool(rows) and all(r["calibrated"] for r in rows)
    report["l1_present"] = l1 is not None
    report["mode"] = classifier.mode
    report["n_threads"] = classifier.runner.n_threads
    return report, rows


def make_row(record: LabelledTicket, l1_result: Any, out: Any, latency_ms: float) -> dict:
    from service.pipeline import fail_closed  # the worker's own L2 -> final rule

    result = fail_closed(out.result)
    answers = result.answers
    probabilities = {k: a.probabilities for k, a in answers.items() if a.probabilities}
    l1_level = l1_result.level if l1_result is not None else None
    return {
        "id": record.id,
        "language": record.language,
        "truth": record.risk,
        "predicted": max_level(l1_level or "none", result.level),
        "l1": l1_level,
        "l2": result.level,
        "method": result.method,
        "calibrated": result.calibrated,
        "rules": [hit.id for hit in l1_result.rules] if l1_result is not None else [],
        "category_truth": record.category,
        "category": result.category,
        "urgency_truth": record.urgency,
        "urgency": result.urgency,
        "team": result.team,
        "flags_truth": dict(record.flags),
        "flags": {f: answers[f].probability for f in RED_FLAGS if f in answers},
        "probabilities": probabilities,
        "coverage": {k: a.coverage for k, a in answers.items()},
        "answers": msgspec.to_builtins(answers),
        "risk_variants": msgspec.to_builtins(getattr(out, "variants", {}) or {}),
        "truncated": bool(getattr(out, "truncated", False)),
        "tokens_evaluated": result.tokens_evaluated,
        "latency_ms": latency_ms,
        "reason": result.reason,
    }


# ---------------------------------------------------------------------- output
def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def table(report: dict) -> str:
    """The printed summary: one line per layer, per language, then the confusion matrix."""
    cols = ("n", "accuracy", "false_greens", "missed_reds", "over_escalations", "red_recall")
    lines = [f"{'':16}" + "".join(f"{c:>17}" for c in cols)]
    for name, metrics in (("L1 + L2 (final)", report), ("L1 only", report.get("l1_only")),
                          ("L2 only", report.get("l2_only"))):
        if metrics:
            lines.append(f"{name:16}" + "".join(f"{_fmt(metrics.get(c)):>17}" for c in cols))
    for lang, metrics in report.get("per_language", {}).items():
        lines.append(f"  {lang:14}" + "".join(f"{_fmt(metrics.get(c)):>17}" for c in cols))
    lines.append(f"category accuracy {_fmt(report.get('category_accuracy'))}   "
                 f"ECE(risk) {_fmt(report.get('ece_risk'))}   latency ms p50 "
                 f"{_fmt(report['latency_ms']['p50'])} p95 {_fmt(report['latency_ms']['p95'])}")
    lines.append("confusion (rows truth, columns predicted): " + "  ".join(
        f"{t}: " + "/".join(str(report["confusion"][t][p]) for p in LEVELS) for t in LEVELS))
    return "\n".join(lines)


def write_rows(path: str | Path, rows: Iterable[dict]) -> None:
    with Path(path).open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def report_from_rows(rows: list[dict], identity: dict[str, Any] | None = None) -> dict:
    """The OUT.json report recomputed from stored rows (no model): identity keys copied over."""
    report = summarize(rows)
    report["halves"] = summarize_halves(rows)
    report.update(identity or {})
    return report


def analysis(rows: list[dict]) -> dict[str, Any]:
    return {"permutations": permutation_study(rows), "thresholds": sweep_thresholds(rows)}


def main(args: Any, settings: Any) -> int:
    if getattr(args, "from_rows", None):
        rows = [json.loads(line) for line in Path(args.from_rows).read_text().splitlines() if line]
        previous = json.loads(Path(args.json).read_text()) if Path(args.json).exists() else {}
        identity = {k: previous[k] for k in ("model", "prompt_sha", "rules_sha", "calibrated",
                                             "l1_present", "mode", "n_threads") if k in previous}
        report = report_from_rows(rows, identity)
        if args.analysis:
            report["analysis"] = analysis(rows)
        Path(args.json).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
        print(table(report))
        return 0
    try:
        records = read_labelled(args.data)
    except LabelledFileError as error:
        print(f"triage eval: {error}", file=sys.stderr)
        return 2
    if args.limit:
        records = records[: args.limit]
    kwargs = {}
    if getattr(args, "risk_permutations", None):
        kwargs["risk_permutations"] = args.risk_permutations
    if getattr(args, "mode", None):
        kwargs["mode"] = args.mode
    from service.l2 import Classifier

    classifier = Classifier.from_settings(settings, **kwargs)
    choice = getattr(args, "calibration", "") or ""
    if choice.lower() != "none":
        calibrator = (load_calibration(choice, classifier) if choice
                      else served_calibration(settings, classifier))
        if calibrator is None and choice:
            return 2
        classifier.set_calibrator(calibrator)

    partial = Path(args.rows).open("w", encoding="utf-8") if args.rows else None

    def progress(i: int, row: dict) -> None:
        if partial is not None:  # streamed, so a long run that dies still leaves its rows
            partial.write(json.dumps(row, ensure_ascii=False) + "\n")
            partial.flush()
        print(f"[{i + 1}/{len(records)}] {row['id']} truth={row['truth']} "
              f"predicted={row['predicted']} l2={row['l2']} ({row['method']}) "
              f"{row['latency_ms']:.0f} ms", file=sys.stderr, flush=True)

    features: dict[str, list] | None = {} if getattr(args, "features", None) else None
    try:
        report, rows = run_eval(settings, records, classifier=classifier, progress=progress,
                                features=features)
    finally:
        if partial is not None:
            partial.close()
    calibrator = classifier.calibrator
    report["calibration"] = calibrator.version if calibrator is not None else None
    if getattr(args, "analysis", False):
        report["analysis"] = analysis(rows)
    Path(args.json).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    if features:
        save_features(args.features, features)
    print(table(report))
    return 0


def served_calibration(settings: Any, classifier: Any) -> Any:
    """The artifact a worker with these settings would load (None: it would serve raw logits)."""
    from service.calibration.loader import load_latest

    outcome = load_latest(settings.calibration_dir, classifier.model_info.sha256,
                          classifier.prompt_sha)
    where = outcome.calibrator.path if outcome.calibrator is not None else "none (raw logits)"
    print(f"triage eval: calibration: {where}", file=sys.stderr)
    return outcome.calibrator


def load_calibration(path: str, classifier: Any) -> Any:
    """The artifact at `path`, or None (after saying why) when it is unreadable or was made for
    another model or prompt: its heads would read hidden states they were not trained on."""
    from service.calibration.artifact import ArtifactError, load_artifact
    from service.calibration.loader import stale_reasons

    try:
        calibrator = load_artifact(path)
    except ArtifactError as error:
        print(f"triage eval: calibration artifact {path}: {error}", file=sys.stderr)
        return None
    mismatched = stale_reasons(classifier.model_info.sha256, classifier.prompt_sha,
                               calibrator.model_sha, calibrator.prompt_sha)
    if mismatched:
        print(f"triage eval: calibration artifact {path} is stale for this classifier "
              f"(different {', '.join(mismatched)}); re-run `triage recalibrate`", file=sys.stderr)
        return None
    return calibrator


def save_features(path: str | Path, features: dict[str, list]) -> None:
    """npz: "ids" (n,) and one (n, n_embd) float32 array per question (only complete ones)."""
    import numpy as np

    n = len(features["ids"])
    arrays = {"ids": np.array(features["ids"])}
    for name, vectors in features.items():
        if name != "ids" and len(vectors) == n:  # a ticket that fell back to unavailable has none
            arrays[name] = np.stack(vectors).astype(np.float32)
    np.savez_compressed(path, **arrays)
