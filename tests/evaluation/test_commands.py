"""`triage eval` through the console script's parser: JSON to stdout, failures in one line."""

from __future__ import annotations

import io
import json
import sys

import pytest

from service import cli
from service.evaluation.run import write_rows
from service.results import L2Result
from tests.evaluation.support import FixedL2, scored


@pytest.fixture
def rows_file(tmp_path):
    rows = [
        scored(0, "green", 0.95),
        scored(1, "green", 0.85),
        scored(2, "green", 0.6),
        scored(3, "yellow", 0.5),
        scored(4, "red", 0.2, 0.6, lang="fr", category="account"),
    ]
    path = tmp_path / "rows.jsonl"
    write_rows(path, rows)
    return path


def test_json_dash_writes_the_report_to_stdout(rows_file, capsys):
    assert cli.main(["eval", "--from-rows", str(rows_file), "--json", "-"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)  # stdout is the JSON and nothing else
    assert report["n"] == 5 and report["greens_cleared"] == pytest.approx(2 / 3)
    assert report["answered_automatically"] == pytest.approx(2 / 5)
    assert report["false_green_ids"] == [] and report["red_recall"] == 1.0
    assert report["per_category"]["account"]["n"] == 1
    assert [p["green"] for p in report["green_curve"]][:2] == [0.5, 0.51]
    assert "L1 + L2 (final)" in err  # the table goes to stderr


def test_json_file_keeps_the_identity_of_the_run(rows_file, tmp_path, capsys):
    out = tmp_path / "eval" / "out.json"
    out.parent.mkdir()
    out.write_text(json.dumps({"model": {"name": "m.gguf"}, "rules_sha": "r" * 64, "thresholds": {"green": 0.9}}))
    assert cli.main(["eval", "--from-rows", str(rows_file), "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["model"] == {"name": "m.gguf"} and report["rules_sha"] == "r" * 64
    # the curve moves from the stored thresholds: at 0.9 only the 0.95 green clears
    at = {p["green"]: p for p in report["green_curve"]}
    assert at[0.9]["greens_cleared"] == pytest.approx(1 / 3)
    assert "L1 + L2 (final)" in capsys.readouterr().out


def test_eval_fails_without_l1_before_loading_the_model(tmp_path, monkeypatch, capsys):
    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps({"id": "A", "body": "How do I export invoices?", "risk": "green"}) + "\n")

    def no_model(*args, **kwargs):
        raise AssertionError("the model must not load when L1 is missing")

    monkeypatch.setattr("service.l2.Classifier.from_settings", no_model)
    monkeypatch.setitem(sys.modules, "service.l1", None)  # import service.l1 -> ImportError
    code = cli.main(["eval", "--data", str(data), "--json", str(tmp_path / "out.json")])
    err = capsys.readouterr().err
    assert code != 0 and not (tmp_path / "out.json").exists()
    assert err.startswith("triage eval: L1 cannot be imported") and err.count("\n") == 1


def test_a_bad_labelled_file_is_one_line(tmp_path, capsys):
    data = tmp_path / "bad.jsonl"
    data.write_text('{"id": "B", "body": "x"}\n')
    assert cli.main(["eval", "--data", str(data), "--json", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl:1" in err and err.count("\n") == 1


def test_plots_are_written_beside_the_json(rows_file, tmp_path, capsys):
    plots = tmp_path / "plots"
    assert (
        cli.main(["eval", "--from-rows", str(rows_file), "--json", str(tmp_path / "o.json"), "--plots", str(plots)])
        == 0
    )
    for name in ("confusion.png", "green-threshold.png"):
        assert (plots / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    assert str(plots / "confusion.png") in capsys.readouterr().err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("quiet", [False, True])
def test_replay_draws_progress_on_a_terminal_unless_quiet(tmp_path, monkeypatch, quiet):
    data = tmp_path / "two.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"P-{i}", "body": "How do I export invoices?", "risk": "green"}) + "\n" for i in range(2)
        )
    )
    yellow = L2Result(level="yellow", method="logits", reason="P(green)=0.50 < 0.80")
    monkeypatch.setattr("service.l2.Classifier.from_settings", lambda *a, **k: FixedL2(yellow))
    monkeypatch.setattr("service.logs.configure_logging", lambda level: None)  # global state
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    argv = [
        "eval",
        "--data",
        str(data),
        "--json",
        str(tmp_path / "o.json"),
        "--rows",
        str(tmp_path / "rows.jsonl"),
        "--calibration",
        "none",
    ] + (["--quiet"] if quiet else [])
    assert cli.main(argv) == 0
    drawn = terminal.getvalue()
    assert ("2/2" in drawn and "ticket/s" in drawn) is not quiet
    assert len((tmp_path / "rows.jsonl").read_text().splitlines()) == 2
    assert json.loads((tmp_path / "o.json").read_text())["greens_cleared"] == 0.0


def test_replay_draws_nothing_in_a_pipe(tmp_path, monkeypatch, capsys):
    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps({"id": "P-1", "body": "How do I export?", "risk": "green"}) + "\n")
    green = L2Result(level="green", method="logits", reason="P(green)=0.90 >= 0.80")
    monkeypatch.setattr("service.l2.Classifier.from_settings", lambda *a, **k: FixedL2(green))
    assert cli.main(["eval", "--data", str(data), "--json", "-", "--calibration", "none"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["answered_automatically"] == 1.0
    assert "ticket/s" not in err and "L1 + L2 (final)" in err
