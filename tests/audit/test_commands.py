"""The `triage audit` command line: sub-commands wired, options parsed, calibration set merged."""

from __future__ import annotations

import argparse
from pathlib import Path

from service.audit.cases import DEFAULT_CASES_PATH, case_from_decision, load_cases, write_cases
from service.audit.commands import calibration_set, register
from service.results import Decision


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="triage")
    register(parser.add_subparsers(dest="command", required=True))
    return parser


def test_audit_calibrate_and_run_are_registered() -> None:
    args = _parser().parse_args(
        ["audit", "calibrate", "--out", "x.json", "--json", "s.json", "--judge-model", "1.5b", "--method", "generated"]
    )
    assert args.func.__name__ == "cmd_calibrate"
    assert (args.out, args.json, args.judge_model, args.method) == ("x.json", "s.json", "1.5b", "generated")
    run = _parser().parse_args(["audit", "run", "--sample", "5", "--seed", "3"])
    assert run.func.__name__ == "cmd_run" and run.sample == 5 and run.seed == 3
    assert run.method == "logits" and run.green_share == 0.6


def test_calibration_set_is_bundled_plus_operator_cases(tmp_path: Path) -> None:
    operator = tmp_path / "operator_cases.jsonl"
    cases, used = calibration_set(DEFAULT_CASES_PATH, operator)
    assert len(cases) == len(load_cases()) and used == [str(DEFAULT_CASES_PATH)]
    decision = Decision(
        ticket_id="T9", operator="ana", action="approve", correct_level="green", given_level="green", decided_at=1.0
    )
    extra = case_from_decision(
        ticket_id="T9",
        subject=None,
        body="thanks!",
        language="en",
        level_given="green",
        category_given="other",
        urgency_given=0,
        decision=decision,
        judge_verdict="unacceptable",
        now=1.0,
    )
    write_cases([extra, extra], operator)
    merged, used = calibration_set(DEFAULT_CASES_PATH, operator)
    assert len(merged) == len(cases) + 1 and merged[-1] == extra
    assert used == [str(DEFAULT_CASES_PATH), str(operator)]


def test_limit_spreads_over_every_kind() -> None:
    from service.audit.commands import spread

    cases = load_cases()
    subset = spread(cases, 12)
    assert len(subset) == 12 and len({c.id for c in subset}) == 12
    assert {c.human_verdict for c in subset} == {"acceptable", "unacceptable"}
    assert spread(cases, 500) == cases


def test_judge_model_resolution(tmp_path: Path) -> None:
    import hashlib

    import pytest

    from service.audit.backend import resolve_judge_model
    from service.model_fetch import ModelError
    from service.settings import load_settings

    gguf = tmp_path / "judge.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 60)
    digest = hashlib.sha256(gguf.read_bytes()).hexdigest()
    settings = load_settings({}, model_dir=str(tmp_path), judge_model_path=str(gguf))
    assert resolve_judge_model(settings) == (gguf, digest)  # TRIAGE_JUDGE_MODEL_PATH
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF" + b"\1" * 60)
    assert resolve_judge_model(settings, str(other))[0] == other  # --judge-model wins
    with pytest.raises(ModelError, match="judge model"):
        resolve_judge_model(settings, str(tmp_path / "missing.gguf"))
    # No judge configured: the classifier's model (here TRIAGE_MODEL_PATH).
    classifier = load_settings({}, model_dir=str(tmp_path), model_path=str(other))
    assert resolve_judge_model(classifier)[0] == other
    # A bundled size that is not fetched into this folder says how to fetch it.
    with pytest.raises(ModelError, match="fetch-model --size 1.5b"):
        resolve_judge_model(settings, "1.5b")
