"""The recalibration report: report.md and reliability diagrams (PNG) beside the artifact.

Offline only (matplotlib, Agg backend). Every figure in it is cross-validated as described in
service.calibration.fit; the text says which figures are nested (honest) and which are the
out-of-fold set the thresholds were chosen on (optimistic by construction).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from service.calibration.artifact import ArtifactMeta
from service.calibration.fit import Calibration, Dataset
from service.calibration.maths import N_BINS, reliability
from service.calibration.thresholds import LEVELS, LevelSummary
from service.l2.decision import Thresholds


def _f(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def confusion_table(summary: LevelSummary) -> str:
    rows = ["| labelled \\ predicted | green | yellow | red |", "|---|---:|---:|---:|"]
    for level, counts in zip(LEVELS, summary.confusion, strict=True):
        rows.append(f"| **{level}** | " + " | ".join(str(c) for c in counts) + " |")
    return "\n".join(rows)


def summary_line(summary: LevelSummary) -> str:
    return (
        f"n = {summary.n}; accuracy {summary.accuracy:.1%}; **false greens "
        f"{summary.false_greens}**; missed reds {summary.missed_reds}; red recall "
        f"{summary.red_recall:.1%}; over-escalations {summary.over_escalations}; "
        f"answered automatically (green) {summary.green_rate:.1%}"
    )


def reliability_png(
    path: Path, question: str, before: np.ndarray, after: np.ndarray, y: np.ndarray, after_label: str
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 4.2), sharey=True)
    for ax, probs, title in ((axes[0], before, "raw"), (axes[1], after, after_label)):
        rel = reliability(probs, y, N_BINS)
        centres = (np.array(rel.edges[:-1]) + np.array(rel.edges[1:])) / 2
        width = 1.0 / N_BINS
        filled = np.array(rel.counts) > 0
        ax.bar(
            centres[filled],
            np.array(rel.accuracy)[filled],
            width=width * 0.95,
            color="#4c78a8",
            edgecolor="white",
            label="accuracy",
        )
        ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1, label="perfect calibration")
        ax.plot(
            np.array(rel.confidence)[filled],
            np.array(rel.accuracy)[filled],
            "o",
            color="#e45756",
            ms=4,
            label="(confidence, accuracy)",
        )
        for c, a, n in zip(centres[filled], np.array(rel.accuracy)[filled], np.array(rel.counts)[filled], strict=True):
            ax.annotate(str(n), (c, min(a + 0.02, 0.97)), ha="center", fontsize=7)
        ax.set_title(f"{question}: {title} (ECE {rel.ece:.3f})")
        ax.set_xlabel("confidence (top-label probability)")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
    axes[0].set_ylabel("accuracy in bin (count above the bar)")
    axes[0].legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def risk_png(path: Path, p_green: np.ndarray, p_red: np.ndarray, truth: np.ndarray, thresholds: Thresholds) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"green": "#54a24b", "yellow": "#eeca3b", "red": "#e45756"}
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    bins = np.linspace(0, 1, 21)
    for ax, values, name, t in (
        (axes[0], p_green, "P(green)", thresholds.green),
        (axes[1], p_red, "P(red)", thresholds.red),
    ):
        for i, level in enumerate(LEVELS):
            sel = truth == i
            if sel.any():
                ax.hist(values[sel], bins=bins, alpha=0.6, color=colours[level], label=f"labelled {level}")
        ax.axvline(t, color="black", lw=1.5, ls="--", label=f"threshold {t:.4g}")  # 0.9974 is not 1.00
        ax.set_xlabel(f"{name} (nested cross-validation)")
        ax.set_ylabel("tickets")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_report(
    directory: Path, meta: ArtifactMeta, calibration: Calibration, data: Dataset, skipped_tickets: dict[str, int]
) -> None:
    """report.md plus reliability-<question>.png and risk-thresholds.png into `directory`."""
    directory = Path(directory)
    lines = [
        f"# Calibration {meta.version}",
        "",
        f"- command: `{meta.command}`",
        f"- machine: {meta.machine}; fit and nested evaluation took {meta.elapsed_s:.0f} s",
        f"- model: {meta.model.name} (sha256 {meta.model.sha256[:16]}…), prompt_sha "
        f"{meta.prompt_sha[:16]}…, rules_sha {meta.rules_sha[:16] or '–'}",
        f"- labelled tickets: {meta.n_tickets} ("
        + ", ".join(f"{k} {v}" for k, v in sorted(meta.sources.items()))
        + ")"
        + (
            "; left out: " + ", ".join(f"{k} {v}" for k, v in sorted(skipped_tickets.items()))
            if skipped_tickets
            else ""
        ),
        f"- {meta.folds}-fold cross-validation (seed {meta.seed}); minimum labels per class {meta.min_per_class}",
        "",
        "## How the figures are graded",
        "",
        "Every figure below is out-of-fold. Per question, the candidate maps this run fitted "
        "(listed per question below: of raw softmax, temperature, vector scaling, a head on the "
        "question's hidden state, a head on the chosen features) are compared by k-fold "
        "cross-validated NLL and the lowest wins; a head's regularisation C is the best of its "
        "grid on those same folds (so its "
        "CV NLL is slightly optimistic). *After* figures and the *nested* confusion "
        "matrix come from an outer k-fold that repeats the whole procedure (method choice, "
        "heads, green gate, thresholds) without the graded fold, so no ticket is graded by anything "
        "fitted on it. *Before* is the raw probability, which nothing was fitted on. ECE: "
        f"top-label, {N_BINS} equal-width bins.",
        "",
        "## Per question",
        "",
        "| question | method | CV NLL per candidate | n | ECE before → after | "
        "NLL before → after | accuracy before → after |",
        "|---|---|---|---:|---|---|---|",
    ]
    for name, q in meta.questions.items():
        cands = ", ".join(
            f"{c.method} {_f(c.cv_nll)}" if c.cv_nll is not None else f"{c.method} ✗" for c in q.candidates
        )
        extra = ""
        if q.method in ("temperature", "vector"):
            extra = f" (T = {q.temperature:.2f})"
        elif q.head is not None:
            extra = f" (C = {q.head.c:g})"
        lines.append(
            f"| {name} | **{q.method}**{extra} | {cands} | {q.n} | "
            f"{_f(q.ece_before)} → **{_f(q.ece_after)}** | {_f(q.nll_before)} → "
            f"{_f(q.nll_after)} | {_f(q.accuracy_before)} → {_f(q.accuracy_after)} |"
        )
    failed = [(n, c) for n, q in meta.questions.items() for c in q.candidates if c.error]
    if failed:
        lines += [
            "",
            "Candidates that could not be fit: " + "; ".join(f"{n}/{c.method}: {c.error}" for n, c in failed) + ".",
        ]
    if meta.skipped:
        lines += ["", "Left uncalibrated (served raw, `calibrated: false` on that answer):", ""]
        lines += [f"- {q}: {why}" for q, why in meta.skipped.items()]
    lines += ["", "Label counts per class:", ""]
    for q, counts in meta.label_counts.items():
        lines.append(f"- {q}: " + ", ".join(f"{o} {c}" for o, c in counts.items()))
    t = meta.thresholds
    d = Thresholds()
    assert meta.green is not None and meta.red is not None and meta.evaluation is not None
    lines += [
        "",
        "## Thresholds",
        "",
        "| threshold | default | chosen |",
        "|---|---:|---:|",
        f"| green: P(green) ≥ | {d.green} | **{t.green:.3f}** |",
        f"| red: P(red) ≥ | {d.red} | **{t.red:.2f}** |",
    ]
    lines += [f"| red flag {f}: P(yes) ≥ | {d.flags.get(f, 0.5)} | **{v:.2f}** |" for f, v in t.flags.items()]
    lines += [
        f"| not green when {f}: P(yes) ≥ | {d.yellow_flags.get(f, 0.5)} | **{t.yellow_flags[f]:.3f}** |"
        for f in meta.yellow
    ]
    lines += [
        "",
        f"- green: {meta.green.reason}. The bound holds only for tickets like the labelled "
        "ones; the green gate and the audit's re-estimate on served greens cover the rest.",
        *(
            [
                f"- green gate on {', '.join(meta.gate.inputs)}: a ticket whose mean whitened "
                f"distance to its {meta.gate.k} nearest labelled greens ({meta.gate.n_references}, "
                f"{meta.gate.dims} components) is over {meta.gate.threshold:.2f} (the "
                f"{meta.gate.quantile:.0%} quantile of the greens' own) is not green; it holds back "
                f"{meta.gate.greens_blocked:.1%} of the labelled greens."
            ]
            if meta.gate
            else []
        ),
        *(
            f"- yellow flag {f} (no labels of its own; every green-labelled ticket is a labelled 'no'): {c.reason}."
            for f, c in meta.yellow.items()
        ),
        f"- red and red flags: red recall {meta.red.recall:.1%} (target {meta.red.target:.0%}"
        f"{'' if meta.red.target_reached else ', NOT reached: the highest recall the grid allows'}"
        f") with {meta.red.over_escalations} non-red tickets sent to red and "
        f"{meta.red.flag_false_positives} flags raised on tickets labelled without them, "
        f"among {meta.red.n_red} labelled red; exhaustive search over a 0.05 grid.",
        "- Chosen on the out-of-fold probabilities of the selected maps; the nested confusion "
        "below grades thresholds chosen without the graded fold.",
        "",
        "Thresholds chosen in each outer fold (their spread is the uncertainty):",
        "",
        "| fold | green | red | " + " | ".join([*t.flags, *meta.yellow]) + " |",
        "|---|---:|---:|" + "---:|" * (len(t.flags) + len(meta.yellow)),
    ]
    for i, ft in enumerate(calibration.nested_thresholds, start=1):
        lines.append(
            f"| {i} | {ft.green:.3f} | {ft.red:.2f} | "
            + " | ".join(
                [
                    *(f"{ft.flags.get(f, 0.5):.2f}" for f in t.flags),
                    *(f"{ft.yellow_flags.get(f, 0.5):.3f}" for f in meta.yellow),
                ]
            )
            + " |"
        )
    ev = meta.evaluation
    lines += [
        "",
        "## Levels: confusion matrices",
        "",
        "**Nested cross-validation (honest):** maps and thresholds fitted without the graded fold.",
        "",
        summary_line(ev.nested),
        "",
        confusion_table(ev.nested),
        "",
        "**Selection set (optimistic):** the out-of-fold probabilities the final thresholds "
        "were chosen on; zero false greens here holds by construction.",
        "",
        summary_line(ev.selection),
        "",
        confusion_table(ev.selection),
        "",
        "**Raw probabilities with the default thresholds** (what serving does without an artifact):",
        "",
        summary_line(ev.raw_default),
        "",
        confusion_table(ev.raw_default),
        "",
        "Levels are L2's alone (service.l2.decision); the L1 rules can only raise them. A "
        "ticket whose risk came from constrained generation (low coverage) is never green and "
        "is never calibrated; it is counted here as serving treats it.",
        "",
        "## Figures",
        "",
    ]
    for name in meta.questions:
        qd = data.questions[name]
        nested = calibration.nested_probs[name]
        rows = qd.usable() & np.all(np.isfinite(nested), axis=1)
        if not rows.any():
            continue
        file = f"reliability-{name}.png"
        reliability_png(
            directory / file,
            name,
            calibration.raw[name][rows],
            nested[rows],
            qd.labels[rows],
            f"{meta.questions[name].method}, nested CV",
        )
        lines.append(f"![{name}]({file})")
    risk = data.questions["risk"]
    if "risk" in meta.questions:
        nested = calibration.nested_probs["risk"]
        rows = (risk.labels >= 0) & np.all(np.isfinite(nested), axis=1)
        risk_png(
            directory / "risk-thresholds.png", nested[rows, 0], nested[rows, 2], risk.labels[rows], meta.thresholds
        )
        lines.append("![P(green) and P(red) by label](risk-thresholds.png)")
    (directory / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
