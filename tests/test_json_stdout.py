"""`--json -` writes the JSON to stdout, and nothing else goes there, for every command with --json."""

from __future__ import annotations

import json
import sys

import pytest

from service import cli
from service.output import human_stream, write_json
from tests.audit.support import LookupBackend
from tests.support import REDIS_URL


@pytest.fixture(autouse=True)
def _quiet_logging(monkeypatch):
    monkeypatch.setattr("service.logs.configure_logging", lambda *a, **k: None)  # global state


def test_write_json_goes_to_a_file_or_stdout(tmp_path, capsys):
    write_json(b'{"a": 1}', tmp_path / "deep" / "out.json")
    assert json.loads((tmp_path / "deep" / "out.json").read_text()) == {"a": 1}
    write_json('{"b": 2}', "-")
    assert capsys.readouterr().out == '{"b": 2}\n'
    assert human_stream("-") is sys.stderr and human_stream("x.json") is sys.stdout
    assert human_stream(None) is sys.stdout


def test_bench_json_dash(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = [
        {"subject": "Hi", "body": "How do I export a report to CSV?"},
        {"subject": "Refund", "body": "Please refund invoice 42, we were charged twice."},
    ]
    for name in ("dev.jsonl", "corpus.jsonl"):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = cli.main(
        [
            "bench",
            "--only",
            "l1",
            "--json",
            "-",
            "--quiet",
            "--dev",
            str(tmp_path / "dev.jsonl"),
            "--corpus",
            str(tmp_path / "corpus.jsonl"),
            "--novel",
            str(tmp_path / "corpus.jsonl"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    section = json.loads(out)["l1"]  # the whole of stdout is one JSON document
    assert section["n"] == 4 and section["n_novel"] == 2
    assert not (tmp_path / "-").exists()


def _fake_judge(monkeypatch):
    from service.audit import commands
    from service.audit.judge import Judge
    from service.audit.rubric import DEFAULT_RUBRIC_DIR, load_rubric

    def judge(settings, args, cache=None):
        return Judge(LookupBackend(), load_rubric(DEFAULT_RUBRIC_DIR), method="logits", cache=cache)

    monkeypatch.setattr(commands, "_judge", judge)


def test_audit_calibrate_json_dash(tmp_path, capsys, monkeypatch):
    _fake_judge(monkeypatch)
    monkeypatch.setenv("TRIAGE_VAR_DIR", str(tmp_path))
    code = cli.main(
        ["audit", "calibrate", "--limit", "6", "--quiet", "--json", "-", "--out", str(tmp_path / "calibration.json")]
    )
    captured = capsys.readouterr()
    assert code == 0
    summary = json.loads(captured.out)
    assert summary["n"] == 6 and "kappa" in summary
    assert "n=6" in captured.err  # the human summary moved to stderr
    assert (tmp_path / "calibration.json").exists()


def test_audit_run_json_dash(tmp_path, capsys, monkeypatch, prefix):
    _fake_judge(monkeypatch)
    monkeypatch.setenv("REDIS_URL", REDIS_URL)
    monkeypatch.setenv("TRIAGE_REDIS_PREFIX", prefix)
    monkeypatch.setenv("TRIAGE_VAR_DIR", str(tmp_path))
    code = cli.main(["audit", "run", "--quiet", "--json", "-", "--out-dir", str(tmp_path / "a")])
    captured = capsys.readouterr()
    assert code == 0
    report = json.loads(captured.out)
    assert report["tickets"] == [] and "false_green" in report
    assert "audit: 0 judged" in captured.err
