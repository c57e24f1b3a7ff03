"""Measures L1 latency for `triage bench`: the `l1` section of bench/results.json.

p50/p99 are over real tickets up to 4 KiB (dev set and public corpus), each evaluated
`rounds` times after one warm-up pass (RE2 builds its DFAs lazily; a long-running service
is warm). p99_ms_32k is over synthetic 32 KiB tickets: long threads (a ticket with earlier
messages quoted below it), log pastes, and pathological inputs.

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

from service.l1.engine import evaluate
from service.l1.pack import RulePack, load_pack
from service.results import ticket_text

SMALL_LIMIT = 4 * 1024  # bytes
LARGE_SIZE = 32 * 1024  # bytes
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
    rules_path: str | Path | None = None,
    rounds: int = 5,
    seed: int = 0,
) -> dict[str, Any]:
    """The `l1` section of bench/results.json (see the module docstring)."""
    if rules_path is None:
        from service.settings import load_settings

        rules_path = load_settings().rules_dir
    pack = load_pack(rules_path)
    dev = [ticket_text(row.get("subject"), row.get("body", "")) for row in _rows(dev_path)]
    corpus = [ticket_text(row.get("subject"), row.get("body", "")) for row in _rows(corpus_path)]
    small = [text for text in dev + corpus if len(text.encode("utf-8")) <= SMALL_LIMIT]
    small_cpu, small_wall = _timings(pack, small, rounds)
    large_cpu, large_wall = _timings(pack, synthetic_large(dev + corpus, corpus, seed=seed), rounds)
    dense_cpu, _ = _timings(pack, dense_large(dev, seed=seed + 1), rounds)
    return {
        "p50_ms": round(_percentile(small_cpu, 50), 4),
        "p99_ms": round(_percentile(small_cpu, 99), 4),
        "p99_ms_32k": round(_percentile(large_cpu, 99), 4),
        "p50_ms_32k": round(_percentile(large_cpu, 50), 4),
        "p99_ms_32k_dense": round(_percentile(dense_cpu, 99), 4),
        # Wall-clock time includes waiting for a CPU, i.e. whatever else the machine runs.
        "wall_p99_ms": round(_percentile(small_wall, 99), 4),
        "wall_p99_ms_32k": round(_percentile(large_wall, 99), 4),
        "clock": "thread CPU time per evaluate(), after one warm-up pass",
        "n": len(small),
        "n_32k": len(large_cpu) // rounds,
        "rounds": rounds,
        "rules_sha": pack.sha,
        "machine": machine(),
    }
