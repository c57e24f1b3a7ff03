"""Fill the generated blocks of README.md and docs/*.md from the result files.

A block is `<!-- generated:NAME -->` ... `<!-- /generated -->`; NAME is one of RENDERERS below,
each reading a result file the measuring command wrote (bench/results.json, docs/results/*.json,
loadtest/results/*.json, the bundled artifact under calibration/), so a figure in a generated
block is never typed by hand. docs/l1.md's latency block keeps the markers `triage rules
latency` writes and is filled by that command's own renderer (COMMAND_BLOCKS). `make docs`
rewrites the blocks; `--check` only reports stale ones (exit 1), which tests/test_docs.py runs.
A marker no renderer knows is an error: its figures would never be checked.

    python scripts/gen_docs.py [--check]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(
    r"(<!-- generated:(?P<name>[a-z0-9.-]+) -->\n)(?P<body>.*?)(<!-- /generated -->)",
    re.DOTALL,
)
# Blocks a `triage` command writes between its own markers; a marker of this form whose command
# is not in COMMAND_BLOCKS is an error like an unknown NAME.
COMMAND_BLOCK = re.compile(
    r"<!-- BEGIN GENERATED: (?P<name>[^>]+?) -->\n.*?<!-- END GENERATED: (?P=name) -->\n",
    re.DOTALL,
)
LEVELS = ("green", "yellow", "red")


def _json(relative: str) -> dict[str, Any]:
    return json.loads((ROOT / relative).read_text(encoding="utf-8"))


def _round(value: float, places: str) -> Decimal:
    """Halves rounded up (11.25 -> 11.3), as a person would write it."""
    return Decimal(repr(round(value, 9))).quantize(Decimal(places), ROUND_HALF_UP)


def _pct(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{_round(value * 100, '0.1')} %"


def _ms(value: float) -> str:
    return f"{value:,.0f}"


def _s(value: float) -> str:
    """Whole seconds, halves up."""
    return str(_round(value, "1"))


def _auto(metrics: dict[str, Any]) -> float:
    """Share of tickets answered green (automatically), from the confusion matrix."""
    confusion = metrics["confusion"]
    return sum(confusion[truth].get("green", 0) for truth in LEVELS) / metrics["n"]


def _source(*paths: str, after: str = "") -> str:
    """ "Source: [file](path)." naming the result files a block was made from."""
    links = ", ".join(f"[{Path(p).name}]({p})" for p in paths)
    return f"Source{'s' if len(paths) > 1 else ''}: {links}{after}."


def bench_l2() -> str:
    report = _json("bench/results.json")
    l2 = report["l2"]
    run = {key: l2.get(key, report.get(key)) for key in ("command", "created_at")}
    same = l2["same_answers_as_json"]
    suffix = sum(l2["suffix_tokens"].values())
    rows = [
        "| path | median ms per ticket | tokens evaluated per ticket | ratio to JSON |",
        "|---|---:|---:|---:|",
        f"| (a) a JSON object (category, risk, confidence, reasoning) generated under a grammar "
        f"| {_ms(l2['json_ms_median'])} | ticket + instruction, then "
        f"{l2['json_generated_tokens_median']} generated | 1 |",
        f"| (b) logits, all {l2['questions']} questions | **{_ms(l2['logits_ms_median'])}** | "
        f"{l2['tokens_per_ticket_median']} = {l2['ticket_tokens_median']} + {suffix} | "
        f"**{l2['ratio']:.2f}×** |",
        f"| (b') logits, the answers the JSON gives ({', '.join(same['questions'])}) | "
        f"{_ms(same['logits_ms_median'])} | | {same['ratio']:.2f}× |",
        f"| first question alone | {_ms(l2['first_question_ms'])} | | |",
    ]
    kv = l2["kv_sharing"]
    suffixes = ", ".join(f"{name} {tokens}" for name, tokens in l2["suffix_tokens"].items())
    notes = [
        f"- An extra question costs {_ms(l2['extra_question_ms'])} ms = "
        f"{l2['extra_question_share'] * 100:.1f} % of the first; the system context "
        f"({l2['system_tokens']} tokens) re-evaluated per ticket: "
        f"{l2['system_tokens_reevaluated']} tokens.",
        f"- Suffix tokens per question (the question and the chat template's turn end): {suffixes}.",
        f"- Sharing the ticket's KV: fused {_ms(kv['fused_ms_median'])} ms, parallel "
        f"{_ms(kv['parallel_ms_median'])} ms, rewind {_ms(kv['rewind_ms_median'])} ms; served: "
        f"{kv['served_mode']}; largest probability difference from rewind "
        f"{kv['max_probability_difference_vs_rewind']:.3f}.",
        f"- {l2['n_tickets']} dev tickets, model {l2['model']}, {l2['n_threads']} threads, "
        f"peak RSS {l2['peak_rss_mb']:.0f} MB; `{run['command']}` at {run['created_at']}.",
    ]
    targets = [
        ("logits at least 5× faster than JSON", l2["ratio"] >= 5, f"{l2['ratio']:.2f}×"),
        (
            "an extra question at most 20 % of the first",
            l2["extra_question_share"] <= 0.2,
            _pct(l2["extra_question_share"]),
        ),
        (
            "the system context never re-evaluated",
            l2["system_tokens_reevaluated"] == 0,
            f"{l2['system_tokens_reevaluated']} tokens",
        ),
    ]
    notes.append(
        "- Targets: "
        + "; ".join(f"{name}: {'met' if met else '**not met**'} ({value})" for name, met, value in targets)
        + "."
    )
    return "\n".join(rows) + "\n\n" + "\n".join(notes) + "\n"


def models() -> str:
    runs = {
        "0.5B raw": "docs/results/dev-0.5b.json",
        "1.5B raw": "docs/results/dev-1.5b.json",
        "0.5B calibrated (holdout)": "docs/results/holdout-0.5b-calibrated.json",
        "1.5B calibrated (holdout)": "docs/results/holdout-1.5b-calibrated.json",
    }
    data = {name: _json(path) for name, path in runs.items()}

    def line(label: str, cell: Callable[[dict[str, Any]], str]) -> str:
        return f"| {label} | " + " | ".join(cell(run) for run in data.values()) + " |"

    return (
        "\n".join(
            [
                "| | " + " | ".join(runs) + " |",
                "|---|" + "---:|" * len(runs),
                line("tickets", lambda r: str(r["n"])),
                line("level accuracy, L1 + L2", lambda r: _pct(r["accuracy"])),
                line("false greens", lambda r: str(r["false_greens"])),
                line("red recall", lambda r: _pct(r["red_recall"])),
                line("answered automatically (green)", lambda r: _pct(_auto(r))),
                line(
                    "L2 alone: accuracy / red recall",
                    lambda r: f"{_pct(r['l2_only']['accuracy'])} / {_pct(r['l2_only']['red_recall'])}",
                ),
                line("category accuracy", lambda r: _pct(r["category_accuracy"])),
                line(
                    "ms per ticket, p50 / p95",
                    lambda r: f"{_ms(r['latency_ms']['p50'])} / {_ms(r['latency_ms']['p95'])}",
                ),
            ]
        )
        + "\n\n"
        + _source(*runs.values())
        + "\n"
    )


_RULES = {"zero_false_green": "the conservative rule: above every non-green", "bound": "the stated bound"}


def study_features() -> str:
    path = "docs/results/study-features.json"
    report = _json(path)
    graded = report["graded"]
    header = ["features (risk head)", "dims", "fit s"]
    for name in graded:
        header += [f"{name}: AUC", f"{name}: greens cleared", f"{name}: false greens (without the gate)"]
    rows = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for spec, measured in report["sets"].items():
        cells = [spec, str(measured["dims"]), _s(measured["fit_s"])]
        for name in graded:
            g = measured["graded"][name]
            cells += [
                f"{g['auc_green']:.3f}",
                _pct(g["greens_cleared"]),
                f"**{g['false_greens']}** ({g['false_greens_without_gate']})",
            ]
        rows.append("| " + " | ".join(cells) + " |")
    rules = {measured["rule"] for measured in report["sets"].values()}
    rule = _RULES.get(rules.pop(), "") if len(rules) == 1 else "its rule"
    note = (
        f"Each head fitted on {report['train']} ({report['n_train']} tickets), its green threshold chosen on its "
        f"own out-of-fold P(green) ({rule}), green gate on {report['gate']}; graded on "
        f"{' and '.join(graded)}, never fitted on. {_source(path)}"
    )
    if len(report.get("commands", [])) > 1:  # runs joined by hand: `make study` writes the default sets only
        note += (
            f" It joins {len(report['commands'])} runs of `triage study features` (listed under `commands`): "
            "the default feature sets, then `--l1-features` and `--head mlp`."
        )
    return "\n".join(rows) + "\n\n" + note + "\n"


def study_sources() -> str:
    gated_path, open_path = "docs/results/study-sources.json", "docs/results/study-sources-nogate.json"
    bagged_path = "docs/results/study-sources-bagged.json"
    gated, open_, bagged = _json(gated_path), _json(open_path), _json(bagged_path)
    rows = [
        "| graded source | fitted on | AUC | greens cleared | answered automatically | false greens "
        "| without the gate: greens cleared | without the gate: false greens "
        "| bagged heads: greens cleared | bagged heads: false greens |",
        "|---|---|" + "---:|" * 8,
    ]
    for name, g in gated["held_out"].items():
        o, b = open_["held_out"][name], bagged["held_out"][name]
        rows.append(
            f"| {name} ({g['n']}) | {' + '.join(g['trained_on'])} | {g['auc_green']:.3f} | "
            f"{_pct(g['greens_cleared'])} | {_pct(g['answered_automatically'])} | **{g['false_greens']}** | "
            f"{_pct(o['greens_cleared'])} | {o['false_greens']} | {_pct(b['greens_cleared'])} | {b['false_greens']} |"
        )
    band = gated["held_out"][next(iter(gated["held_out"]))]["under_threshold_band"]["from"]
    under = "; ".join(
        f"{name} {g['under_threshold_band']['greens']} green, {g['under_threshold_band']['non_greens']} not green"
        for name, g in gated["held_out"].items()
    )
    note = (
        f"Just under the green threshold (P(green) from {band}, through the gate) lie the tickets a second opinion "
        f"(the cascade to a larger model) could at most clear, and those it would have to refuse: {under}. "
        f"Risk head on {gated['features']}, gate on {gated['gate']}, the risk question alone (no L1, no flags); "
        "bagged heads: 8 linear heads on bootstrap resamples, P(green) the lowest of them, same gate. "
        + _source(
            gated_path,
            open_path,
            bagged_path,
            after=" (the second with `--gate none`, the third with `--head bagged`)",
        )
    )
    return "\n".join(rows) + "\n\n" + note + "\n"


def study_sources_local() -> str:
    """Each source graded by a fit on the others, with one green threshold for all and with a
    threshold per fitted source near that source's greens (study.source_thresholds)."""
    path = "docs/results/study-sources-local.json"
    report = _json(path)
    quantiles = list(next(iter(report["held_out"].values()))["per_source_thresholds"])
    rows = [
        "| graded source | fitted on | one threshold: greens cleared / false greens | "
        + " | ".join(f"per source, neighbourhood {q}: greens cleared / false greens" for q in quantiles)
        + " | own thresholds (sources with enough labels) |",
        "|---|---|" + "---:|" * (1 + len(quantiles)) + "---|",
    ]
    for name, g in report["held_out"].items():
        local = g["per_source_thresholds"]
        own = (
            ", ".join(
                f"{s['source']} {s['threshold']:.4f} ({s['n_auto']} of {s['n_chosen_on']} above it, "
                f"bound {_pct(s['upper_bound'])} against {_pct(s['max_rate'])})"
                for s in local[quantiles[0]]["sources"]
            )
            or "none"
        )
        rows.append(
            f"| {name} ({g['n']}) | {' + '.join(g['trained_on'])} | {_pct(g['greens_cleared'])} / "
            f"**{g['false_greens']}** (threshold {g['threshold']:.4f}) | "
            + " | ".join(f"{_pct(local[q]['greens_cleared'])} / **{local[q]['false_greens']}**" for q in quantiles)
            + f" | {own} |"
        )
    note = (
        f"Risk head on {report['features']}, gate on {report['gate']}, the risk question alone (no L1, no flags), as "
        f"in the table above. A fitted source with at least {report['source_min_labels']} labels gets its own green "
        "threshold (the same rule, on its own out-of-fold P(green); the bound is the one-sided 95 % "
        "Clopper–Pearson bound on the false-green rate among its tickets above it, against the rate wanted); a "
        "graded ticket whose mean distance to its 5 nearest greens of that source, in the gate's space, is within "
        "the given quantile of those greens' own "
        "distances is held to that source's threshold (the highest, if several), any other to the one threshold. "
        + _source(path, after=" (`triage study sources --source-thresholds Q`)")
    )
    # The same with a lower minimum: which sources then get a threshold of their own, and what it does.
    low_path = "docs/results/study-sources-local-min100.json"
    low = _json(low_path)
    changed = []
    for name, g in low["held_out"].items():
        local = g["per_source_thresholds"]
        own = {s["source"]: s["threshold"] for s in local[quantiles[0]]["sources"]}
        before = {s["source"] for s in report["held_out"][name]["per_source_thresholds"][quantiles[0]]["sources"]}
        added = {k: v for k, v in own.items() if k not in before}
        if added:
            changed.append(
                f"{name}, graded by a fit on {' + '.join(g['trained_on'])}, gets "
                + ", ".join(f"{k}'s own threshold {v:.2f}" for k, v in added.items())
                + ", and "
                + " / ".join(str(local[q]["false_greens"]) for q in quantiles)
                + " false greens at the three neighbourhoods"
            )
    note += (
        f"\n\nWith a minimum of {low['source_min_labels']} labels instead: "
        + ("; ".join(changed) or "nothing changes")
        + ". "
        + _source(low_path, after=f" (`--source-min-labels {low['source_min_labels']}`)")
    )
    return "\n".join(rows) + "\n\n" + note + "\n"


def served_sources() -> str:
    path = "docs/results/served-sources.json"
    report = _json(path)
    rows = [
        "| graded source | artifact fitted on | tickets | false greens | greens cleared | answered automatically "
        "| red recall | accuracy | held back by the gate |",
        "|---|---|" + "---:|" * 7,
    ]
    for run in report["runs"]:
        r = run["report"]
        rows.append(
            f"| {run['graded']} | {run['fitted_on']}{', threshold after L1' if run.get('green_after_l1') else ''} "
            f"| {r['n']} | **{r['false_greens']}** | "
            f"{_pct(r['greens_cleared'])} | {_pct(r['answered_automatically'])} | {_pct(r['red_recall'])} | "
            f"{_pct(r['accuracy'])} | {r['blocked_by_ood']} |"
        )
    u = report["unlabelled"]
    note = (
        "L1 + L2 + max as served (`triage study served`: the replayed answers and hidden states with the "
        "artifact applied by serving's own functions), rules_sha "
        + ", ".join(sorted({f"`{run['report']['rules_sha'][:8]}`" for run in report["runs"]}))
        + f". On the {u['n']} unlabelled public tickets the bundled artifact `{u['artifact']}` answers {u['green']} "
        f"automatically (yellow {u['yellow']}, red {u['red']}, held back by the gate {u['held_back_by_gate']}). "
        + _source(path)
    )
    return "\n".join(rows) + "\n\n" + note + "\n"


# Rule files added after a served run, each graded by one artifact with the pack before and after
# it: (the rule file, its before and after files of `triage study served`).
SERVED_RULE_PAIRS = (
    ("unclear_intent.yaml", "docs/results/served-before-intent.json", "docs/results/served-after-intent.json"),
    ("green_evidence.yaml", "docs/results/served-before-evidence.json", "docs/results/served-after-evidence.json"),
)


def served_rules() -> str:
    """Artifacts graded with the rule pack before a rule file and with the pack after it: what the
    rules alone changed (a refit from a new replay moves a borderline ticket or two, so packs are
    compared on one artifact, not across `make served` runs)."""
    rows = [
        "| rules added | graded source | artifact | false greens: pack before → after | greens cleared: before → after "
        "| kept from green by the new rules |",
        "|---|---|---|---:|---:|---|",
    ]
    packs, paths = [], []
    for added, before_path, after_path in SERVED_RULE_PAIRS:
        before, after = _json(before_path), _json(after_path)
        for graded, old in before["sources"].items():
            new = after["sources"][graded]
            # one artifact for the file (the first comparison) or one per graded source
            artifact = old.get("calibration", before.get("calibration"))
            if artifact != new.get("calibration", after.get("calibration")):
                raise ValueError(f"{before_path} and {after_path} graded {graded} with different artifacts")
            kept = sorted(set(old["false_green_ids"]) - set(new["false_green_ids"]))
            rows.append(
                f"| `{added}` | {graded} | `{artifact}` | {old['false_greens']} → "
                f"**{new['false_greens']}** | {_pct(old['greens_cleared'])} → {_pct(new['greens_cleared'])} "
                f"| {', '.join(kept) or 'none'} |"
            )
        packs.append(
            f"`{added}`: "
            + " → ".join(
                ", ".join(sorted({f"`{r['rules_sha'][:8]}`" for r in d["sources"].values()})) for d in (before, after)
            )
        )
        paths += [before_path, after_path]
    return "\n".join(rows) + f"\n\nrules_sha {'; '.join(packs)}. " + _source(*paths) + "\n"


def bundled_artifact() -> Path:
    """The newest artifact directory: versions sort chronologically, as load_latest reads them."""
    return sorted(p.parent for p in (ROOT / "calibration").glob("*/artifact.json"))[-1]


def artifact() -> str:
    folder = bundled_artifact()
    relative = folder.relative_to(ROOT).as_posix()
    a = _json(f"{relative}/artifact.json")
    nested, green, gate = a["evaluation"]["nested"], a["green"], a["gate"]
    greens = nested["confusion"][0]  # rows labelled green, yellow, red; columns the same order
    sources = ", ".join(f"{name} {n}" for name, n in a["sources"].items())
    chosen = (
        "zero false green" if green["rule"] == "zero_false_green" else f"the bound holds at {_pct(green['max_rate'])}"
    )
    text = (
        f"Artifact `{a['version']}`: {a['n_tickets']} labelled tickets ({sources}). "
        f"Nested {a['folds']}-fold cross-validation (heads, gate and thresholds fitted without the graded fold): "
        f"{nested['false_greens']} false green{'s' if nested['false_greens'] != 1 else ''}, "
        f"greens cleared {_pct(greens[0] / sum(greens))}, answered automatically {_pct(nested['green_rate'])}, "
        f"red recall {_pct(nested['red_recall'])}, accuracy {_pct(nested['accuracy'])} (L2 alone). "
        f"Green threshold {green['threshold']:.4f} ({chosen}): on the {green['n']} tickets it was chosen on, "
        f"{green['n_auto']} answered automatically, {green['false_greens']} false, "
        f"{round(green['confidence'] * 100)} % upper bound {_pct(green['upper_bound'])} against "
        f"{_pct(green['max_rate'])} wanted"
    )
    if green["labels_needed"] > 0:
        text += f"; about {green['labels_needed']:,} labelled tickets at this mix would let the bound hold"
    text += (
        f". Gate: {', '.join(gate['inputs'])}, threshold {gate['threshold']:.2f}, holds back "
        f"{_pct(gate['greens_blocked'])} of the labelled greens. Fit: {a['elapsed_s']:.0f} s on {a['machine']}. "
        f"Per question, thresholds and confusion matrices: [report.md]({relative}/report.md)."
    )
    return text + "\n"


def learning_curve() -> str:
    path = "docs/results/learning-curve.json"
    report = _json(path)
    sizes: dict[int, list[dict[str, Any]]] = {}
    for point in report["points"]:
        sizes.setdefault(point["labels"], []).append(point)
    graded = [name for name in report["points"][0] if isinstance(report["points"][0][name], dict)]
    pool = [name for name in report["sources"] if name not in graded]
    header = ["labels fitted on"]
    for name in graded:
        header += [f"{name}: greens cleared (mean, min–max)", f"{name}: false greens (mean, max)"]
    rows = ["| " + " | ".join([*header, "fit s"]) + " |", "|---:|" + "---|" * (len(header) - 1) + "---:|"]
    for labels, points in sizes.items():
        cells = [str(labels)]
        for name in graded:
            cleared = [p[name]["greens_cleared"] for p in points]
            false = [p[name]["false_greens"] for p in points]
            cells += [
                f"{_pct(sum(cleared) / len(cleared))} ({_pct(min(cleared))}–{_pct(max(cleared))})",
                f"{_round(sum(false) / len(false), '0.1')} ({max(false)})",
            ]
        fit = [p["fit_s"] for p in points]
        cells.append(str(_round(sum(fit) / len(fit), "0.1")))
        rows.append("| " + " | ".join(cells) + " |")
    graded_n = " and ".join(f"the {report['sources'][name]} {name} tickets" for name in graded)
    note = (
        f"{len(report['points'])} fits on random subsets of {' + '.join(pool)} (pool {report['pool']}), "
        f"graded on {graded_n}. {_source(path)} Picture: [learning-curve.png](docs/img/learning-curve.png)."
    )
    return "\n".join(rows) + "\n\n" + note + "\n"


def _layers(report: dict[str, Any]) -> list[str]:
    """Each layer alone and combined: the eval's `l1_only`, `l2_only` and its top level (L1 + L2)."""
    rows = [
        "| | accuracy | false greens | missed reds | over-escalations | red recall |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, m in (("L1 only", report["l1_only"]), ("L2 only", report["l2_only"]), ("**L1 + L2**", report)):
        rows.append(
            f"| {label} | {_pct(m['accuracy'])} | {m['false_greens']} | {m['missed_reds']} | "
            f"{m['over_escalations']} | {_pct(m['red_recall'])} |"
        )
    return rows


def _what_ran(report: dict[str, Any]) -> str:
    calibration = report.get("calibration") or "none (raw letters, default thresholds)"
    return (
        f"model {report['model']['name']}, calibration {calibration}, prompt_sha {report['prompt_sha'][:8]}, "
        f"rules_sha {report['rules_sha'][:8]}"
    )


def eval_raw() -> str:
    path = "docs/results/dev-0.5b.json"
    r = _json(path)
    languages = ", ".join(
        f"{lang} {_pct(m['l1_accuracy'])} / {_pct(m['l2_accuracy'])} / {_pct(m['accuracy'])}"
        for lang, m in r["per_language"].items()
    )
    auc = r["auc"]
    flags = " / ".join(f"{auc[f]:.2f}" for f in ("commitment", "destructive_or_access", "third_party_personal_data"))
    t = r["analysis"]["thresholds"]
    chosen = t["chosen"]
    perm = r["analysis"]["permutations"]
    orders = [
        ("one order, all tickets", perm["one_order"]),
        (f"{len(perm['orders'])} orders averaged, all tickets", perm["averaged"]),
        ("one order, holdout half", perm["holdout_one_order"]),
        (f"{len(perm['orders'])} orders averaged, holdout half", perm["holdout_averaged"]),
    ]
    lines = [
        *_layers(r),
        "",
        f"- {r['n']} tickets, {_what_ran(r)}; ms per ticket p50 {_ms(r['latency_ms']['p50'])}, "
        f"p95 {_ms(r['latency_ms']['p95'])}.",
        f"- Accuracy per language, L1 only / L2 only / L1 + L2: {languages}.",
        f"- Halves (stratified by label, ids dealt alternately): tune {_pct(r['halves']['tune']['accuracy'])}, "
        f"holdout {_pct(r['halves']['holdout']['accuracy'])}, false greens "
        f"{r['halves']['tune']['false_greens']} and {r['halves']['holdout']['false_greens']}.",
        f"- Raw signal: AUC of P(green) for labelled green {auc['risk_p_green_vs_rest']:.2f}, of P(red) for "
        f"labelled red {auc['risk_p_red_vs_rest']:.2f}, of the three flags {flags}; category accuracy "
        f"{_pct(r['category_accuracy'])}.",
        f"- Thresholds chosen on the tune half (`analysis.thresholds`): green {chosen['green']}, red {chosen['red']}, "
        f"flags {' / '.join(str(v) for v in chosen['flags'].values())}; on the holdout half accuracy "
        f"{_pct(t['holdout']['accuracy'])}, {t['holdout']['false_greens']} false greens, answered automatically "
        f"{_pct(t['holdout']['answered_automatically'])}.",
        "",
        "Option orders of the risk question (same run, L2 alone):",
        "",
        "| | L2 accuracy | false greens | ECE (risk) |",
        "|---|---:|---:|---:|",
        *(
            f"| {label} ({m['n']}) | {_pct(m['l2_accuracy'])} | {m['l2_false_greens']} | {m['ece_risk']:.3f} |"
            for label, m in orders
        ),
        "",
        _source(path, "docs/results/dev-0.5b.rows.jsonl"),
    ]
    return "\n".join(lines) + "\n"


def injection() -> str:
    path = "docs/results/injection-0.5b.json"
    r = _json(path)
    lines = [
        *_layers(r),
        "",
        f"{r['n']} tickets in {len(r['per_language'])} languages, {_what_ran(r)}. "
        + _source(path, "docs/results/injection-0.5b.rows.jsonl"),
    ]
    return "\n".join(lines) + "\n"


# The llama.cpp build each L2 bench ran with (the result files do not record it).
BENCH_RUNS = {
    "bench/results.json": "AVX-512 (`scripts/llama-cmake-args`)",
    "docs/results/bench-l2-rerun.json": "AVX-512 (`scripts/llama-cmake-args`)",
    "docs/results/bench-l2-portable.json": "portable (`-DGGML_NATIVE=OFF`: AVX2, FMA, F16C)",
    "docs/results/bench-l2-avx512.json": "AVX-512 (flags in its `command`)",
}


def bench_l2_runs() -> str:
    rows = [
        "| result file | build | measured | questions | suffix tokens | system tokens | logits ms | JSON ms "
        "| ratio | extra question | load average |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for path, build in BENCH_RUNS.items():
        report = _json(path)
        l2 = report["l2"]
        measured = l2.get("created_at", report["created_at"])[:10]  # a kept section has its own run's
        rows.append(
            f"| [{path.removeprefix('docs/results/')}]({path}) | {build} | {measured} | "
            f"{l2['questions']} | "
            f"{sum(l2['suffix_tokens'].values())} | {l2['system_tokens']} | {_ms(l2['logits_ms_median'])} | "
            f"{_ms(l2['json_ms_median'])} | {l2['ratio']:.2f}× | {_pct(l2['extra_question_share'])} | "
            f"{l2.get('machine', report['machine'])['load_avg_1m']} |"  # a kept section has its own run's
        )
    return "\n".join(rows) + "\n"


def _loadtests() -> list[tuple[str, dict[str, Any]]]:
    return [
        (path.relative_to(ROOT).as_posix(), json.loads(path.read_text(encoding="utf-8")))
        for path in sorted((ROOT / "loadtest" / "results").glob("*.json"))
    ]


def loadtest_runs() -> str:
    rows = [
        "| run | offered / achieved per s | workers × threads | accept p50 / p95 / p99 ms | 5xx | lost "
        "| 429 at the bound | L2 p50 s | tickets per minute per worker | load average before |",
        "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for path, run in _loadtests():
        config, r = run["config"], run["results"]
        accept, integrity = r["accept_ms"], r["integrity"]
        rows.append(
            f"| [{Path(path).stem}]({path[: -len('.json')]}.md) | {config['rate']:g} / {r['requests']['per_second']} "
            f"| {config['workers']} × {config['threads']} "
            f"| {accept['p50']:.1f} / {accept['p95']:.1f} / {accept['p99']:.1f} "
            f"| {r['requests']['server_errors']} | {integrity['lost']} of {integrity['accepted']:,} "
            f"| {'yes' if run['backpressure']['ok'] else '**no**'} | {r['capacity']['l2_ms']['p50'] / 1000:.1f} "
            f"| **{r['capacity']['per_worker']}** | {run['machine']['load_before']} |"
        )
    return "\n".join(rows) + "\n"


SIZING_TRAFFIC = (10, 30, 60, 120, 300)  # tickets per minute


def sizing() -> str:
    bench, portable = _json("bench/results.json")["l2"], _json("docs/results/bench-l2-portable.json")["l2"]
    path, loaded = max(_loadtests(), key=lambda item: item[1]["started"])
    per_minute = 60_000 / bench["logits_ms_median"]
    image = 60_000 / portable["logits_ms_median"]  # the image builds portably: size on that
    lines = [
        f"- A worker with {bench['n_threads']} threads on cores of its own: {bench['logits_ms_median'] / 1000:.2f} s "
        f"of L2 per ticket (median, all {bench['questions']} questions, [bench/results.json](bench/results.json)), "
        f"about **{per_minute:.0f} tickets per minute**; with the portable build "
        f"{portable['logits_ms_median'] / 1000:.2f} s, about **{image:.0f} a minute** "
        "([bench-l2-portable.json](docs/results/bench-l2-portable.json)), what the image runs.",
        f"- A worker with {loaded['config']['threads']} thread beside the API and the load generator on the same "
        f"{loaded['machine']['cpus']} cores: **{loaded['results']['capacity']['per_worker']} tickets per minute** "
        f"(the load test's saturation figure, [{Path(path).stem}]({path[: -len('.json')]}.md)).",
        f"- Peak RSS with {bench['model']} loaded: {bench['peak_rss_mb']:.0f} MB.",
        "",
        f"| tickets per minute | workers at the image's {image:.0f} a minute, plus one spare |",
        "|---:|---:|",
        *(f"| {traffic} | {math.ceil(traffic / image)} + 1 |" for traffic in SIZING_TRAFFIC),
        f"| 1,000 an hour ({1000 / 60:.1f}) | {math.ceil(1000 / 60 / image)} + 1 |",
        "",
        f"Both figures are for one ticket per decode call in mode `{bench.get('mode', 'fused')}`; cross-ticket "
        f"batching (docs/l2.md): {_json('bench/results.json')['batching']['decision']}.",
    ]
    return "\n".join(lines) + "\n"


def batching() -> str:
    run = _json("bench/results.json")["batching"]
    ks = list(run["mean_tickets_per_minute"])
    rows = [
        "| tickets per decode call (k) | " + " | ".join(ks) + " |",
        "|---|" + "---:|" * len(ks),
        "| tickets per minute, each round | "
        + " | ".join(" / ".join(f"{x:.1f}" for x in run["tickets_per_minute"][k]) for k in ks)
        + " |",
        "| against k = 1 | " + " | ".join(f"{run['ratio_to_k1'][k]:.2f}×" for k in ks) + " |",
        "| largest probability difference against k = 1 | – | "
        + " | ".join(f"{run['max_probability_difference_vs_k1'][k]:.3f}" for k in ks[1:])
        + " |",
        "",
        f"{run['tickets']} dev tickets, {run['questions_per_ticket']} questions each, {run['rounds']} rounds "
        f"(the order of k reversed in the second); a lone ticket took {run['lone_ticket_p50_ms'] / 1000:.1f} s "
        "(median). "
        f"Measured {run['created_at'][:10]} on {run['machine']['cores']} cores ({run['machine']['cpu']}); "
        f"{run['other_load']}. **Decision: {run['decision']}.**",
    ]
    return "\n".join(rows) + "\n"


def framing() -> str:
    path = "docs/results/framing.json"
    report = _json(path)
    variants = report["variants"]
    names = list(variants)

    def line(label: str, cell: Callable[[dict[str, Any]], str]) -> str:
        return f"| {label} | " + " | ".join(cell(variants[n]) for n in names) + " |"

    def lowest(v: dict[str, Any]) -> str:
        q, c = min(v["coverage"].items(), key=lambda item: item[1]["median"])
        return f"{q} {c['median']:.2f}"

    rows = [
        "| turn end | " + " | ".join(f"`{n}`" for n in names) + " |",
        "|---|" + "---:|" * len(names),
        line("tokens per ticket beside its text (outro + questions)", lambda v: str(v["tokens"]["per_ticket"])),
        line(
            "raw coverage of risk, median / lowest",
            lambda v: f"{v['coverage']['risk']['median']:.2f} / {v['coverage']['risk']['min']:.2f}",
        ),
        line("question with the lowest median coverage", lowest),
        line("nested CV: false greens", lambda v: f"**{v['nested']['false_greens']}**"),
        line("nested CV: greens cleared", lambda v: _pct(v["greens_cleared"])),
        line("nested CV: answered automatically", lambda v: _pct(v["nested"]["green_rate"])),
        line("nested CV: red recall", lambda v: _pct(v["nested"]["red_recall"])),
        line("nested CV: accuracy (L2 alone)", lambda v: _pct(v["nested"]["accuracy"])),
    ]
    sources = " + ".join(f"{k} {n}" for k, n in report["sources"].items())
    d = report["decision"]
    verdict = "shipped" if d["ship"] else "not shipped"
    held = "quality held" if d["quality_holds"] else "quality did not hold"
    note = (
        f"{sources} labelled tickets, each framing replayed through the model and calibrated as "
        f"`triage recalibrate` does ({report['folds']}-fold nested cross-validation; at least "
        f"{report['min_per_class']} labels per class: the default 15 refuses these sets, which hold too "
        "few tickets with third-party personal data). "
        f"**Decision: {verdict}** "
        f"({d['tokens_saved_per_ticket']} tokens saved per ticket, {held}). " + _source(path)
    )
    return "\n".join(rows) + "\n\n" + note + "\n"


# L1 benches kept beside a change to the pack or the engine, in the order they were taken; what
# changed between them is not in the result files.
def _alternating(before: tuple[str, str], after: tuple[str, str], rounds: int = 3) -> dict[str, str]:
    """Bench rows of alternating rounds, before then after in each: (file stem, label), both
    with `{n}` for the round."""
    return {
        f"docs/results/{stem.format(n=n)}.json": label.format(n=n)
        for n in range(1, rounds + 1)
        for stem, label in (before, after)
    }


L1_BENCH_RUNS = {
    "docs/results/bench-l1-before-stdnum.json": "hand-written Luhn and IBAN checks",
    "docs/results/bench-l1-stdnum.json": "python-stdnum validators, national-ID rules",
    "docs/results/bench-l1-before-breadth.json": "the same pack, back to back with the next row",
    "docs/results/bench-l1-breadth.json": "with the breadth files",
    "docs/results/bench-l1-before-requests.json": "the 60-rule pack, back to back with the next row",
    "docs/results/bench-l1-requests.json": "production requests, wider breadth, two files split off",
    "docs/results/bench-l1-before-engine.json": "22 sets by file (the engine before), back to back with the next row",
    "docs/results/bench-l1-engine.json": "8 sets by bytes read, case-sensitive, script sets skipped",
    "docs/results/bench-l1-before-spans.json": "the engine above, back to back with the next row",
    "docs/results/bench-l1-spans.json": "one span per rule, 6 sets, invisibles and runs found by array, heap frozen",
    "docs/results/bench-l1-before-arrays.json": "the engine above, back to back with the next row",
    "docs/results/bench-l1-arrays.json": "long texts folded by one table look-up, offsets from continuation bytes",
    "docs/results/bench-l1-before-unread.json": "the engine above (6 sets), back to back with the next row",
    "docs/results/bench-l1-unread.json": "non-ASCII patterns in sets of at most 64 (9 sets)",
    "docs/results/bench-l1-before-intent.json": "the pack above, back to back with the next row",
    "docs/results/bench-l1-intent.json": "with unclear_intent.yaml (two yellow rules, 9 patterns; still 9 sets)",
    **_alternating(
        ("bench-l1-before-setform-{n}", "round {n}: the pack above, exact sets of at most 64 (9 sets)"),
        ("bench-l1-setform-{n}", "round {n}: sets read set_form, non-ASCII sets of at most 128 (7 sets)"),
    ),
    "docs/results/bench-l1-setform-256.json": "after round 3: set_form, non-ASCII sets of at most 256 (6 sets)",
    **_alternating(
        (
            "bench-l1-before-evidence-{n}",
            "round {n}, a slower EPYC: the pack above; windows before validators, their answers kept per process",
        ),
        ("bench-l1-evidence-{n}", "round {n}: with green_evidence.yaml (one rule, 26 patterns; still 7 sets)"),
    ),
    **_alternating(
        (
            "bench-l1-process-memo-{n}",
            "round {n}, later: the pack above, validator answers kept per process (an LRU of 4,096)",
        ),
        ("bench-l1-ticket-memo-{n}", "round {n}: validator answers kept per ticket only"),
    ),
    **_alternating(
        (
            "bench-l1-before-runs-{n}",
            "round {n}: the engine above, whitespace runs found by array from 2,048 characters",
        ),
        ("bench-l1-runs-{n}", "round {n}: runs found by the regex up to 6,144 characters"),
    ),
    "docs/results/bench-l1-before-spans-avx512.json": "an AVX-512 EPYC (family 26): the code and pack of "
    "bench-l1-before-spans.json (commit a42c033^), run right after the three rows below",
    "bench/results.json": "run 1 of 3: today's code and pack on that machine",
    "docs/results/bench-l1-repeat-2.json": "run 2 of 3",
    "docs/results/bench-l1-repeat-3.json": "run 3 of 3",
}


def l1_bench_runs() -> str:
    rows = [
        "| result file | pack | rules_sha | CPU | ≤ 4 KiB p50 / p99 ms | 32 KiB p99 ms | dense p99 ms "
        "| unread ≤ 4 KiB p50 / p99 ms | unread 32 KiB p99 ms | 300 new threads mean / p99 ms | read again p99 ms "
        "| resident MB | load average |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for path, pack in L1_BENCH_RUNS.items():
        report = _json(path)
        l1 = report["l1"]
        cpu = report.get("machine", {}).get("cpu", "?").split(" @ ")[0]
        unread = (  # rows measured before the bench timed unread tickets have none
            f"{l1['novel_p50_ms']:.3f} / {l1['novel_p99_ms']:.2f} | {l1['novel_p99_ms_32k']:.1f} | "
            f"{l1['sustained_mean_ms_32k']:.1f} / {l1['sustained_p99_ms_32k']:.0f} | {l1['reread_p99_ms']:.2f} | "
            f"{l1['rss_mb']}"
            if "novel_p50_ms" in l1
            else "– | – | – | – | –"
        )
        rows.append(
            f"| [{Path(path).name}]({path}) | {pack} | `{l1['rules_sha'][:8]}` | {cpu} | {l1['p50_ms']:.3f} / "
            f"{l1['p99_ms']:.3f} | {l1['p99_ms_32k']:.2f} | {l1['p99_ms_32k_dense']:.1f} | {unread} | "
            f"{l1['machine']['load_avg_1m']} |"
        )
    return "\n".join(rows) + "\n"


def cascade() -> str:
    path = "docs/results/cascade.json"
    report = _json(path)
    rows = [
        "| graded source | tickets | band (share) | greens cleared: 0.5B alone → with the 1.5B on the band "
        "| false greens: alone → with | mean time per ticket |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, g in report["graded"].items():
        d = report["decision"]["per_source"][name]
        rows.append(
            f"| {name} | {g['n']} | {g['band']} ({_pct(g['band_share'])}) | {_pct(g['without']['greens_cleared'])} → "
            f"{_pct(g['with']['greens_cleared'])} | {g['without']['false_greens']} → **{g['with']['false_greens']}** "
            f"| {d['mean_time_ratio']:.2f}× |"
        )
    fitted = "; ".join(
        f"for {name}: {' + '.join(f'{s} {n}' for s, n in g['second_fitted_on'].items())}"
        for name, g in report["graded"].items()
    )
    verdict = "shipped" if report["decision"]["ship"] else "not shipped"
    note = (
        f"Band: P(green) from {report['band_from']} up to the 0.5B's threshold, through its gate. The 1.5B's risk head "
        f"on its own ticket@mid was fitted on ({fitted}) and clears a band ticket at or above its own zero-false-green "
        f"threshold. Mean time: 1 + band share × {report['time_ratio_1_5b']:.2f} (the 1.5B's median time per ticket "
        f"over the 0.5B's, docs/results/dev-1.5b.json and dev-0.5b.json). **Decision: {verdict}** (more greens, no "
        "false green added and at most 1.5× the mean time, on every graded source). " + _source(path)
    )
    return "\n".join(rows) + "\n\n" + note + "\n"


RENDERERS: dict[str, Callable[[], str]] = {
    "cascade": cascade,
    "bench-l2": bench_l2,
    "models": models,
    "study-features": study_features,
    "study-sources": study_sources,
    "study-sources-local": study_sources_local,
    "served-sources": served_sources,
    "artifact": artifact,
    "learning-curve": learning_curve,
    "eval-raw": eval_raw,
    "injection": injection,
    "bench-l2-runs": bench_l2_runs,
    "loadtest-runs": loadtest_runs,
    "sizing": sizing,
    "batching": batching,
    "framing": framing,
    "l1-bench-runs": l1_bench_runs,
    "served-rules": served_rules,
}


def l1_latency() -> str:
    """docs/l1.md's latency block, by `triage rules latency`'s own renderer (needs the project's venv)."""
    sys.path.insert(0, str(ROOT))  # this checkout's service package, not another installed one
    from service.l1 import bench

    source = "bench/results.json"
    return bench.render(_json(source), source, f"triage rules latency --results {source} --out docs/l1.md")


COMMAND_BLOCKS: dict[str, Callable[[], str]] = {"triage rules latency": l1_latency}
# Command blocks that belong in a report beside their result file, not in the prose docs.
ELSEWHERE = {"triage rules report": "docs/results/l1-rules-report.md (`triage rules report --out` that file)"}


def _fix_links(text: str, doc: Path) -> str:
    """Links are written relative to the repository root; a doc under docs/ needs ../."""
    if doc.parent.name != "docs":
        return text
    return re.sub(r"\]\((?!https?:|#|\.\./)", "](../", text)


class UnknownBlock(ValueError):
    """A generated marker whose name no renderer knows: its figures would never be checked."""


def render(doc: Path) -> str:
    text = doc.read_text(encoding="utf-8")

    def fill(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in RENDERERS:
            raise UnknownBlock(f"{_name(doc)}: no renderer for <!-- generated:{name} --> in scripts/gen_docs.py")
        return match.group(1) + _fix_links(RENDERERS[name](), doc) + match.group(4)

    def fill_command(match: re.Match[str]) -> str:
        name = match.group("name")
        if name in ELSEWHERE:
            raise UnknownBlock(f"{_name(doc)}: the `{name}` block belongs in {ELSEWHERE[name]}")
        if name not in COMMAND_BLOCKS:
            raise UnknownBlock(f"{_name(doc)}: no renderer for <!-- BEGIN GENERATED: {name} --> in scripts/gen_docs.py")
        return COMMAND_BLOCKS[name]()

    return COMMAND_BLOCK.sub(fill_command, BLOCK.sub(fill, text))


def markers(docs: list[Path] = DOCS) -> list[tuple[str, str]]:
    """(document, block name) for every generated marker of either form, rendered or not."""
    found = []
    for doc in docs:
        text = doc.read_text(encoding="utf-8")
        found += [(_name(doc), m.group("name")) for m in BLOCK.finditer(text)]
        found += [(_name(doc), m.group("name")) for m in COMMAND_BLOCK.finditer(text)]
    return found


def stale(docs: list[Path] = DOCS) -> list[str]:
    """The documents whose generated blocks differ from what the result files say."""
    return [_name(doc) for doc in docs if render(doc) != doc.read_text(encoding="utf-8")]


def _name(doc: Path) -> str:
    return str(doc.relative_to(ROOT)) if doc.is_relative_to(ROOT) else doc.name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report stale blocks, write nothing")
    args = parser.parse_args(argv)
    try:
        if args.check:
            out_of_date = stale()
            for name in out_of_date:
                print(f"{name}: generated blocks are stale; run `make docs`", file=sys.stderr)
            return 1 if out_of_date else 0
        for doc in DOCS:
            new = render(doc)
            if new != doc.read_text(encoding="utf-8"):
                doc.write_text(new, encoding="utf-8")
                print(f"updated {_name(doc)}")
    except UnknownBlock as error:
        print(error, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
