"""Ecosystem conventions of the command line: settings honoured by every command that reads them."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from service import cli


@pytest.mark.parametrize(
    ("env", "argv", "size"),
    [
        ("1.5b", ["fetch-model"], "1.5b"),
        ("0.5b", ["fetch-model"], "0.5b"),
        ("1.5b", ["fetch-model", "--size", "0.5b"], "0.5b"),  # the flag wins over the setting
    ],
)
def test_fetch_model_honours_triage_model_size(env, argv, size, monkeypatch, tmp_path, capsys):
    seen = {}

    def fake_fetch(model_dir, size, quiet=False):
        seen.update(dir=model_dir, size=size, quiet=quiet)
        return tmp_path / "model.gguf"

    monkeypatch.setenv("TRIAGE_MODEL_SIZE", env)
    monkeypatch.setenv("TRIAGE_MODEL_DIR", str(tmp_path))
    monkeypatch.setattr("service.model_fetch.fetch_model", fake_fetch)
    monkeypatch.setattr("service.logs.configure_logging", lambda *a, **k: None)  # global state
    assert cli.main([*argv, "--quiet"]) == 0
    assert seen == {"dir": str(tmp_path), "size": size, "quiet": True}
    assert capsys.readouterr().out == f"{tmp_path / 'model.gguf'}\n"


ROOT = Path(__file__).resolve().parents[1]


def test_pytest_is_strict_and_every_warning_filter_is_named():
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "--strict-markers" in options["addopts"].split()
    assert options["xfail_strict"] is True
    filters = options["filterwarnings"]
    assert filters[0] == "error"
    for entry in filters[1:]:
        action, message, category = (entry.split(":") + ["", ""])[:3]
        assert action == "ignore" and message and category, f"not a named filter: {entry!r}"


def test_make_lint_checks_and_format_checks_every_python_folder():
    text = (ROOT / "Makefile").read_text()
    linted = next(line.split(":=", 1)[1].split() for line in text.splitlines() if line.startswith("LINTED"))
    assert set(linted) == {"service", "tests", "loadtest", "deploy"}
    recipe = text.split("\nlint:", 1)[1].split("\n\n", 1)[0]
    assert "ruff check $(LINTED)" in recipe and "ruff format --check $(LINTED)" in recipe
