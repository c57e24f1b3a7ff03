"""Measures L1 alone on a labelled set and renders it as Markdown for docs/l1.md.

Pure functions compute the numbers (confusion matrix, per-rule fire counts, per-flag recall,
the three targets); `render` turns them into Markdown; `write` puts that between the
GENERATED markers of the output file, so hand-written text around it survives.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from service.l1.engine import evaluate
from service.l1.pack import RulePack
from service.results import RED_FLAGS, ticket_text

TRUTHS = ("green", "yellow", "red")
L1_LEVELS = ("none", "yellow", "red")
BEGIN = "<!-- BEGIN GENERATED: triage rules report -->"
END = "<!-- END GENERATED: triage rules report -->"

# The targets of issue 3, in the policy's order of importance.
MAX_GREEN_TO_RED = 0
MAX_GREEN_TO_YELLOW = 0.10  # share of green tickets
MIN_RED_AS_RED = 0.60  # share of red tickets


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@dataclass
class Measured:
    """L1 on a labelled set: what the report shows and the targets test asserts."""

    matrix: Counter[tuple[str, str]] = field(default_factory=Counter)
    fires: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    flag_total: Counter[str] = field(default_factory=Counter)
    flag_caught: Counter[str] = field(default_factory=Counter)
    misses: list[tuple[str, str, str, list[str]]] = field(default_factory=list)
    # (language, truth, L1 level) → tickets; and the green tickets any rule fired on
    by_language: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    greens_fired: list[tuple[str, str, list[str]]] = field(default_factory=list)

    def total(self, truth: str) -> int:
        return sum(self.matrix[(truth, level)] for level in L1_LEVELS)

    def share(self, truth: str, level: str) -> float:
        total = self.total(truth)
        return self.matrix[(truth, level)] / total if total else 0.0


@dataclass(frozen=True)
class Target:
    name: str
    value: str
    limit: str
    met: bool


def measure(pack: RulePack, rows: list[dict[str, Any]]) -> Measured:
    """Run L1 on every labelled row (fields: id, subject, body, risk, flags)."""
    out = Measured()
    for row in rows:
        truth = row["risk"]
        result = evaluate(pack, ticket_text(row.get("subject"), row.get("body", "")))
        out.matrix[(truth, result.level)] += 1
        out.by_language[(row.get("language") or "?", truth, result.level)] += 1
        fired = sorted({hit.id for hit in result.rules})
        if truth == "green" and fired:
            out.greens_fired.append((row.get("id", "?"), result.level, fired))
        for rule_id in fired:
            out.fires[rule_id][truth] += 1
        hit_flags = {hit.flag for hit in result.rules}
        for flag in RED_FLAGS:
            if (row.get("flags") or {}).get(flag):
                out.flag_total[flag] += 1
                out.flag_caught[flag] += flag in hit_flags
        wrong = (
            (truth == "green" and result.level != "none")
            or (truth == "red" and result.level != "red")
            or (truth == "yellow" and result.level == "red")
        )
        if wrong:
            out.misses.append((row.get("id", "?"), truth, result.level, fired))
    return out


def per_language(measured: Measured) -> dict[str, dict[str, int]]:
    """Per language: reds, reds L1 caught as red, yellows, yellows any rule fired on (L1 alone
    keeps them from green), greens, greens any rule fired on."""
    out: dict[str, dict[str, int]] = {}
    for (language, truth, level), count in sorted(measured.by_language.items()):
        row = out.setdefault(
            language, {"red": 0, "red_as_red": 0, "yellow": 0, "yellow_fired": 0, "green": 0, "green_fired": 0}
        )
        if truth == "red":
            row["red"] += count
            row["red_as_red"] += count if level == "red" else 0
        elif truth == "yellow":
            row["yellow"] += count
            row["yellow_fired"] += count if level != "none" else 0
        elif truth == "green":
            row["green"] += count
            row["green_fired"] += count if level != "none" else 0
    return out


def summary(measured: Measured) -> dict[str, Any]:
    """What `--json` writes for one labelled set (and `--before` reads back)."""
    return {
        "per_language": per_language(measured),
        "greens_fired": [
            {"id": ticket, "level": level, "rules": fired} for ticket, level, fired in measured.greens_fired
        ],
    }


def render_languages(name: str, measured: Measured, before: dict[str, Any] | None = None) -> list[str]:
    """A per-language table of red recall and green fires, beside the `before` run if given."""
    rows = per_language(measured)
    old = (before or {}).get("per_language", {})
    head = "| language | reds caught as red | yellows kept from green | greens raised by a rule |"
    rule = "|---|---:|---:|---:|"
    if before is not None:
        head += " before: reds caught | before: greens raised |"
        rule += "---:|---:|"
    lines = [f"#### `{name}`", "", head, rule]
    total = {"red": 0, "red_as_red": 0, "yellow": 0, "yellow_fired": 0, "green": 0, "green_fired": 0}
    total_old = dict(total)
    for language, row in rows.items():
        for key in total:
            total[key] += row[key]
            total_old[key] += old.get(language, {}).get(key, 0)
        lines.append(_language_row(language, row, old.get(language, {}) if before is not None else None))
    lines.append(_language_row("**all**", total, total_old if before is not None else None))
    fired = measured.greens_fired
    lines += [
        "",
        "Green tickets a rule fired on: "
        + (", ".join(f"{ticket} ({level}: {', '.join(rules)})" for ticket, level, rules in fired) if fired else "none")
        + ".",
    ]
    return lines


def _language_row(language: str, row: dict[str, int], old: dict[str, int] | None) -> str:
    def share(caught: int, total: int) -> str:
        return f"{caught}/{total} ({caught / total:.0%})" if total else "–"

    cells = (
        f"| {language} | {share(row['red_as_red'], row['red'])} | {share(row['yellow_fired'], row['yellow'])}"
        f" | {row['green_fired']}/{row['green']} |"
    )
    if old is not None:
        cells += f" {share(old.get('red_as_red', 0), old.get('red', 0))} |"
        cells += f" {old.get('green_fired', 0)}/{old.get('green', 0)} |"
    return cells


def corpus_fires(pack: RulePack, rows: list[dict[str, Any]]) -> tuple[Counter[str], Counter[str]]:
    """On unlabelled tickets: how many got each L1 level, and how many each rule fired on."""
    levels: Counter[str] = Counter()
    fires: Counter[str] = Counter()
    for row in rows:
        result = evaluate(pack, ticket_text(row.get("subject"), row.get("body", "")))
        levels[result.level] += 1
        fires.update({hit.id for hit in result.rules})
    return levels, fires


def targets(measured: Measured) -> list[Target]:
    green_red = measured.matrix[("green", "red")]
    green_yellow = measured.share("green", "yellow")
    red_red = measured.share("red", "red")
    return [
        Target("green tickets raised to red", str(green_red), f"= {MAX_GREEN_TO_RED}", green_red <= MAX_GREEN_TO_RED),
        Target(
            "green tickets raised to yellow",
            f"{green_yellow:.1%}",
            f"≤ {MAX_GREEN_TO_YELLOW:.0%}",
            green_yellow <= MAX_GREEN_TO_YELLOW,
        ),
        Target("red tickets caught as red", f"{red_red:.1%}", f"≥ {MIN_RED_AS_RED:.0%}", red_red >= MIN_RED_AS_RED),
    ]


def render(
    pack: RulePack,
    measured: Measured,
    *,
    command: str,
    date: str,
    data_name: str,
    corpus: tuple[Counter[str], Counter[str]] | None = None,
    corpus_name: str = "",
    languages: list[str] | None = None,
) -> str:
    lines = [
        BEGIN,
        "## Measured: L1 alone on the dev set",
        "",
        f"Generated by `{command}` on {date}, rules_sha `{pack.sha[:16]}…`"
        f" ({len(pack.rules)} rules in {len(pack.files)} files), data `{data_name}`.",
        "",
        "### Confusion matrix (truth → L1 level)",
        "",
        "| truth \\ L1 | none | yellow | red | total |",
        "|---|---:|---:|---:|---:|",
    ]
    for truth in TRUTHS:
        cells = " | ".join(str(measured.matrix[(truth, level)]) for level in L1_LEVELS)
        lines.append(f"| {truth} | {cells} | {measured.total(truth)} |")
    lines += ["", "### Targets", "", "| target | measured | limit | met |", "|---|---:|---:|---|"]
    for target in targets(measured):
        lines.append(f"| {target.name} | {target.value} | {target.limit} | {'yes' if target.met else 'NO'} |")
    lines += ["", "### Red flags: tickets whose flag an L1 rule of that flag caught", ""]
    for flag in RED_FLAGS:
        total = measured.flag_total[flag]
        caught = measured.flag_caught[flag]
        share = f"{caught / total:.0%}" if total else "n/a"
        lines.append(f"- `{flag}`: {caught} of {total} ({share})")
    corpus_levels, corpus_counts = corpus if corpus else (Counter(), Counter())
    lines += [
        "",
        "### Per-rule fire counts (tickets on which the rule fired)",
        "",
        "| rule | level | flag | dev green | dev yellow | dev red |" + (" corpus |" if corpus else ""),
        "|---|---|---|---:|---:|---:|" + ("---:|" if corpus else ""),
    ]
    for rule in pack.rules:
        counts = measured.fires.get(rule.id, Counter())
        row = (
            f"| `{rule.id}` | {rule.spec.level} | {rule.spec.flag} | {counts['green']} |"
            f" {counts['yellow']} | {counts['red']} |"
        )
        lines.append(row + (f" {corpus_counts[rule.id]} |" if corpus else ""))
    if corpus:
        total = sum(corpus_levels.values())
        lines += [
            "",
            f"### Public corpus (unlabelled, `{corpus_name}`, {total} tickets)",
            "",
            "L1 levels: "
            + ", ".join(f"{level} {corpus_levels[level]}" for level in L1_LEVELS)
            + ". Read what fires there to check that rules generalise (see the table above).",
        ]
    if languages:
        lines += ["", "### Per language", ""] + languages
    lines += ["", "### Dev tickets where L1 alone disagrees with the label", ""]
    if measured.misses:
        lines.append("| ticket | truth | L1 | rules |")
        lines.append("|---|---|---|---|")
        for ticket, truth, level, fired in measured.misses:
            lines.append(f"| {ticket} | {truth} | {level} | {', '.join(fired) or '—'} |")
        lines.append("")
        lines.append("A red ticket at L1 none still goes to L2; yellow ones that L1 leaves at none")
        lines.append("are expected (L1 only catches what words can catch).")
    else:
        lines.append("None.")
    lines.append(END)
    return "\n".join(lines) + "\n"


def write(out: str | Path, markdown: str, begin: str = BEGIN, end: str = END) -> None:
    """Replace the GENERATED block of `out` (or append it, or create the file)."""
    path = Path(out)
    if path.exists():
        current = path.read_text(encoding="utf-8")
        if begin in current and end in current:
            head, rest = current.split(begin, 1)
            tail = rest.split(end, 1)[1].lstrip("\n")
            path.write_text(head + markdown + tail, encoding="utf-8")
            return
        path.write_text(current.rstrip("\n") + "\n\n" + markdown, encoding="utf-8")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(markdown, encoding="utf-8")
