"""PackHolder: refuse to start on a broken pack, swap only valid packs, count and log reloads."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from service import metrics
from service.l1 import PackError, PackHolder, evaluate
from tests.l1.support import GOOD_RULE, pack_text


def reloads(outcome: str) -> float:
    return metrics.REGISTRY.get_sample_value("triage_rules_reload_total", {"outcome": outcome}) or 0.0


def test_broken_pack_refuses_to_start(tmp_path):
    (tmp_path / "a.yaml").write_bytes(pack_text(GOOD_RULE.replace("level: red", "level: amber")))
    with pytest.raises(PackError, match="rule demo.delete"):
        PackHolder(tmp_path)


def test_reload_keeps_the_last_good_pack(tmp_path):
    rules = tmp_path / "a.yaml"
    rules.write_bytes(pack_text(GOOD_RULE))
    holder = PackHolder(tmp_path)
    good = holder.pack
    errors_before = reloads("error")

    rules.write_bytes(pack_text(GOOD_RULE.replace("(?:my|our)", "(?:my|our")))  # RE2 error
    with capture_logs() as logs:
        assert holder.reload() is False
    assert holder.pack is good
    assert evaluate(holder.pack, "Please delete my account.").level == "red"
    assert reloads("error") == errors_before + 1
    failure = next(entry for entry in logs if entry["event"] == "rules_reload_failed")
    assert failure["log_level"] == "error" and failure["rules_sha"] == good.sha
    assert any("rule demo.delete" in problem for problem in failure["problems"])


def test_reload_swaps_in_a_valid_pack(tmp_path):
    rules = tmp_path / "a.yaml"
    rules.write_bytes(pack_text(GOOD_RULE))
    holder = PackHolder(tmp_path)
    before = holder.pack
    ok_before = reloads("ok")

    rules.write_bytes(pack_text(GOOD_RULE.replace("level: red", "level: red  # reviewed")))
    with capture_logs() as logs:
        assert holder.reload() is True
    assert holder.pack is not before and holder.pack.sha != before.sha
    assert reloads("ok") == ok_before + 1
    swapped = next(entry for entry in logs if entry["event"] == "rules_reloaded")
    assert swapped["rules_sha"] == holder.pack.sha and swapped["previous_sha"] == before.sha


def test_reload_survives_a_vanished_directory(tmp_path):
    directory = tmp_path / "rules"
    directory.mkdir()
    (directory / "a.yaml").write_bytes(pack_text(GOOD_RULE))
    holder = PackHolder(directory)
    (directory / "a.yaml").unlink()
    directory.rmdir()
    assert holder.reload() is False
    assert holder.pack.rules[0].id == "demo.delete"


def test_reload_requested_during_a_reload_runs_again(tmp_path, monkeypatch):
    """A SIGHUP handler may interrupt a running reload: it must neither deadlock nor be lost."""
    rules = tmp_path / "a.yaml"
    rules.write_bytes(pack_text(GOOD_RULE))
    holder = PackHolder(tmp_path)
    from service.l1 import holder as holder_module

    real_load = holder_module.load_pack
    calls = []

    def load_and_get_interrupted(path):
        calls.append(path)
        if len(calls) == 1:
            # the "signal": files change and a second reload is requested mid-load
            rules.write_bytes(pack_text(GOOD_RULE.replace("demo.delete", "demo.second")))
            assert holder.reload() is False  # returns at once instead of deadlocking
        return real_load(path)

    monkeypatch.setattr(holder_module, "load_pack", load_and_get_interrupted)
    assert holder.reload() is True
    assert len(calls) == 2  # the pending request made the running reload read again
    assert holder.pack.rules[0].id == "demo.second"
