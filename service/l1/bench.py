"""Measures L1 latency for `triage bench`: the `l1` section of bench/results.json.

p50/p99 are over real tickets up to 4 KiB (dev set and public corpus), each evaluated
`rounds` times after one warm-up pass. p99_ms_32k is over synthetic 32 KiB tickets: long
threads (a ticket with earlier messages quoted below it), log pastes, and pathological inputs.

Those rows time texts the process has already read, whose DFA states RE2 has built and kept.
A service reads every ticket once: the `novel_*` rows time tickets the process has never
seen (train.jsonl), once each, after all the others, which is what a warm process pays for
new traffic (RE2 builds the states a new text needs as it scans it), and `sustained_*` many
more new 32 KiB threads in a row, quoting every ticket the bench has. `reread_*` then times
the small tickets once more: a DFA cache that filled up on the new text has been emptied,
and its states are built again.

The headline numbers are the CPU time of the evaluating thread: what L1 costs, whatever
else runs on the machine. Wall-clock percentiles are reported next to them, with the load
average, because on a busy 2-core machine waiting for a CPU dominates wall time.
"""

from __future__ import annotations

import json
import os
import platform
import random
import time
from pathlib import Path
from typing import Any

from service.heap import freeze_startup_objects
from service.l1.engine import evaluate
from service.l1.pack import RulePack, load_pack
from service.results import ticket_text

SMALL_LIMIT = 4 * 1024  # bytes
# Targets (issue 17), CPU time per evaluation: p99 up to 4 KiB, at 32 KiB, dense 32 KiB.
TARGET_P99_MS = 0.5
TARGET_P99_32K_MS = 2.0
TARGET_P99_DENSE_MS = 5.0
DOC_BEGIN = "<!-- BEGIN GENERATED: triage rules latency -->"
DOC_END = "<!-- END GENERATED: triage rules latency -->"
LARGE_SIZE = 32 * 1024  # bytes
SUSTAINED_THREADS = 300  # new 32 KiB threads in a row (the `sustained_*` keys)
_LOG_EVENTS = ("timeout after 30000ms", "retry 3/5", "HTTP 502 from upstream", "ok", "queue 118")


def _rows(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _cut(text: str, limit: int = LARGE_SIZE) -> str:
    return text.encode("utf-8")[:limit].decode("utf-8", "ignore")


def synthetic_large(heads: list[str], history: list[str], count: int = 24, seed: int = 0) -> list[str]:
    """32 KiB tickets: a real ticket on top of a long quoted history or a log paste.

    The quoted history comes from `history` (the public corpus: real support traffic), as in
    a long thread; `dense_large` builds the worst case where every quote is a risky ticket.
    """
    rng = random.Random(seed)
    out: list[str] = []
    for i in range(count):
        head = rng.choice(heads)
        if i % 3 == 0:  # a log paste under a short message
            lines = [head, "", "Logs:"]
            while sum(len(line) + 1 for line in lines) < LARGE_SIZE:
                lines.append(
                    f"2024-05-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:"
                    f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z "
                    f"{rng.choice(['INFO', 'WARN', 'ERROR'])} req_{rng.getrandbits(40):010x} "
                    f"{rng.choice(['sync', 'api', 'worker', 'db'])}: {rng.choice(_LOG_EVENTS)}"
                )
            out.append(_cut("\n".join(lines)))
        else:  # a thread: the new message, then earlier ones quoted
            out.append(_thread(head, history, rng))
    # Pathological shapes: one long run, nested-looking brackets, every word a marker.
    out.append("a" * (LARGE_SIZE - 1) + "!")
    out.append(_cut("((((((((((" * 4000))
    out.append(_cut("please " * 6000))
    out.append(_cut("1234 5678 " * 4000))
    return out


def hostile_large(pack: RulePack) -> dict[str, str]:
    """Pathological 32 KiB tickets, by name: what an attacker or a broken client can send.

    Long runs of digits (validator candidates everywhere), a homoglyph flood (every letter a
    look-alike the normaliser folds), invisible characters between letters, whitespace of
    every kind, and every rule firing (all must_match examples of the pack, repeated).
    """
    # One example per rule, apart (farther than any context window reaches), then all of
    # them back to back until the ticket is full.
    apart = "\n\n" + "x " * 100 + "\n\n"
    firsts = apart.join(rule.spec.examples.must_match[0] for rule in pack.rules)
    examples = "\n".join(text for rule in pack.rules for text in rule.spec.examples.must_match)
    return {
        "digits_run": "7" * LARGE_SIZE,
        "card_like_digits": _cut("4111 1111 1111 1112 " * 2000),
        "phone_like_digits": _cut("+44 7700 900 412 " * 2000),
        "homoglyph_flood": _cut("Рlеаsе dеlеtе mу ассоunt аnd rеfund ΡΑΥΜΕΝΤ. " * 1000),
        "invisible_flood": _cut("d\u200be\u200dl\u2060e\ufe0ft\u200be " * 3000),
        "whitespace_flood": _cut("a \t\u00a0\u3000\r\n\u2028 b  " * 2000),
        "every_rule_firing": _cut(firsts + apart + (examples + "\n") * (1 + LARGE_SIZE // len(examples))),
    }


def dense_large(texts: list[str], count: int = 12, seed: int = 1) -> list[str]:
    """Worst case: 32 KiB threads whose every quoted message is itself a dev-set ticket."""
    rng = random.Random(seed)
    return [_thread(rng.choice(texts), texts, rng) for _ in range(count)]


def _thread(head: str, history: list[str], rng: random.Random) -> str:
    parts = [head]
    while sum(len(part) for part in parts) < LARGE_SIZE:
        quoted = rng.choice(history).replace("\n", "\n> ")
        parts.append(f"\n\nOn {rng.randint(1, 28)} May, someone wrote:\n> {quoted}")
    return _cut("".join(parts))


def _percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of `values` (q in 0..100)."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


def _timings(pack: RulePack, texts: list[str], rounds: int) -> tuple[list[float], list[float]]:
    """Per-evaluation CPU time of this thread and wall time, in ms, after a warm-up pass."""
    for text in texts:
        evaluate(pack, text)  # warm-up: DFAs are built lazily
    cpu: list[float] = []
    wall: list[float] = []
    for _ in range(rounds):
        for text in texts:
            wall_start, cpu_start = time.perf_counter(), time.thread_time()
            evaluate(pack, text)
            cpu.append((time.thread_time() - cpu_start) * 1000.0)
            wall.append((time.perf_counter() - wall_start) * 1000.0)
    return cpu, wall


def _first_pass(pack: RulePack, texts: list[str]) -> list[float]:
    """CPU time, in ms, of evaluating texts the pack has never seen, once each."""
    cpu: list[float] = []
    for text in texts:
        start = time.thread_time()
        evaluate(pack, text)
        cpu.append((time.thread_time() - start) * 1000.0)
    return cpu


def _resident_mb() -> int | None:
    """This process's resident set size now, in MB (Linux), mostly the DFA caches' growth."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") // (1 << 20)


def _cpu_ticks() -> dict[int, tuple[str, int]]:
    """pid -> (command, user + system CPU ticks) for every other process (Linux /proc)."""
    out: dict[int, tuple[str, int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        name = command.strip() or stat[stat.index("(") + 1 : stat.rindex(")")]
        out[int(entry.name)] = (name[:100], int(fields[11]) + int(fields[12]))
    return out


def other_processes(sample_s: float = 1.0, top: int = 5) -> list[dict[str, Any]]:
    """What else used the CPUs during a short sample: the busiest processes, in % of one core."""
    if not Path("/proc/self/stat").exists():
        return []
    before = _cpu_ticks()
    time.sleep(sample_s)
    after = _cpu_ticks()
    ticks = os.sysconf("SC_CLK_TCK")
    busy = sorted(
        ((after[pid][1] - before[pid][1], after[pid][0]) for pid in after if pid in before),
        reverse=True,
    )
    return [
        {"command": command, "cpu_percent": round(100.0 * used / ticks / sample_s)}
        for used, command in busy[:top]
        if used > 0
    ]


def machine() -> dict[str, Any]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "load_avg_1m": round(load[0], 2),
    }


def run(
    dev_path: str | Path,
    corpus_path: str | Path,
    *,
    novel_path: str | Path | None = None,
    rules_path: str | Path | None = None,
    rounds: int = 5,
    seed: int = 0,
) -> dict[str, Any]:
    """The `l1` section of bench/results.json (see the module docstring); without
    `novel_path` (or if it does not exist) the `novel_*` keys are left out."""
    if rules_path is None:
        from service.settings import load_settings

        rules_path = load_settings().rules_dir
    pack = load_pack(rules_path)
    freeze_startup_objects()  # as the service does after loading its pack (service/heap.py)
    others_before = other_processes()
    dev = [ticket_text(row.get("subject"), row.get("body", "")) for row in _rows(dev_path)]
    corpus = [ticket_text(row.get("subject"), row.get("body", "")) for row in _rows(corpus_path)]
    # First, before any warm-up: dense threads of text the DFAs have never scanned, which is
    # what a fresh worker pays (RE2 builds DFA states lazily, as text needs them).
    unseen_cpu = _first_pass(pack, dense_large(dev, seed=seed + 2))
    small = [text for text in dev + corpus if len(text.encode("utf-8")) <= SMALL_LIMIT]
    small_cpu, small_wall = _timings(pack, small, rounds)
    large_cpu, large_wall = _timings(pack, synthetic_large(dev + corpus, corpus, seed=seed), rounds)
    dense_cpu, _ = _timings(pack, dense_large(dev, seed=seed + 1), rounds)
    hostile = {name: round(max(_timings(pack, [text], rounds)[0]), 4) for name, text in hostile_large(pack).items()}
    novel: dict[str, Any] = {}
    if novel_path is not None and Path(novel_path).exists():
        # Last, so the process has read every text above first, as a running service has.
        unseen = [ticket_text(row.get("subject"), row.get("body", "")) for row in _rows(novel_path)]
        novel_small = _first_pass(pack, [text for text in unseen if len(text.encode("utf-8")) <= SMALL_LIMIT])
        novel_large = _first_pass(pack, dense_large(unseen, count=24, seed=seed + 3))
        # Many more, quoting every ticket the bench has (new threads, as a helpdesk's long ones
        # are): a set whose DFA cache cannot hold the states of one thread rebuilds them over
        # and over within it.
        mixed = unseen + dev + corpus
        sustained = _first_pass(pack, dense_large(mixed, count=SUSTAINED_THREADS, seed=seed + 4))
        # The small tickets timed above, once more: a set whose DFA cache filled up while reading
        # the new ones has dropped their states and builds them again.
        reread = _first_pass(pack, small)
        novel = {
            "novel_p50_ms": round(_percentile(novel_small, 50), 4),
            "novel_p99_ms": round(_percentile(novel_small, 99), 4),
            "novel_p50_ms_32k": round(_percentile(novel_large, 50), 4),
            "novel_p99_ms_32k": round(_percentile(novel_large, 99), 4),
            "sustained_mean_ms_32k": round(sum(sustained) / len(sustained), 4),
            "sustained_p99_ms_32k": round(_percentile(sustained, 99), 4),
            "n_sustained": len(sustained),
            "reread_p50_ms": round(_percentile(reread, 50), 4),
            "reread_p99_ms": round(_percentile(reread, 99), 4),
            "n_novel": len(novel_small),
            "n_novel_32k": len(novel_large),
            "novel_source": Path(novel_path).name,
        }
    return {
        "p50_ms": round(_percentile(small_cpu, 50), 4),
        "p99_ms": round(_percentile(small_cpu, 99), 4),
        "p99_ms_32k": round(_percentile(large_cpu, 99), 4),
        "p50_ms_32k": round(_percentile(large_cpu, 50), 4),
        "p99_ms_32k_dense": round(_percentile(dense_cpu, 99), 4),
        "max_ms_32k_dense_first_pass": round(max(unseen_cpu), 4),
        "hostile_max_ms": hostile,
        **novel,
        # Wall-clock time includes waiting for a CPU, i.e. whatever else the machine runs.
        "wall_p99_ms": round(_percentile(small_wall, 99), 4),
        "wall_p99_ms_32k": round(_percentile(large_wall, 99), 4),
        "clock": "thread CPU time per evaluate(), after one warm-up pass",
        "n": len(small),
        "n_32k": len(large_cpu) // rounds,
        "rounds": rounds,
        "rules_sha": pack.sha,
        "rss_mb": _resident_mb(),
        "machine": machine(),
        "other_processes": {"before": others_before, "after": other_processes()},
    }


def render(report: dict[str, Any], source: str, command: str) -> str:
    """The latency block of docs/l1.md, from a bench/results.json document (its l1 section)."""
    l1 = report["l1"]

    def met(value: float, limit: float) -> str:
        return "yes" if value <= limit else "**no**"

    others = l1.get("other_processes", {}).get("before", [])
    busy = "; ".join(f"`{p['command'][:60]}` {p['cpu_percent']} %" for p in others) or "nothing"
    lines = [
        DOC_BEGIN,
        f"Generated by `{command}` from [{source}](../{source}), measured "
        f"{l1.get('created_at', report.get('created_at', '?'))} by `{l1.get('command', report.get('command', '?'))}` "
        f"(rules_sha `{l1['rules_sha'][:16]}…`, {l1['rounds']} rounds, {l1['clock']}). "
        f"Load average {l1['machine']['load_avg_1m']} on {l1['machine']['cpu_count']} CPUs; "
        f"also running (share of one core, sampled before the run): {busy}.",
        "",
        "| tickets | CPU p50 | CPU p99 | target p99 | met |",
        "|---|---:|---:|---:|---|",
        f"| ≤ 4 KiB, dev + corpus (n = {l1['n']}) | {l1['p50_ms']:.3f} ms | {l1['p99_ms']:.3f} ms "
        f"| {TARGET_P99_MS} ms | {met(l1['p99_ms'], TARGET_P99_MS)} |",
        f"| 32 KiB threads and log pastes (n = {l1['n_32k']}) | {l1['p50_ms_32k']:.3f} ms "
        f"| {l1['p99_ms_32k']:.3f} ms | {TARGET_P99_32K_MS} ms "
        f"| {met(l1['p99_ms_32k'], TARGET_P99_32K_MS)} |",
        f"| 32 KiB dense worst case | | {l1['p99_ms_32k_dense']:.3f} ms | {TARGET_P99_DENSE_MS} ms "
        f"| {met(l1['p99_ms_32k_dense'], TARGET_P99_DENSE_MS)} |",
    ]
    if "novel_p99_ms" in l1:
        lines += [
            f"| ≤ 4 KiB the process has not read ({l1['novel_source']}, n = {l1['n_novel']}, once each) "
            f"| {l1['novel_p50_ms']:.3f} ms | {l1['novel_p99_ms']:.3f} ms | {TARGET_P99_MS} ms "
            f"| {met(l1['novel_p99_ms'], TARGET_P99_MS)} |",
            f"| 32 KiB threads of tickets it has not read (n = {l1['n_novel_32k']}, once each) "
            f"| {l1['novel_p50_ms_32k']:.3f} ms | {l1['novel_p99_ms_32k']:.3f} ms | {TARGET_P99_32K_MS} ms "
            f"| {met(l1['novel_p99_ms_32k'], TARGET_P99_32K_MS)} |",
            f"| {l1['n_sustained']} more threads, quoting every ticket above, in a row (mean, p99) "
            f"| {l1['sustained_mean_ms_32k']:.3f} ms "
            f"| {l1['sustained_p99_ms_32k']:.3f} ms | | |",
            f"| ≤ 4 KiB dev + corpus again, after those (n = {l1['n']}, once each) | {l1['reread_p50_ms']:.3f} ms "
            f"| {l1['reread_p99_ms']:.3f} ms | {TARGET_P99_MS} ms | {met(l1['reread_p99_ms'], TARGET_P99_MS)} |",
        ]
    if "max_ms_32k_dense_first_pass" in l1:
        lines.append(
            f"| 32 KiB dense, first pass of a fresh process (max) | | {l1['max_ms_32k_dense_first_pass']:.3f} ms | | |"
        )
    if l1.get("rss_mb"):
        resident = f"Resident size of the bench process at the end: {l1['rss_mb']} MB"
        lines += ["", resident + " (the DFA caches grow as text is read)."]
    if l1.get("hostile_max_ms"):
        lines += [
            "",
            "Pathological 32 KiB input (`bench.hostile_large`), slowest of the rounds:",
            "",
            "| input | CPU max |",
            "|---|---:|",
        ]
        lines += [f"| {name} | {ms:.3f} ms |" for name, ms in l1["hostile_max_ms"].items()]
    lines.append(DOC_END)
    return "\n".join(lines) + "\n"
