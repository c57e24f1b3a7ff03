"""bench.run returns the `l1` section of bench/results.json."""

from __future__ import annotations

import argparse
import json

from service.l1 import bench, evaluate
from tests.l1.support import RULES


def test_bench_run_returns_the_l1_section(tmp_path):
    rows = [{"id": f"T{i}", "subject": "s", "body": f"Please delete my account {i}."} for i in range(5)]
    rows.append({"id": "BIG", "subject": "", "body": "x" * 5000})  # over 4 KiB: not in p50/p99
    dev = tmp_path / "dev.jsonl"
    dev.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    unread = tmp_path / "unread.jsonl"
    unread.write_text(json.dumps({"subject": "Refund", "body": "Please refund order 77 today."}), encoding="utf-8")
    section = bench.run(dev, dev, novel_path=unread, rules_path=RULES, rounds=1)
    assert section["n"] == 10  # five small tickets, from both files
    assert 0 < section["p50_ms"] <= section["p99_ms"]
    assert section["p99_ms_32k"] > 0 and section["n_32k"] == 28
    assert section["machine"]["cpu_count"] >= 1 and section["machine"]["platform"]
    assert len(section["rules_sha"]) == 64
    assert section["max_ms_32k_dense_first_pass"] > 0
    assert set(section["hostile_max_ms"]) >= {"digits_run", "homoglyph_flood", "every_rule_firing"}
    assert all(ms > 0 for ms in section["hostile_max_ms"].values())
    assert section["n_novel"] == 1 and section["novel_source"] == "unread.jsonl"
    assert 0 < section["novel_p50_ms"] <= section["novel_p99_ms"]
    assert section["n_novel_32k"] == 24 and section["novel_p99_ms_32k"] > 0
    assert 0 < section["reread_p50_ms"] <= section["reread_p99_ms"]
    assert section["n_sustained"] == bench.SUSTAINED_THREADS and section["sustained_mean_ms_32k"] > 0
    assert section["rss_mb"] > 0


def test_bench_run_leaves_out_the_unread_rows_without_their_file(tmp_path):
    dev = tmp_path / "dev.jsonl"
    dev.write_text(json.dumps({"subject": "s", "body": "Where is the export button?"}), encoding="utf-8")
    section = bench.run(dev, dev, novel_path=tmp_path / "absent.jsonl", rules_path=RULES, rounds=1)
    assert not any(key.startswith("novel") or key.startswith("n_novel") for key in section)


def test_hostile_inputs_are_32_kib_and_every_rule_fires(pack):
    texts = bench.hostile_large(pack)
    assert all(bench.LARGE_SIZE - 100 < len(text.encode()) <= bench.LARGE_SIZE for text in texts.values())
    fired = {hit.id for hit in evaluate(pack, texts["every_rule_firing"]).rules}
    # every rule that fires on a match; one that fires on no match cannot, as its patterns are there
    assert fired == {rule.id for rule in pack.rules if rule.spec.fires == "match"}


def test_latency_block_is_rendered_from_the_results_file(tmp_path):
    from service.l1 import commands

    results = tmp_path / "results.json"
    section = {
        "p50_ms": 0.1,
        "p99_ms": 0.4,
        "p50_ms_32k": 1.0,
        "p99_ms_32k": 2.5,
        "p99_ms_32k_dense": 4.0,
        "max_ms_32k_dense_first_pass": 20.0,
        "hostile_max_ms": {"digits_run": 1.5},
        "novel_p50_ms": 0.7,
        "novel_p99_ms": 4.5,
        "novel_p50_ms_32k": 11.0,
        "novel_p99_ms_32k": 21.0,
        "sustained_mean_ms_32k": 8.0,
        "sustained_p99_ms_32k": 30.0,
        "n_sustained": 300,
        "rss_mb": 390,
        "reread_p50_ms": 0.08,
        "reread_p99_ms": 0.6,
        "n_novel": 1019,
        "n_novel_32k": 24,
        "novel_source": "train.jsonl",
        "clock": "thread CPU time",
        "n": 3,
        "n_32k": 2,
        "rounds": 5,
        "rules_sha": "ab" * 32,
        "machine": {"load_avg_1m": 0.5, "cpu_count": 2},
        "other_processes": {"before": [{"command": "python replay.py", "cpu_percent": 97}]},
    }
    results.write_text(
        json.dumps({"created_at": "2026-12-01T02:00:00Z", "command": "triage bench --only l1", "l1": section})
    )
    doc = tmp_path / "l1.md"
    doc.write_text(f"# L1\n\nbefore\n\n{bench.DOC_BEGIN}\nold\n{bench.DOC_END}\nafter\n")
    args = argparse.Namespace(results=str(results), out=str(doc))
    assert commands.latency_command(args) == 0
    text = doc.read_text()
    assert "old" not in text and text.startswith("# L1") and text.endswith("after\n")
    assert "| 32 KiB threads and log pastes (n = 2) | 1.000 ms | 2.500 ms | 2.0 ms | **no** |" in text
    assert "| 32 KiB dense worst case | | 4.000 ms | 5.0 ms | yes |" in text
    assert "| ≤ 4 KiB the process has not read (train.jsonl, n = 1019, once each) | 0.700 ms | 4.500 ms" in text
    assert "| 32 KiB threads of tickets it has not read (n = 24, once each) | 11.000 ms | 21.000 ms" in text
    again = "| ≤ 4 KiB dev + corpus again, after those (n = 3, once each) | 0.080 ms | 0.600 ms | 0.5 ms | **no** |"
    assert again in text
    assert "| 300 more threads, quoting every ticket above, in a row (mean, p99) | 8.000 ms | 30.000 ms | | |" in text
    assert "Resident size of the bench process at the end: 390 MB" in text
    assert "`python replay.py` 97 %" in text and "| digits_run | 1.500 ms |" in text


def test_synthetic_tickets_are_32_kib():
    texts = bench.synthetic_large(["short head"], ["a quoted message\nwith two lines"], count=6)
    assert all(len(text.encode()) <= bench.LARGE_SIZE for text in texts)
    assert all(len(text.encode()) > bench.LARGE_SIZE - 200 for text in texts)


def test_percentile_nearest_rank():
    assert bench._percentile([5, 1, 3, 2, 4], 50) == 3
    assert bench._percentile(list(range(1, 101)), 99) == 99
    assert bench._percentile([7], 99) == 7
