"""`triage bench` keeps the sections it did not measure from an existing results file, labelled."""

from __future__ import annotations

import json

from service.bench import keep_other_sections


def test_only_l1_keeps_the_previous_l2_section_with_its_own_run_identity(tmp_path):
    out = tmp_path / "results.json"
    out.write_text(
        json.dumps(
            {
                "created_at": "T0",
                "command": "triage bench",
                "machine": {"cores": 2},
                "l1": {"p50_ms": 9.0},
                "l2": {"ratio": 7.5},
            }
        )
    )
    merged = keep_other_sections(out, {"created_at": "T1", "l1": {"p50_ms": 0.1}})
    assert merged["l1"] == {"p50_ms": 0.1}
    assert merged["l2"] == {"ratio": 7.5, "created_at": "T0", "command": "triage bench", "machine": {"cores": 2}}


def test_a_full_run_replaces_l1_and_l2_and_keeps_the_batching_study(tmp_path):
    out = tmp_path / "results.json"
    fresh = {"created_at": "T1", "l1": {"p50_ms": 0.2}, "l2": {"ratio": 6.0}}
    assert keep_other_sections(out, dict(fresh)) == fresh  # no previous file
    out.write_text(json.dumps({"created_at": "T0", "l1": {"p50_ms": 9.0}, "batching": {"best_k": 2}}))
    merged = keep_other_sections(out, dict(fresh))
    assert merged["l1"] == {"p50_ms": 0.2} and merged["l2"] == {"ratio": 6.0}
    assert merged["batching"] == {"best_k": 2, "created_at": "T0", "command": None, "machine": None}
    out.write_text("{not json")
    assert keep_other_sections(out, dict(fresh)) == fresh
