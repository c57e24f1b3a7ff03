"""bench.run returns the `l1` section of bench/results.json."""

from __future__ import annotations

import json

from service.l1 import bench
from tests.l1.support import RULES


def test_bench_run_returns_the_l1_section(tmp_path):
    rows = [{"id": f"T{i}", "subject": "s", "body": f"Please delete my account {i}."} for i in range(5)]
    rows.append({"id": "BIG", "subject": "", "body": "x" * 5000})  # over 4 KiB: not in p50/p99
    dev = tmp_path / "dev.jsonl"
    dev.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    section = bench.run(dev, dev, rules_path=RULES, rounds=1)
    assert section["n"] == 10  # five small tickets, from both files
    assert 0 < section["p50_ms"] <= section["p99_ms"]
    assert section["p99_ms_32k"] > 0 and section["n_32k"] == 28
    assert section["machine"]["cpu_count"] >= 1 and section["machine"]["platform"]
    assert len(section["rules_sha"]) == 64


def test_synthetic_tickets_are_32_kib():
    texts = bench.synthetic_large(["short head"], ["a quoted message\nwith two lines"], count=6)
    assert all(len(text.encode()) <= bench.LARGE_SIZE for text in texts)
    assert all(len(text.encode()) > bench.LARGE_SIZE - 200 for text in texts)


def test_percentile_nearest_rank():
    assert bench._percentile([5, 1, 3, 2, 4], 50) == 3
    assert bench._percentile(list(range(1, 101)), 99) == 99
    assert bench._percentile([7], 99) == 7
