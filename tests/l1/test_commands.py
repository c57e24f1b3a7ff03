"""`triage rules check | explain | report` through argparse, as service/cli.py wires them."""

from __future__ import annotations

import argparse
import json

import pytest
import structlog

from service.l1 import commands
from service.l1.report import BEGIN, END
from tests.l1.support import GOOD_RULE, RULES, pack_text


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="triage")
    commands.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return args.func(args)


def test_check_ok(capsys):
    assert run("rules", "check", str(RULES)) == 0
    out = capsys.readouterr().out
    assert "rules OK" in out and "rules_sha" in out


def test_check_broken_names_the_rule(tmp_path, capsys):
    (tmp_path / "a.yaml").write_bytes(pack_text(GOOD_RULE.replace("level: red", "level: yellow")))
    assert run("rules", "check", str(tmp_path)) == 1
    err = capsys.readouterr().err
    assert "rules BROKEN" in err and "rule demo.delete" in err


def test_check_defaults_to_the_configured_rules_dir(monkeypatch, capsys):
    monkeypatch.setenv("TRIAGE_RULES_DIR", str(RULES))
    try:
        assert run("rules", "check") == 0
    finally:
        structlog.reset_defaults()  # settings_or_exit configured logging for the whole process


def test_an_invalid_setting_is_one_line_and_exit_2(monkeypatch, capsys):
    monkeypatch.setenv("TRIAGE_RESULT_TTL_S", "0")
    with pytest.raises(SystemExit) as exit_:
        run("rules", "check")
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "triage rules: invalid setting: TRIAGE_RESULT_TTL_S: expected int >= 60, got 0"
    )


def test_explain_shows_rules_and_where(capsys):
    assert run("rules", "explain", "--rules", str(RULES), "Please delete my account now") == 0
    out = capsys.readouterr().out
    assert "L1 level: red" in out
    assert "destructive.delete_account_or_data" in out and "[0:24]" in out
    assert "»Please delete my account« now" in out
    # no question, thanks or request for information: the evidence rule fires and marks nothing
    assert "evidence.none_for_green" in out and "[0:0]" in out and "»«" not in out


def test_explain_reads_stdin(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("how do I delete my draft"))
    assert run("rules", "explain", "--rules", str(RULES), "-") == 0
    assert "L1 level: none" in capsys.readouterr().out


def _write_rows(path, rows):
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")


def test_report_writes_the_generated_block_and_keeps_the_rest(tmp_path, capsys):
    data = tmp_path / "dev.jsonl"
    _write_rows(
        data,
        [
            {
                "id": "T1",
                "subject": "",
                "body": "Please delete my account.",
                "risk": "red",
                "flags": {"destructive_or_access": True},
            },
            {"id": "T2", "subject": "q", "body": "How do I export my contacts?", "risk": "green", "flags": {}},
        ],
    )
    out = tmp_path / "l1.md"
    out.write_text(f"# Title\n\nHand-written.\n\n{BEGIN}\nold\n{END}\n\nAfter.\n", encoding="utf-8")
    assert run("rules", "report", "--rules", str(RULES), "--data", str(data), "--out", str(out)) == 0
    doc = out.read_text(encoding="utf-8")
    assert doc.startswith("# Title\n\nHand-written.") and doc.rstrip().endswith("After.")
    assert "old" not in doc
    assert "triage rules report --data" in doc and "| green | 1 | 0 | 0 | 1 |" in doc
    assert "| red | 0 | 0 | 1 | 1 |" in doc and "`destructive.delete_account_or_data`" in doc


def test_report_fails_when_a_target_is_missed(tmp_path, capsys):
    data = tmp_path / "dev.jsonl"
    _write_rows(data, [{"id": "T1", "subject": "", "body": "Please delete my account.", "risk": "green", "flags": {}}])
    assert run("rules", "report", "--rules", str(RULES), "--data", str(data)) == 1
    assert "MISSED green tickets raised to red" in capsys.readouterr().out


def test_report_requires_data():
    with pytest.raises(SystemExit):
        run("rules", "report")


def test_report_per_language_json_and_before(tmp_path, capsys):
    rows = [
        {
            "id": "A1",
            "language": "en",
            "body": "Please delete my account.",
            "risk": "red",
            "flags": {"destructive_or_access": True},
        },
        {"id": "A2", "language": "en", "body": "How do I export my contacts?", "risk": "green", "flags": {}},
        {
            "id": "A3",
            "language": "de",
            "body": "Bitte löschen Sie mein Konto.",
            "risk": "red",
            "flags": {"destructive_or_access": True},
        },
        {
            "id": "A4",
            "language": "de",
            "body": "Ich will dich nicht mehr sehen, IHR SEID BETRÜGER!!!",
            "risk": "green",
            "flags": {},
        },
        {"id": "A5", "language": "en", "body": "The sync failed and we lost all our data.", "risk": "yellow"},
        {"id": "A6", "language": "en", "body": "Something seems off with the tool, any idea why?", "risk": "yellow"},
    ]
    data = tmp_path / "dev.jsonl"
    _write_rows(data, rows)
    first, second = tmp_path / "before.json", tmp_path / "after.json"
    assert run(
        "rules", "report", "--rules", str(RULES), "--data", str(data), "--also", f"{data}@held", "--json", str(first)
    ) in (0, 1)
    before = json.loads(first.read_text(encoding="utf-8"))
    dev = before["data"]["dev.jsonl"]
    assert dev["per_language"]["en"] == {
        "red": 1,
        "red_as_red": 1,
        "yellow": 2,
        "yellow_fired": 1,  # report.data_loss keeps A5 from green; nothing fires on A6 (it asks)
        "green": 1,
        "green_fired": 0,
    }
    assert dev["per_language"]["de"]["red_as_red"] == 1
    assert [fired["id"] for fired in dev["greens_fired"]] == ["A4"]  # shouting fires on it
    # @held keeps the ids whose sha256 is 0 mod 3, the same ones on every run
    import hashlib

    held = {row["id"] for row in rows if int(hashlib.sha256(row["id"].encode()).hexdigest(), 16) % 3 == 0}
    held_total = sum(
        v["red"] + v["yellow"] + v["green"] for v in before["data"]["dev.jsonl@held"]["per_language"].values()
    )
    assert held_total == len(held)
    capsys.readouterr()
    run("rules", "report", "--rules", str(RULES), "--data", str(data), "--before", str(first), "--json", str(second))
    out = capsys.readouterr().out
    assert "### Per language" in out and "before: reds caught" in out
    assert "| en | 1/1 (100%) | 1/2 (50%) | 0/1 | 1/1 (100%) | 0/1 |" in out
    assert "Green tickets a rule fired on: A4 (yellow" in out

    # a set the earlier run did not measure: no "before" columns; a language it lacked: "–"
    more = tmp_path / "more.jsonl"
    _write_rows(more, rows[:1] + [{**rows[0], "id": "A9", "language": "fr"}])
    run("rules", "report", "--rules", str(RULES), "--data", str(data), "--also", str(more), "--before", str(first))
    out = capsys.readouterr().out
    table = out[out.index("#### `more.jsonl`") : out.index("Green tickets", out.index("#### `more.jsonl`"))]
    assert "before:" not in table and "| en | 1/1 (100%) | – | 0/0 |" in table
    start = out.index("#### `dev.jsonl`")
    lines = [line for line in out[start : out.index("Green tickets", start)].splitlines() if line.startswith("| ")]
    assert len({line.count("|") for line in lines}) == 1  # every row as wide as the head


def test_report_refuses_an_unknown_part(tmp_path, capsys):
    data = tmp_path / "dev.jsonl"
    _write_rows(data, [{"id": "T1", "body": "hello", "risk": "green", "flags": {}}])
    assert run("rules", "report", "--rules", str(RULES), "--data", str(data), "--also", f"{data}@half") == 1
    assert "fit or held" in capsys.readouterr().err
