"""Settings: environment parsing, defaults, and one clear line naming the variable at fault."""

from __future__ import annotations

import subprocess
import sys

import pytest

from service.settings import SettingsError, load_settings


def test_defaults_and_parsing():
    settings = load_settings({"TRIAGE_PORT": "9000", "TRIAGE_INGEST_TOKENS": "a" * 16 + ", " +
                              "b" * 16, "TRIAGE_LOG_TICKET_TEXT": "true",
                              "TRIAGE_L2_TIMEOUT_S": "2.5"})
    assert settings.port == 9000
    assert settings.ingest_tokens == ("a" * 16, "b" * 16)
    assert settings.log_ticket_text is True
    assert settings.l2_timeout_s == 2.5
    assert load_settings({}).stream_max_len == 10_000


@pytest.mark.parametrize(("env", "name"), [
    ({"TRIAGE_PORT": "eighty"}, "TRIAGE_PORT"),
    ({"TRIAGE_PORT": "70000"}, "TRIAGE_PORT"),
    ({"TRIAGE_L2_TIMEOUT_S": "-1"}, "TRIAGE_L2_TIMEOUT_S"),
    ({"TRIAGE_LOG_TICKET_TEXT": "maybe"}, "TRIAGE_LOG_TICKET_TEXT"),
    ({"TRIAGE_OPERATOR_TOKENS": "short"}, "TRIAGE_OPERATOR_TOKENS"),
    ({"TRIAGE_MODEL_SIZE": "7b"}, "TRIAGE_MODEL_SIZE"),
])
def test_invalid_values_name_the_variable(env, name):
    with pytest.raises(SettingsError, match=name):
        load_settings(env)


def test_invalid_setting_stops_startup_with_one_line():
    done = subprocess.run([sys.executable, "-m", "service.cli", "serve"],
                          env={"TRIAGE_PORT": "x", "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "TRIAGE_PORT" in lines[0]


def test_effective_lists_every_variable_and_masks_secrets():
    from service.settings import ENV, effective, load_settings

    env = {"TRIAGE_INGEST_TOKENS": "ing_aaaaaaaaaaaaaaaaaaaa,ing_bbbbbbbbbbbbbbbbbbbb",
           "TRIAGE_CALLBACK_SECRET": "s3cret-value", "REDIS_URL": "redis://app:hunter2@cache:6380/0",
           "TRIAGE_PORT": "8010"}
    rows = {name: (value, source) for name, value, source in effective(load_settings(env), env)}
    assert set(rows) == set(ENV.values())
    assert rows["TRIAGE_INGEST_TOKENS"] == ("<2 set>", "env")
    assert rows["TRIAGE_CALLBACK_SECRET"] == ("<set>", "env")
    assert rows["REDIS_URL"] == ("redis://app:***@cache:6380/0", "env")
    assert rows["TRIAGE_PORT"] == ("8010", "env")
    assert rows["TRIAGE_N_CTX"] == ("4096", "default")
    printed = " ".join(value for value, _ in rows.values())
    assert "hunter2" not in printed and "s3cret" not in printed and "ing_a" not in printed
