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
    args = _parser().parse_args(["audit", "calibrate", "--out", "x.json", "--json", "s.json",
                                 "--judge-model", "1.5b", "--method", "generated"])
    assert args.func.__name__ == "cmd_calibrate"
    assert (args.out, args.json, args.judge_model, args.method) == ("x.json", "s.json", "1.5b",
                                                                    "generated")
    run = _parser().parse_args(["audit", "run", "--sample", "5", "--seed", "3"])
    assert run.func.__name__ == "cmd_run" and run.sample == 5 and run.seed == 3
    assert run.method == "logits" and run.green_share == 0.6


def test_calibration_set_is_bundled_plus_operator_cases(tmp_path: Path) -> None:
    operator = tmp_path / "operator_cases.jsonl"
    cases, used = calibration_set(DEFAULT_CASES_PATH, operator)
    assert len(cases) == len(load_cases()) and used == [str(DEFAULT_CASES_PATH)]
    decision = Decision(ticket_id="T9", operator="ana", action="approve", correct_level="green",
                        given_level="green", decided_at=1.0)
    extra = case_from_decision(ticket_id="T9", subject=None, body="thanks!", language="en",
                               level_given="green", category_given="other", urgency_given=0,
                               decision=decision, judge_verdict="unacceptable", now=1.0)
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
