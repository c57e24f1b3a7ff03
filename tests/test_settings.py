"""Settings: environment parsing, defaults, and one clear line naming the variable at fault."""

from __future__ import annotations

import subprocess
import sys

import pytest

from service.settings import SettingsError, load_settings


def test_defaults_and_parsing():
    settings = load_settings(
        {
            "TRIAGE_PORT": "9000",
            "TRIAGE_INGEST_TOKENS": "a" * 16 + ", " + "b" * 16,
            "TRIAGE_LOG_TICKET_TEXT": "true",
            "TRIAGE_L2_TIMEOUT_S": "2.5",
        }
    )
    assert settings.port == 9000
    assert settings.ingest_tokens == ("a" * 16, "b" * 16)
    assert settings.log_ticket_text is True
    assert settings.l2_timeout_s == 2.5
    assert load_settings({}).stream_max_len == 10_000


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ({"TRIAGE_PORT": "eighty"}, "TRIAGE_PORT"),
        ({"TRIAGE_PORT": "70000"}, "TRIAGE_PORT"),
        ({"TRIAGE_L2_TIMEOUT_S": "-1"}, "TRIAGE_L2_TIMEOUT_S"),
        ({"TRIAGE_LOG_TICKET_TEXT": "maybe"}, "TRIAGE_LOG_TICKET_TEXT"),
        ({"TRIAGE_OPERATOR_TOKENS": "short"}, "TRIAGE_OPERATOR_TOKENS"),
        ({"TRIAGE_MODEL_SIZE": "7b"}, "TRIAGE_MODEL_SIZE"),
        # Each of these made the service unusable while it looked healthy.
        ({"TRIAGE_RESULT_TTL_S": "0"}, "TRIAGE_RESULT_TTL_S"),
        ({"TRIAGE_IDEMPOTENCY_TTL_S": "0"}, "TRIAGE_IDEMPOTENCY_TTL_S"),
        ({"TRIAGE_INGEST_BURST": "0"}, "TRIAGE_INGEST_BURST"),
        ({"TRIAGE_CALLBACK_ATTEMPTS": "0"}, "TRIAGE_CALLBACK_ATTEMPTS"),
        ({"TRIAGE_CALLBACK_BACKOFF_S": "0"}, "TRIAGE_CALLBACK_BACKOFF_S"),
        ({"TRIAGE_CALLBACK_TIMEOUT_S": "-5"}, "TRIAGE_CALLBACK_TIMEOUT_S"),
        ({"TRIAGE_BLOCK_MS": "0"}, "TRIAGE_BLOCK_MS"),
        ({"TRIAGE_HEARTBEAT_TTL_S": "0"}, "TRIAGE_HEARTBEAT_TTL_S"),
        ({"TRIAGE_RETRY_AFTER_S": "0"}, "TRIAGE_RETRY_AFTER_S"),
        ({"TRIAGE_MAX_REQUEST_BYTES": "0"}, "TRIAGE_MAX_REQUEST_BYTES"),
        ({"TRIAGE_MAX_TEXT_BYTES": "0"}, "TRIAGE_MAX_TEXT_BYTES"),
        ({"TRIAGE_STREAM_MAX": "-1"}, "TRIAGE_STREAM_MAX"),
        ({"TRIAGE_INGEST_RATE": "0"}, "TRIAGE_INGEST_RATE"),
        ({"TRIAGE_CALIBRATION_MIN_PER_CLASS": "0"}, "TRIAGE_CALIBRATION_MIN_PER_CLASS"),
        ({"TRIAGE_KAPPA_MIN": "1.5"}, "TRIAGE_KAPPA_MIN"),
        ({"TRIAGE_N_CTX": "100"}, "TRIAGE_N_CTX"),
        ({"TRIAGE_MAX_DELIVERIES": "0"}, "TRIAGE_MAX_DELIVERIES"),
        ({"TRIAGE_METRICS_PORT": "-1"}, "TRIAGE_METRICS_PORT"),
        ({"TRIAGE_REDIS_PREFIX": ""}, "TRIAGE_REDIS_PREFIX"),
        # Related settings, each fine alone.
        ({"TRIAGE_CALLBACK_HOSTS": "hooks.example.com"}, "TRIAGE_CALLBACK_SECRET"),
        ({"TRIAGE_CALLBACK_HOSTS": "hooks.example.com", "TRIAGE_CALLBACK_SECRET": "plain"}, "TRIAGE_CALLBACK_SECRET"),
        ({"TRIAGE_MAX_TEXT_BYTES": "100000", "TRIAGE_MAX_REQUEST_BYTES": "65536"}, "TRIAGE_MAX_TEXT_BYTES"),
    ],
)
def test_invalid_values_name_the_variable(env, name):
    with pytest.raises(SettingsError, match=name) as raised:
        load_settings(env)
    message = str(raised.value)
    assert message.startswith(f"{name}: ") and "\n" not in message
    assert "plain" not in message  # secrets are never echoed


def test_keyword_overrides_are_checked_too():
    with pytest.raises(SettingsError, match="TRIAGE_INGEST_BURST"):
        load_settings({}, ingest_burst=0)


def test_callbacks_with_a_secret_and_rotation_are_accepted():
    from service.webhooks import new_secret

    old, new = new_secret(), new_secret()
    settings = load_settings({"TRIAGE_CALLBACK_HOSTS": "hooks.example.com", "TRIAGE_CALLBACK_SECRET": f"{old}, {new}"})
    assert settings.callback_secret == (old, new)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TRIAGE_PORT", "x"),  # not a number
        ("TRIAGE_RESULT_TTL_S", "0"),
    ],
)  # out of bounds
def test_invalid_setting_stops_startup_with_one_line(name, value):
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", "serve"],
        env={name: value, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and name in lines[0], lines


def test_effective_lists_every_variable_and_masks_secrets():
    from service.settings import ENV, effective, load_settings

    env = {
        "TRIAGE_INGEST_TOKENS": "ing_aaaaaaaaaaaaaaaaaaaa,ing_bbbbbbbbbbbbbbbbbbbb",
        "TRIAGE_CALLBACK_SECRET": "whsec_czNjcmV0LXZhbHVlLXMzY3JldC12YWx1ZS0wMQ==",
        "REDIS_URL": "redis://app:hunter2@cache:6380/0",
        "TRIAGE_PORT": "8010",
    }
    rows = {name: (value, source) for name, value, source in effective(load_settings(env), env)}
    assert set(rows) == set(ENV.values())
    assert rows["TRIAGE_INGEST_TOKENS"] == ("<2 set>", "env")
    assert rows["TRIAGE_CALLBACK_SECRET"] == ("<1 set>", "env")
    assert rows["REDIS_URL"] == ("redis://app:***@cache:6380/0", "env")
    assert rows["TRIAGE_PORT"] == ("8010", "env")
    assert rows["TRIAGE_N_CTX"] == ("4096", "default")
    printed = " ".join(value for value, _ in rows.values())
    assert "hunter2" not in printed and "czNjcmV0" not in printed and "ing_a" not in printed
