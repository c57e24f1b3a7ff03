"""Load-test pictures: the accept-latency histogram and the backlog over time, beside report.md."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "loadtest"))
import plots  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_histogram_buckets_are_half_open_and_the_last_is_unbounded():
    hist = plots.histogram([0.5, 1.0, 49.9, 50.0, 10_000.0])
    edges, counts = hist["edges_ms"], hist["counts"]
    assert edges[0] == 0.0 and edges[-1] is None and len(counts) == len(edges) - 1
    assert counts[0] == 1 and counts[1] == 1  # 0.5 in [0, 1); 1.0 in [1, 2)
    assert counts[edges.index(30.0)] == 1 and counts[edges.index(50.0)] == 1
    assert counts[-1] == 1 and sum(counts) == 5
    json.dumps(hist)  # the report is JSON


def _report() -> dict:
    t0 = 1_000.0
    samples = [
        {
            "t": t0 + 2 * i,
            "backlog": min(i * 100, 3000),
            "pending": 1,
            "results": i // 5,
            "yellow": 0,
            "red": 0,
            "load1": 1.0,
        }
        for i in range(40)
    ]
    samples.insert(3, {"t": t0 + 5, "error": "ConnectionError"})  # a sampling hiccup
    accept = [2.0] * 900 + [8.0] * 90 + [60.0] * 10
    return {
        "config": {"rate": 50.0, "duration_s": 60, "workers": 1},
        "load_window": {"start": t0, "end": t0 + 60},
        "results": {
            "accept_ms": {"p50": 2.0, "p99": 60.0, "n": len(accept)},
            "accept_histogram": plots.histogram(accept),
        },
        "samples": samples,
    }


def test_both_pictures_are_drawn_beside_the_report(tmp_path):
    drawn = plots.draw(_report(), tmp_path)
    assert [p.name for p in drawn] == ["accept-latency.png", "backlog.png"]
    assert all(p.read_bytes()[:8] == PNG_MAGIC for p in drawn)


def test_an_old_report_without_a_histogram_gets_the_backlog_only(tmp_path):
    report = _report()
    del report["results"]["accept_histogram"], report["load_window"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(report))
    assert plots.main([str(path)]) == 0
    assert sorted(p.name for p in tmp_path.glob("*.png")) == ["old-backlog.png"]


def test_the_committed_reports_link_pictures_that_exist():
    for md in (ROOT / "loadtest" / "results").glob("*.md"):
        for line in md.read_text().splitlines():
            if line.startswith("!["):
                target = line.split("](", 1)[1].rstrip(")")
                assert (md.parent / target).exists(), (md.name, target)
