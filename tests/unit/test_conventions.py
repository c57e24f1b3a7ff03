"""Ecosystem conventions of the command line: settings honoured by every command that reads them."""

from __future__ import annotations

import pytest

from service import cli


@pytest.mark.parametrize(("env", "argv", "size"), [
    ("1.5b", ["fetch-model"], "1.5b"),
    ("0.5b", ["fetch-model"], "0.5b"),
    ("1.5b", ["fetch-model", "--size", "0.5b"], "0.5b"),  # the flag wins over the setting
])
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
